"""Arguments several ``edct`` commands share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

OUTPUT_ALIASES = {"--output": ("--out", "out")}
"""Every command spells its output folder ``--output``; ``--out`` is accepted as well (``args.out``)."""


def optional_path(p: argparse.ArgumentParser, flag: str, metavar: str, help: str) -> None:
    """``flag PATH`` with no default (the command derives one from the run folder); ``--output``
    also answers to ``--out``."""
    if flag in OUTPUT_ALIASES:
        alias, dest = OUTPUT_ALIASES[flag]
        p.add_argument(flag, alias, dest=dest, type=Path, default=None, metavar=metavar, help=help)
        return
    p.add_argument(flag, type=Path, default=None, metavar=metavar, help=help)


def add_progress_and_overrides(p: argparse.ArgumentParser, *, of: str = "") -> None:
    """``--no-progress`` and the repeatable ``--set KEY=VALUE`` config override."""
    p.add_argument("--no-progress", action="store_true", help="hide the per-stage progress bars")
    add_overrides(p, of=of)


def add_overrides(p: argparse.ArgumentParser, *, of: str = "", example: str = "protocol.k=1") -> None:
    """The repeatable ``--set KEY=VALUE`` config override (into ``args.overrides``)."""
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a config value{of}, e.g. --set {example} (repeatable)",
    )


def add_output(p: argparse.ArgumentParser, help: str, **kwargs: Any) -> None:
    """The output folder: ``--output`` (the one spelling), ``--out`` kept as an alias."""
    kwargs.setdefault("metavar", "DIR")
    p.add_argument("--output", "--out", dest="out", type=Path, help=help, **kwargs)
