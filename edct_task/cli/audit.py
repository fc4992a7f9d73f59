"""``edct audit RUN --output DIR``: a static HTML report of one run that opens from ``file://``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="static HTML audit report of a run (index + one page per sample), opens from file://",
        description="Write a self-contained HTML report of a run: every sample with its status and scores "
        "(filterable, sortable), and per sample the edit chain, every attempt's verification (r_in, r_out, "
        "mask share, alignment, change heatmap, mask overlay), the re-queries and every judge vote.",
    )
    p.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN",
        help="an `edct run` output folder or lmms-eval output with logged samples",
    )
    add_output(
        p, "report folder, index.html is written there (default RUN/audit, where `edct report` finds it)"
    )


def run(args: argparse.Namespace) -> int:
    from edct_task.audit.links import AUDIT_DIR
    from edct_task.audit.report import write_audit
    from edct_task.run.outputs import RunReadError, load_run

    if args.output is None:
        args.output = args.run_dir / AUDIT_DIR
    try:
        loaded = load_run(args.run_dir)
    except RunReadError as exc:
        print(f"edct audit: {exc}", file=sys.stderr)
        return 2
    if args.output.exists() and not args.output.is_dir():
        print(
            f"edct audit: --output {args.output} exists and is not a folder; name a folder for the report",
            file=sys.stderr,
        )
        return 2
    try:
        summary = write_audit(loaded, args.output, source=str(args.run_dir))
    except OSError as exc:
        print(f"edct audit: cannot write the report into {args.output}: {exc}", file=sys.stderr)
        return 2
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(summary.by_status.items()))
    print(f"audit report of {summary.samples} samples ({statuses}): {summary.index.resolve().as_uri()}")
    if summary.partial:
        print(f"{summary.partial}: the numbers cover only the slices that were run")
    if summary.missing_images:
        print(
            f"note: {summary.missing_images} image(s) of the run were not found and are marked in the report"
        )
    return 0
