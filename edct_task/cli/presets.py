"""``edct presets [--show NAME]``: the shipped run-config presets."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "presets",
        help="list the shipped run-config presets (or print one with --show)",
        description="List the run-config presets shipped with edct-bench: their names work wherever a "
        "config file does (edct run --config NAME). With --show NAME, print that preset's YAML, to copy "
        "and edit.",
    )
    p.add_argument("--show", metavar="NAME", help="print the YAML of this preset")


def run(args: argparse.Namespace) -> int:
    from edct_task.presets import (
        load_preset,
        preset_description,
        preset_dir,
        preset_names,
        preset_path,
        preset_text,
    )

    if args.show:
        path = preset_path(args.show)
        load_preset(path)  # a shipped preset always validates; a broken one fails here with exit 2
        print(f"# {path}")
        print(preset_text(path), end="")
        return 0
    names = preset_names()
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {preset_description(name)}")
    print(f"\n{len(names)} presets in {preset_dir()}; use one with: edct run --config NAME")
    return 0
