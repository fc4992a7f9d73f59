"""``edct merge SHARD_DIR… --output RUN``: the ``--shard I/N`` jobs of one run joined into one run
folder, checked first (``edct_task.scale.merge``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "merge",
        help="join the output folders of `edct run --shard I/N` jobs into one run folder",
        description="Join the N slices of one run (each an `edct run --shard I/N` output folder) into the "
        "run folder the unsharded run writes: samples.jsonl in document order, statistics recomputed over "
        "all records. Refuses shards of different datasets or setups, overlapping or missing slices and "
        "damaged shards, with one line naming them.",
    )
    p.add_argument("shards", nargs="+", type=Path, metavar="SHARD_DIR", help="the shards' output folders")
    add_output(p, "the merged run folder (not one of the shards)", required=True, metavar="RUN")
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="merge the slices given even when some are missing; the result is labelled partial "
        "(results.json config.data.partial names the missing slices)",
    )


def run(args: argparse.Namespace) -> int:
    from edct_task.scale.merge import merge_shards, write_merged
    from edct_task.scoring.table import score_table

    merged = merge_shards(args.shards, allow_missing=args.allow_missing)
    write_merged(merged, args.output)
    n = len(merged.shards)
    print(score_table(merged.log.results))
    label = f"PARTIAL: slices {', '.join(merged.missing)} missing; " if merged.partial else ""
    print(f"\n{label}merged {n} shard(s), {len(merged.records)} samples, into {args.output}")
    return 0
