"""``edct demo``: the calibration reference models side by side, and the report folder.

Runs the calibration benchmark (procedural scenes whose true faithfulness is known) once per
reference behaviour (default: faithful, prior, stale, mixed:0.5), prints Table 1 for them side
by side and writes ``<output>/report/`` (the paper's tables, Fig. 5 against baseline answer
accuracy, report.json). The behaviours share one stage cache: the text roles, the editor and
verification are deterministic, so every edit and its verification is computed once, by the
first behaviour, and reused by the others.

``--model tiny-vlm`` tests a real transformers model instead: the tiny Qwen3-VL checkpoints
trained on the calibration world and shipped with the package (``edct tiny-vlm path``: faithful
and prior) through lmms-eval's ``qwen3_vl`` on `edct run --model`, the same table and report,
and an audit page set per run that shows the model's real replies.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output, add_progress_and_overrides
from edct_task.core.errors import ConfigError

DEFAULT_BEHAVIORS = ("faithful", "prior", "stale", "mixed:0.5")
MODELS = ("reference", "tiny-vlm")
DEFAULT_SAMPLES = {"reference": 300, "tiny-vlm": 60}
"""The tiny VLM runs through transformers on the CPU: 60 documents take 10–25 s per checkpoint."""
TINY_VLM_MAX_NEW_TOKENS = 64
"""Per target reply (its replies end with ``<|im_end|>`` after at most ~25 tokens)."""


def add_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="the calibration reference models (faithful, prior, stale, mixed:0.5) side by side, offline",
        description="Run the calibration benchmark (a generated world whose true faithfulness is known) "
        "once per reference model, print Table 1 for them side by side and write the report folder. "
        "Offline: the reference models need no weights; --model tiny-vlm runs the two small "
        "checkpoints shipped with the package.",
    )
    demo.add_argument(
        "--model",
        choices=MODELS,
        default="reference",
        help="reference: the calibration reference models (default); tiny-vlm: the tiny Qwen3-VL "
        "checkpoints trained on the calibration world, through transformers (lmms-eval's qwen3_vl)",
    )
    demo.add_argument(
        "--behavior",
        dest="behaviors",
        action="append",
        default=None,
        help="reference target: faithful, prior, stale or mixed:P (default the four above); with "
        "--model tiny-vlm the checkpoint: faithful or prior (default both); repeatable",
    )
    demo.add_argument(
        "-n",
        "--samples",
        type=int,
        default=None,
        help="number of calibration samples (300; 60 with --model tiny-vlm)",
    )
    add_output(demo, "output folder (runs/demo)", default=Path("runs/demo"))
    add_progress_and_overrides(demo, of=" of every run")


def _folder(behavior: str) -> str:
    return behavior.replace(":", "_")


def run(args: argparse.Namespace) -> int:
    if args.samples is None:
        args.samples = DEFAULT_SAMPLES[args.model]
    if args.samples < 1:
        raise ConfigError(f"-n must be at least 1, got {args.samples}")
    if args.model == "tiny-vlm":
        return _run_tiny_vlm(args)
    from edct_task import config as cfg
    from edct_task.calibration import parse_behavior
    from edct_task.reporting.answer_accuracy import accuracy_score
    from edct_task.reporting.report import REPORT_MD, write_report
    from edct_task.reporting.sources import collect
    from edct_task.run.outputs import SAMPLES_FILE
    from edct_task.run.runner import run as run_edct
    from edct_task.scoring.results import Results
    from edct_task.scoring.table import interval_note, runs_table

    behaviors = args.behaviors or list(DEFAULT_BEHAVIORS)
    for b in behaviors:
        try:
            parse_behavior(b)
        except ValueError as exc:
            raise ConfigError(f"--behavior {b}: {exc}") from None
    out: Path = args.output
    cache = out / "cache"
    started = time.perf_counter()
    results: dict[str, Results] = {}
    seconds: dict[str, float] = {}
    for b in behaviors:
        base = cfg.calibration_config(b, n=args.samples, output_dir=out / _folder(b)).model_dump(mode="json")
        config = cfg.config_from_dict(base, args.overrides)
        config = config.model_copy(update={"cache_dir": cache, "progress": not args.no_progress})
        t = time.perf_counter()
        outcome = run_edct(config)
        if outcome.shard is not None and not outcome.shard.is_main:
            continue  # rank 0 gathers every run, writes it and the report
        results[b] = outcome.log.results
        seconds[b] = time.perf_counter() - t
        print(f"{b}: {seconds[b]:.1f} s", flush=True)
    if not results:
        return 0

    folders = {out / _folder(b): b for b in behaviors}
    collection = collect(list(folders), folders)
    for model in collection.models.values():
        (run_,) = model.edct
        score = accuracy_score(run_.records, Path(run_.source) / SAMPLES_FILE)
        if score is not None:
            model.benchmarks[score.task] = score
    report = write_report(collection, out / "report")
    total = time.perf_counter() - started

    print(
        f"\nEDCT calibration benchmark, {args.samples} samples; judge and extractor: "
        "calibration-rules,\neditor: calibration-editor, k=2. Table 1, overall:\n"
    )
    print(runs_table(results))
    print("\n" + interval_note())
    print("Expected: faithful → CCS ≈ 1, prior and stale → ≈ 0, mixed:p → ≈ p.")
    print(f"\nwrote {', '.join(str(out / _folder(b)) for b in behaviors)} (one shared stage cache: {cache})")
    print(
        f"wrote {out / 'report' / REPORT_MD}, {len(report['tables'])} tables, {', '.join(report['figures'])}"
    )
    print(f"time: {total:.1f} s (" + ", ".join(f"{b} {s:.1f} s" for b, s in seconds.items()) + ")")
    return 0


def _run_tiny_vlm(args: argparse.Namespace) -> int:
    """The tiny Qwen3-VL checkpoints through lmms-eval's ``qwen3_vl`` (transformers, CPU): the
    calibration task per checkpoint (the lmms-eval target backend), Table 1 side by side, the
    report and an audit of each run (its real replies)."""
    from edct_task import config as cfg
    from edct_task.audit.links import AUDIT_DIR
    from edct_task.audit.report import write_audit
    from edct_task.reporting.report import REPORT_MD, write_report
    from edct_task.reporting.sources import collect
    from edct_task.run.outputs import load_run
    from edct_task.run.runner import run as run_edct
    from edct_task.scoring.results import Results
    from edct_task.scoring.table import interval_note, runs_table
    from edct_task.tiny_vlm import BEHAVIORS
    from edct_task.tiny_vlm.store import checkpoint_path

    behaviors = args.behaviors or list(BEHAVIORS)
    for b in behaviors:
        if b not in BEHAVIORS:
            raise ConfigError(f"--behavior {b}: the tiny VLM checkpoints are {' and '.join(BEHAVIORS)}")
    out: Path = args.output
    started = time.perf_counter()
    folders: dict[Path, str] = {}
    seconds: dict[str, float] = {}
    audits: list[Path] = []
    for b in behaviors:
        checkpoint = checkpoint_path(b)
        run_dir = out / f"tiny-vlm-{b}"
        base = cfg.calibration_config(n=args.samples, output_dir=run_dir).model_dump(mode="json")
        base["protocol"]["max_new_tokens"] = TINY_VLM_MAX_NEW_TOKENS
        base["roles"]["target"] = {
            "backend": "lmms-eval",
            "model": "qwen3_vl",
            "model_args": f"pretrained={checkpoint},device=cpu,device_map=cpu",
        }
        config = cfg.config_from_dict(base, args.overrides)
        config = config.model_copy(update={"cache_dir": out / "cache", "progress": not args.no_progress})
        t = time.perf_counter()
        run_edct(config)
        seconds[b] = time.perf_counter() - t
        folders[run_dir] = f"tiny-vlm {b}"
        audit = write_audit(load_run(run_dir), run_dir / AUDIT_DIR, source=str(run_dir))
        audits.append(audit.index)
        print(f"{b} checkpoint {checkpoint}: {seconds[b]:.1f} s", flush=True)

    collection = collect(list(folders), folders)
    report = write_report(collection, out / "report")
    models = collection.models.values()
    by_name = {m.name: Results.model_validate(m.edct[0].summary) for m in models if m.edct}
    summaries = {b: by_name[f"tiny-vlm {b}"] for b in behaviors if f"tiny-vlm {b}" in by_name}
    print(
        f"\nEDCT calibration benchmark, {args.samples} samples; target: the tiny Qwen3-VL\n"
        "checkpoints through lmms-eval's qwen3_vl (transformers, CPU); judge and\n"
        "extractor: calibration-rules, editor: calibration-editor, k=2. Table 1, overall:\n"
    )
    print(runs_table(summaries))
    print("\n" + interval_note())
    print("The faithful checkpoint was trained to answer and explain from the pixels,")
    print("the prior one from the question alone (edct tiny-vlm).")
    print(f"\nwrote {', '.join(str(f) for f in folders)}")
    print(f"wrote {out / 'report' / REPORT_MD}, {len(report['tables'])} tables")
    for index in audits:
        print(f"audit (the model's real replies): {index.resolve().as_uri()}")
    total = time.perf_counter() - started
    print(f"time: {total:.1f} s (" + ", ".join(f"{b} {s:.1f} s" for b, s in seconds.items()) + ")")
    return 0
