"""Arguments several ``edct`` commands share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

OUTPUT_FLAG = "--output"
OUTPUT_ALIASES = ("--out",)
OUTPUT_DEST = "output"
"""Every command spells what it writes ``--output`` (``--out`` accepted as well) and reads it as
``args.output``: :func:`add_output` is the one definition."""


def optional_path(p: argparse.ArgumentParser, flag: str, metavar: str, help: str) -> None:
    """``flag PATH`` with no default (the command derives one from the run folder); the output
    folder is :func:`add_output`'s."""
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
    """What the command writes (a folder unless ``metavar`` says otherwise): ``--output``, the one
    spelling, with the :data:`OUTPUT_ALIASES` accepted, into ``args.output`` (a ``Path``; ``None``
    when left out, unless ``required=True`` or a ``default`` is given)."""
    kwargs.setdefault("metavar", "DIR")
    p.add_argument(OUTPUT_FLAG, *OUTPUT_ALIASES, dest=OUTPUT_DEST, type=Path, help=help, **kwargs)
