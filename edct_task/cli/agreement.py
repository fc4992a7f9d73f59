"""``edct agreement LABELS.jsonl… --run RUN [--output DIR]``: the paper's Table 4 (human validation)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output
from edct_task.engine.files import atomic_write


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "agreement",
        help="human–human, human–EDCT and gate–human agreement from annotators' label files (Table 4)",
        description="Agreement on CCS_binary and on edit validity between annotators (edct annotate label "
        "files) and EDCT's own verdicts: agree/n, rate, 95% Wilson interval and Cohen's kappa per pair, the "
        "human consensus vs EDCT, 'all identical', and how many labels were missing, invalid or not "
        "assessable.",
    )
    p.add_argument(
        "labels", nargs="+", type=Path, metavar="LABELS.jsonl", help="label files written by `edct annotate`"
    )
    p.add_argument(
        "--run", dest="run_dir", type=Path, required=True, metavar="RUN", help="the run the labels are of"
    )
    p.add_argument(
        "--not-assessable",
        choices=("invalid", "missing"),
        default="invalid",
        help="edit validity: count a 'not assessable' label as not valid (invalid: the paper's definition, "
        "every intervention counts; default) or leave it out (missing)",
    )
    add_output(
        p, "folder for agreement.md, .csv and .json (default RUN/agreement; the Markdown is also printed)"
    )


def run(args: argparse.Namespace) -> int:
    from edct_task.annotation.agreement import (
        UnknownInterventionError,
        agreement_report,
        dumps_json,
        to_csv,
        to_markdown,
    )
    from edct_task.annotation.interventions import edct_verdicts
    from edct_task.annotation.labels import LabelFileError, read_label_files
    from edct_task.run.outputs import RunReadError, load_run

    try:
        loaded = load_run(args.run_dir)
        labels = read_label_files(args.labels)
        report = agreement_report(labels, edct_verdicts(loaded.records), not_assessable=args.not_assessable)
    except (RunReadError, LabelFileError, UnknownInterventionError) as exc:
        print(f"edct agreement: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"edct agreement: {exc}: pass the files `edct annotate` wrote", file=sys.stderr)
        return 2
    markdown = to_markdown(report)
    from edct_task.audit.links import AGREEMENT_DIR

    out = args.output if args.output is not None else args.run_dir / AGREEMENT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "agreement.md", markdown)
        atomic_write(out / "agreement.csv", to_csv(report))
        atomic_write(out / "agreement.json", dumps_json(report))
    except OSError as exc:
        print(f"edct agreement: cannot write into {out}: {exc}; pass --output DIR", file=sys.stderr)
        return 2
    print(markdown)
    print(f"written: {out / 'agreement.md'}, agreement.csv, agreement.json")
    return 0
