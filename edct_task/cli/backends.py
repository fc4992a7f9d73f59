"""``edct backends``: the registered backends per role kind."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("backends", help="list registered backends")


def run(args: argparse.Namespace) -> int:
    from edct_task.roles import available_backends

    print(json.dumps(available_backends(), indent=2))
    return 0
