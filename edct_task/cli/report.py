"""``edct report PATH... --output DIR [--label PATH=NAME]``: the paper's tables, Fig. 5 and report.json."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output
from edct_task.core.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="Tables 1/2/3/5, CCS beside other benchmarks and Fig. 5 from lmms-eval results, "
        "`edct run` folders and bundles",
        description="Read finished runs (lmms-eval output folders, `edct run` folders, leaderboard bundles) "
        "and write the paper's tables (Markdown, CSV, LaTeX), CCS beside every other benchmark found for "
        "the same models with rank correlations, Fig. 5 and report.json. Never re-runs a model.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        help="lmms-eval output folders (--output_path, with --log_samples for CIs), `edct run` "
        "output folders, or leaderboard bundles (.edct.zip)",
    )
    add_output(p, "folder for report.md, tables, figures, report.json", required=True)
    p.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="PATH=NAME",
        help="name every result found under PATH as model NAME (repeatable; for runs of one model "
        "whose lmms-eval model names or args differ)",
    )


def parse_labels(items: list[str]) -> dict[Path, str]:
    labels = {}
    for item in items:
        path, sep, name = item.partition("=")
        if not sep or not path or not name.strip():
            raise ConfigError(
                f"--label {item!r}: write --label PATH=NAME, e.g. --label results/run1=Qwen3-VL-8B"
            )
        labels[Path(path)] = name.strip()
    return labels


def run(args: argparse.Namespace) -> int:
    from edct_task.leaderboard.bundle import BundleError, read_bundle
    from edct_task.reporting.report import REPORT_MD, build_report
    from edct_task.reporting.sources import ReportInputError
    from edct_task.run.outputs import RunReadError

    labels = parse_labels(args.label)
    for path in labels:
        if not path.exists():
            raise ConfigError(
                f"--label {path}=…: {path} does not exist (PATH is an input or a folder inside one)"
            )
    try:
        report = build_report(
            args.paths, args.output, labels, read_bundle=lambda path: read_bundle(path).edct_run()
        )
    except (ReportInputError, RunReadError, BundleError) as exc:
        raise ConfigError(str(exc)) from None
    print((args.output / REPORT_MD).read_text(encoding="utf-8").split("### Table 2")[0].rstrip())
    print(
        f"\nwrote {args.output / REPORT_MD}, report.json, {len(report['tables'])} tables (.md/.csv/.tex)"
        + (f", {' and '.join(report['figures'])}" if report["figures"] else "")
    )
    return 0
