"""``edct demo``: the calibration reference models side by side, and the report folder.

Runs the calibration benchmark (procedural scenes whose true faithfulness is known) once per
reference behaviour (default: faithful, prior, stale, mixed:0.5), prints Table 1 for them side
by side and writes ``<output>/report/`` (the paper's tables, Fig. 5 against baseline answer
accuracy, report.json). The behaviours share one stage cache: the text roles, the editor and
verification are deterministic, so every edit and its verification is computed once, by the
first behaviour, and reused by the others.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

DEFAULT_BEHAVIORS = ("faithful", "prior", "stale", "mixed:0.5")


def add_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="the calibration reference models (faithful, prior, stale, mixed:0.5) side by side, offline",
    )
    demo.add_argument(
        "--behavior",
        dest="behaviors",
        action="append",
        default=None,
        help="reference target: faithful, prior, stale or mixed:P (repeatable; default the four above)",
    )
    demo.add_argument("-n", "--samples", type=int, default=300, help="number of calibration samples (300)")
    demo.add_argument("--output", type=Path, default=Path("runs/demo"), help="output folder (runs/demo)")
    demo.add_argument("--no-progress", action="store_true", help="hide the per-stage progress bars")
    demo.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value of every run, e.g. --set protocol.k=1 (repeatable)",
    )


def _folder(behavior: str) -> str:
    return behavior.replace(":", "_")


def side_by_side(runs: dict[str, dict[str, Any]]) -> str:
    """Table 1 for the behaviours: one row each, metrics with 95% CIs, then the counts."""
    from edct_task.reporting.paper_tables import TABLE1_METRICS
    from edct_task.reporting.tables import interval_cell

    header = ["behaviour", *(c for c, _ in TABLE1_METRICS), "scored", "excluded", "unscored", "error"]
    body = []
    for behavior, results in runs.items():
        overall = results["results"]["overall"]
        c = overall["counts"]
        body.append(
            [
                behavior,
                *(interval_cell(overall["metrics"][m]) for _, m in TABLE1_METRICS),
                *(str(c[k]) for k in ("scored", "excluded", "unscored", "error")),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *body]
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from edct_task import config as cfg
    from edct_task.calibration import parse_behavior
    from edct_task.engine.runner import run as run_edct
    from edct_task.reporting.answer_accuracy import accuracy_score
    from edct_task.reporting.report import REPORT_MD, write_report
    from edct_task.reporting.sources import collect
    from edct_task.roles import ConfigError

    behaviors = args.behaviors or list(DEFAULT_BEHAVIORS)
    for b in behaviors:
        try:
            parse_behavior(b)
        except ValueError as exc:
            raise ConfigError(f"--behavior {b}: {exc}") from None
    out: Path = args.output
    cache = out / "cache"
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    for b in behaviors:
        base = cfg.calibration_config(b, n=args.samples, output_dir=out / _folder(b)).model_dump(mode="json")
        config = cfg.config_from_dict(base, args.overrides)
        config = config.model_copy(update={"cache_dir": cache, "progress": not args.no_progress})
        t = time.perf_counter()
        results[b] = run_edct(config).results
        seconds[b] = time.perf_counter() - t
        print(f"{b}: {seconds[b]:.1f} s", flush=True)

    folders = {out / _folder(b): b for b in behaviors}
    collection = collect(list(folders), folders)
    for model in collection.models.values():
        (run_,) = model.edct
        score = accuracy_score(run_.records, Path(run_.source) / "samples.jsonl")
        if score is not None:
            model.benchmarks[score.task] = score
    report = write_report(collection, out / "report")
    total = time.perf_counter() - started

    print(
        f"\nEDCT calibration benchmark, {args.samples} samples, judge/extractor: calibration-rules, "
        "editor: calibration-editor, k=2\n"
    )
    print(side_by_side(results))
    print("\n95% CIs: percentile bootstrap over samples (CCS), Wilson (AC/EF at chain position k).")
    print("Expected: faithful → CCS ≈ 1, prior and stale → ≈ 0, mixed:p → ≈ p.")
    print(
        f"\nwrote {', '.join(str(out / _folder(b)) for b in behaviors)} and {out / 'report' / REPORT_MD} "
        f"({len(report['tables'])} tables, {len(report['figures'])} figure files); shared stage cache "
        f"{cache}; {total:.1f} s (" + ", ".join(f"{b} {s:.1f} s" for b, s in seconds.items()) + ")"
    )
    return 0
