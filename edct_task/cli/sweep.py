"""``edct sweep SWEEP.yaml``: models × configs × seeds × shards as jobs on Ray (or one after
another), every run's shards merged, one table of every model's CCS (``edct_task.scale``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="run models × configs × seeds × shards as jobs (Ray tasks, or locally), merged",
        description="Expand a sweep file into `edct run` jobs (one per model, config, seed and shard), run "
        "them as Ray tasks (a local Ray cluster by default, --address for a running one; without Ray, one "
        "after another), retry failed jobs, merge each run's shards and print every model's CCS with its "
        "CI. --emit-slurm writes the same jobs as an sbatch job array and a dependent merge job instead.",
    )
    p.add_argument("sweep", type=Path, metavar="SWEEP.yaml", help="the sweep file (see docs/guides/scale.md)")
    add_output(p, "folder of the jobs and merged runs (overrides the sweep file's output)")
    p.add_argument(
        "--address", default=None, help="a running Ray cluster's address (default: start one here)"
    )
    p.add_argument("--local", action="store_true", help="run the jobs one after another here, without Ray")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="CPUs of the local Ray cluster (default: this machine's); a job asks for resources.num_cpus",
    )
    p.add_argument("--merge-only", action="store_true", help="only merge finished jobs and print the table")
    p.add_argument(
        "--emit-slurm",
        type=Path,
        default=None,
        metavar="DIR",
        help="write jobs.sbatch (a job array), merge.sbatch and submit.sh to DIR instead of running",
    )
    p.add_argument(
        "--max-parallel",
        type=int,
        default=None,
        metavar="N",
        help="--emit-slurm: at most N array tasks at once (sbatch --array=…%%N)",
    )


def run(args: argparse.Namespace) -> int:
    from edct_task.core.errors import ConfigError
    from edct_task.scale.execute import make_executor, merge_groups, run_jobs, summary_table
    from edct_task.scale.slurm import emit
    from edct_task.scale.sweep import expand

    if args.workers is not None and args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    sweep = expand(args.sweep, output=args.output)
    jobs = sweep.jobs
    if args.emit_slurm is not None:
        written = emit(sweep, args.sweep, args.emit_slurm, args.max_parallel)
        print(f"{len(jobs)} array task(s); submit with: bash {written[-1]}")
        return 0
    if not args.merge_only:
        executor = make_executor("local" if args.local else "auto", args.address, args.workers)
        gpus = sum(j.num_gpus > 0 for j in jobs)
        print(
            f"{len(jobs)} job(s) in {len(sweep.groups)} run(s) on {executor.name}"
            + (f", {gpus} asking for a GPU" if gpus else "")
        )
        run_jobs(jobs, executor, sweep.spec.retries)
    results = merge_groups(sweep)
    print()
    print(summary_table(results))
    return 0
