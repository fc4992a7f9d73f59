"""``edct backends``: the registered backends per role kind."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "backends",
        help="list the backends each role can use",
        description="List the registered backends per role kind (and the detector's segmenters).",
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON")


def run(args: argparse.Namespace) -> int:
    from edct_task.roles import available_backends

    table = available_backends()
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    width = max(len(role) for role in table)
    for role, names in table.items():
        note = "  (detector option: segmenter: {backend: …})" if role == "segmenter" else ""
        print(f"{role:<{width}}  {', '.join(names)}{note}")
    return 0
