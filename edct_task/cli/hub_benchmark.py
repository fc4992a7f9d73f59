"""``edct hub-benchmark OUT --dataset-id ORG/NAME``: the Hub benchmark dataset repo (``eval.yaml``,
README card) whose task ids are the metric names ``edct submit --eval-results`` writes."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from edct_task.core.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "hub-benchmark",
        help="write the Hub benchmark dataset repo (eval.yaml, README) that eval-results files name",
        description="Write the files of the Hugging Face Hub benchmark dataset repository that `edct submit "
        "--eval-results` entries point at: eval.yaml (one task per EDCT metric, validated against the "
        "Hub's documented schema) and a README card. Push OUT as the dataset repo, then ask for "
        "allow-listing.",
    )
    p.add_argument("output", metavar="OUT", type=Path, help="folder to write (the dataset repo's root)")
    p.add_argument("--dataset-id", required=True, help="the benchmark's Hub dataset id, org/name")
    p.add_argument("--name", default="EDCT-Bench", help="the benchmark's display name (eval.yaml name)")
    p.add_argument("--config", default="default", help="the dataset config the tasks read (default: default)")
    p.add_argument("--split", default="test", help="the dataset split the tasks read (default: test)")


def run(args: argparse.Namespace) -> int:
    from edct_task.leaderboard.eval_results import write_benchmark_repo

    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", args.dataset_id):
        raise ConfigError(f"--dataset-id {args.dataset_id!r}: give the Hub dataset id as org/name")
    if args.output.exists() and not args.output.is_dir():
        raise ConfigError(f"{args.output} is a file: give a folder for the dataset repo")
    written = write_benchmark_repo(
        args.output, dataset_id=args.dataset_id, name=args.name, config=args.config, split=args.split
    )
    print(f"wrote {', '.join(p.name for p in written)} into {args.output} (benchmark {args.dataset_id})")
    return 0
