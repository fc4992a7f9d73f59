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

from edct_task.cli.options import add_progress_and_overrides

DEFAULT_BEHAVIORS = ("faithful", "prior", "stale", "mixed:0.5")


def add_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="the calibration reference models (faithful, prior, stale, mixed:0.5) side by side, offline",
        description="Run the calibration benchmark (a generated world whose true faithfulness is known) "
        "once per reference model, print Table 1 for them side by side and write the report folder. "
        "Offline, no model weights.",
    )
    demo.add_argument(
        "--behavior",
        dest="behaviors",
        action="append",
        default=None,
        help="reference target: faithful, prior, stale or mixed:P (repeatable; default the four above)",
    )
    demo.add_argument("-n", "--samples", type=int, default=300, help="number of calibration samples (300)")
    demo.add_argument(
        "--output",
        "--out",
        dest="output",
        type=Path,
        default=Path("runs/demo"),
        help="output folder (runs/demo)",
    )
    add_progress_and_overrides(demo, of=" of every run")


def _folder(behavior: str) -> str:
    return behavior.replace(":", "_")


def run(args: argparse.Namespace) -> int:
    from edct_task import config as cfg
    from edct_task.calibration import parse_behavior
    from edct_task.core.errors import ConfigError
    from edct_task.reporting.answer_accuracy import accuracy_score
    from edct_task.reporting.report import REPORT_MD, write_report
    from edct_task.reporting.sources import collect
    from edct_task.run.runner import run as run_edct
    from edct_task.scoring.table import runs_table

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
        outcome = run_edct(config)
        if outcome.shard is not None and not outcome.shard.is_main:
            continue  # rank 0 gathers every run, writes it and the report
        results[b] = outcome.results
        seconds[b] = time.perf_counter() - t
        print(f"{b}: {seconds[b]:.1f} s", flush=True)
    if not results:
        return 0

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
        f"\nEDCT calibration benchmark, {args.samples} samples; judge and extractor: "
        "calibration-rules,\neditor: calibration-editor, k=2. Table 1, overall:\n"
    )
    print(runs_table({b: r["results"] for b, r in results.items()}))
    print("\n95% CIs: percentile bootstrap over samples (CCS);")
    print("Wilson score intervals (AC/EF at chain position k).")
    print("Expected: faithful → CCS ≈ 1, prior and stale → ≈ 0, mixed:p → ≈ p.")
    print(f"\nwrote {', '.join(str(out / _folder(b)) for b in behaviors)} (one shared stage cache: {cache})")
    print(
        f"wrote {out / 'report' / REPORT_MD}, {len(report['tables'])} tables, {', '.join(report['figures'])}"
    )
    print(f"time: {total:.1f} s (" + ", ".join(f"{b} {s:.1f} s" for b, s in seconds.items()) + ")")
    return 0
