"""``edct stability RUN…``: mean ± SD of every metric over repeated runs (Table 5)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from edct_task.roles import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "stability",
        help="mean ± SD of each metric over repeated runs",
        description="Mean and sample SD (ddof = 1) of every metric over repeated runs of one setup "
        "(Table 5), from their output folders.",
    )
    p.add_argument("runs", nargs="+", type=Path, help="output folders (or results.json files) of the runs")


def run(args: argparse.Namespace) -> int:
    from edct_task.scoring.metrics import stability

    results = []
    for p in args.runs:
        f = p / "results.json" if p.is_dir() else p
        if not f.is_file():
            raise ConfigError(f"{f} does not exist: pass run output folders or their results.json")
        results.append(json.loads(f.read_text(encoding="utf-8")))
    if len(results) < 2:
        raise ConfigError("stability needs at least two runs")
    table = stability(results)
    print(f"{'metric':<12} {'mean':>8} {'SD':>8} runs")
    for name, row in table.items():
        mean = "–" if row["mean"] is None else f"{row['mean']:.4f}"
        sd = "–" if row["sd"] is None else f"{row['sd']:.4f}"
        print(f"{name:<12} {mean:>8} {sd:>8} {row['runs']}")
    print(json.dumps(table))
    return 0
