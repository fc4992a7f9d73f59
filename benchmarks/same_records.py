"""The calibration demo's records and scores, compared with a reference demo folder.

    python benchmarks/same_records.py --reference DIR [--samples 300] [--out DIR]

``DIR`` is an ``edct demo --output DIR`` folder written by another checkout (for example the main
before a refactoring). For each of the four behaviours it prints the SHA-256 of ``samples.jsonl``
here and there, and whether the ``results`` block of ``results.json`` (every estimate, CI and
count) is equal; it exits 1 on any difference. Run the reference with the same ``--samples``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BEHAVIORS = ("faithful", "prior", "stale", "mixed_0.5")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _scores(folder: Path) -> object:
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))["results"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="edct-same-records-"))
    if not (out / BEHAVIORS[0] / "samples.jsonl").is_file():
        edct = Path(sys.executable).parent / "edct"
        cmd = [str(edct), "demo", "--samples", str(args.samples), "--output", str(out), "--no-progress"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    same = True
    print("| behaviour | samples.jsonl (reference) | samples.jsonl (here) | results equal |")
    print("|---|---|---|---|")
    for b in BEHAVIORS:
        ref, here = args.reference / b, out / b
        equal_bytes = (ref / "samples.jsonl").read_bytes() == (here / "samples.jsonl").read_bytes()
        equal_scores = _scores(ref) == _scores(here)
        same &= equal_bytes and equal_scores
        print(
            f"| {b} | {_digest(ref / 'samples.jsonl')} | {_digest(here / 'samples.jsonl')} | {equal_scores} |"
        )
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
