"""The tiny-VLM recipe's spread over training seeds: what ``agreement.TARGETS`` is set below.

For each behaviour and seed, trains the recipe (``edct tiny-vlm train``, the pinned numeric
environment) into OUT/<behavior>-s<seed>, or reuses a finished folder there, measures its agreement
with the faithful reference on the 60 held-out scenes, and prints one table: the weights' SHA-256
prefix, answers and explanations out of 60, and whether seed 0 is bit-identical to the shipped
checkpoint. About 10 CPU-minutes per faithful training and 4 per prior one.

    python benchmarks/tiny_vlm_seeds.py --out /tmp/seeds [--seeds 0,1,2] [--behaviors faithful,prior]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edct_task.tiny_vlm.agreement import TARGETS, as_record, measure
from edct_task.tiny_vlm.store import is_recipe, shipped_info, training_info
from edct_task.tiny_vlm.training import TRAINING_INFO, recipe, train, write_info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder of the trained checkpoints")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds")
    p.add_argument("--behaviors", default="faithful,prior", help="comma-separated behaviours")
    args = p.parse_args(argv)
    rows = []
    for behavior in args.behaviors.split(","):
        shipped = shipped_info(behavior)["weights_sha256"]
        for seed in (int(s) for s in args.seeds.split(",")):
            folder = args.out / f"{behavior}-s{seed}"
            if not (folder / TRAINING_INFO).is_file():
                train(folder, recipe(behavior, seed=seed), log=lambda line: print(line, file=sys.stderr))
            info = training_info(folder)
            if "agreement" not in info:
                info["agreement"] = as_record(measure(folder, n=TARGETS[behavior].n))
                write_info(folder, info)
            a = info["agreement"]
            same = "yes" if info["weights_sha256"] == shipped else "no"
            rows.append((behavior, seed, info["weights_sha256"][:12], a["answers"], a["explanations"], same))
            assert seed != 0 or is_recipe(info, behavior)
    print(f"{'behaviour':<10} {'seed':>4}  {'weights':<12}  {'answers':>7}  {'explan.':>7}  shipped")
    for behavior, seed, sha, answers, explanations, same in rows:
        print(f"{behavior:<10} {seed:>4}  {sha:<12}  {answers:>5}/60  {explanations:>5}/60  {same}")
    for behavior in args.behaviors.split(","):
        print(f"targets, {behavior}: {TARGETS[behavior].describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
