"""The calibration benchmark's scores for every reference behaviour, as a markdown table.

    python benchmarks/calibration_report.py [--samples 300] [--out DIR]

The numbers in the README's calibration table come from this script.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run

BEHAVIORS = ("faithful", "prior", "stale", "mixed:0.5")
COLUMNS = ("ccs_binary", "ccs_graded", "ac_k1", "ac_k2", "ef_k1", "ef_k2")


def _cell(m: dict) -> str:
    return "–" if not m["n"] else f"{m['estimate']:.3f} [{m['low']:.2f}, {m['high']:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="edct-calibration-"))
    lines = [
        "| target behaviour | CCS_binary | CCS_graded | AC k=1 | AC k=2 | EF k=1 | EF k=2 "
        "| scored / excluded / unscored |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for behavior in BEHAVIORS:
        base = calibration_config(behavior, n=args.samples, output_dir=root / behavior.replace(":", "_"))
        cfg = config_from_dict({**base.model_dump(mode="json"), "progress": False})
        overall = run(cfg).results["results"]["overall"]
        m, c = overall["metrics"], overall["counts"]
        lines.append(
            f"| `{behavior}` | "
            + " | ".join(_cell(m[k]) for k in COLUMNS)
            + f" | {c['scored']} / {c['excluded']} / {c['unscored']} |"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
