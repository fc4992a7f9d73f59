"""The ``edct`` command line.

``edct demo``                 the calibration benchmark with reference backends, offline
``edct run --config FILE``    roles → backends from a YAML file (``--set key=value`` overrides)
``edct run --model M --tasks T``   the batched fast path over an lmms-eval model and task
``edct stability RUN…``       mean ± SD of every metric over repeated runs
``edct serve ROLE MODEL``     a local vLLM server for a role, and the config lines that use it
``edct backends``             the registered backends per role kind
``edct verify A B --instruction …``   localised edit verification of one image pair (Algorithm 1)
``edct build-bench --okvqa-questions … --out DIR``   the EDCT-Bench dataset from local source copies
``edct export-counterfactuals RUN_DIR --out DIR``    verified counterfactual pairs as training data
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from edct_task.bench_data.format import BenchDataError
from edct_task.roles import ConfigError


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", type=Path, help="output folder (overrides output_dir)")
    p.add_argument("--no-progress", action="store_true", help="hide the per-stage progress bars")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set protocol.k=1 (repeatable)",
    )


def _add_lmms_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "lmms-eval fast path",
        "run an lmms-eval model on the EDCT lmms-eval tasks with the batched driver; "
        "results are written in lmms-eval's format (same flags as lmms-eval)",
    )
    g.add_argument("--model", help="lmms-eval model name (qwen3_vl, vllm, openai, edct_reference, ...)")
    g.add_argument(
        "--model_args", default="", help="lmms-eval model_args, e.g. pretrained=Qwen/Qwen3-VL-8B-Instruct"
    )
    g.add_argument(
        "--tasks",
        default="edct_bench",
        help="EDCT task(s): edct_bench, edct_bench_okvqa, "
        "edct_bench_drivelm, edct_bench_3dsr, edct_calibration (default edct_bench)",
    )
    g.add_argument("--batch_size", default=None, help="passed to the lmms-eval model")
    g.add_argument("--device", default=None, help="passed to the lmms-eval model")
    g.add_argument("--limit", type=int, default=None, help="first N documents of each task")
    g.add_argument(
        "--output_path", type=Path, default=None, help="lmms-eval results folder (default <output>/lmms)"
    )
    g.add_argument("--log_samples", action="store_true", help="also write lmms-eval's per-sample JSONL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edct", description="Explanation-Driven Counterfactual Testing of VLMs"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run EDCT from a YAML config")
    run.add_argument(
        "--config",
        type=Path,
        help="YAML file: roles, protocol, verification, data "
        "(required unless --model is given; with --model it supplies the non-target roles)",
    )
    _add_run_options(run)
    _add_lmms_options(run)

    demo = sub.add_parser(
        "demo",
        help="the calibration benchmark (procedural scenes with known faithfulness), offline",
    )
    demo.add_argument(
        "--behavior",
        default="faithful",
        help="reference target: faithful, prior, stale or mixed:P (default faithful)",
    )
    demo.add_argument("-n", "--samples", type=int, default=300, help="number of calibration samples (300)")
    _add_run_options(demo)

    stab = sub.add_parser("stability", help="mean ± SD of each metric over repeated runs")
    stab.add_argument("runs", nargs="+", type=Path, help="output folders (or results.json files) of the runs")

    serve = sub.add_parser(
        "serve", help="start a local vLLM server for a role, wait for its health check, print config lines"
    )
    serve.add_argument("role", choices=("target", "extractor", "judge", "edit_parser"))
    serve.add_argument("model", help="model id or folder, e.g. Qwen/Qwen3-VL-8B-Instruct")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--wait", type=float, default=1800.0, help="seconds to wait for /health (1800)")
    serve.add_argument("vllm_args", nargs=argparse.REMAINDER, help="extra `vllm serve` arguments after --")

    sub.add_parser("backends", help="list registered backends")

    from verification.cli import add_verify_parser

    add_verify_parser(sub)

    from edct_task.bench_data.cli import add_bench_parsers

    add_bench_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return _dispatch(args)
    except ConfigError as exc:
        print(f"edct: configuration error: {exc}", file=sys.stderr)
        return 2
    except BenchDataError as exc:
        print(f"edct: data error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "edct: interrupted; finished calls are cached, rerun the same command to resume", file=sys.stderr
        )
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from edct_task import config as cfg

    if args.command == "backends":
        from edct_task.roles import available_backends

        print(json.dumps(available_backends(), indent=2))
        return 0
    if args.command == "serve":
        from model_adapters.vllm_serve import ServeError, serve

        extra = [a for a in args.vllm_args if a != "--"]
        try:
            return serve(
                args.role, args.model, host=args.host, port=args.port, wait_s=args.wait, extra_args=extra
            )
        except ServeError as exc:
            print(f"edct: {exc}", file=sys.stderr)
            return 1
    if args.command == "stability":
        return _stability(args.runs)
    if args.command == "verify":
        from verification.cli import run_verify

        return run_verify(args)
    if args.command in ("build-bench", "export-counterfactuals"):
        from edct_task.bench_data.cli import run_bench_command

        return run_bench_command(args)
    if args.command == "demo":
        out = args.output or Path("runs") / f"demo-{args.behavior.replace(':', '_')}"
        base = cfg.calibration_config(args.behavior, n=args.samples, output_dir=out).model_dump(mode="json")
        config = cfg.config_from_dict(base, args.overrides)
    elif getattr(args, "model", None):
        return _run_lmms(args)
    elif args.config is None:
        raise ConfigError("edct run needs --config FILE, or --model NAME (lmms-eval fast path)")
    else:
        config = cfg.load_config(args.config, args.overrides)
        if args.output:
            config = config.model_copy(update={"output_dir": args.output})
    if args.no_progress:
        config = config.model_copy(update={"progress": False})

    from edct_task.report import score_table
    from edct_task.runner import run

    outcome = run(config)
    roles = outcome.results["config"]["roles"]
    print(
        f"\nEDCT on {outcome.results['config']['data']['source']} "
        f"(target: {roles['target']}, judge: {roles['judge']['backend']}, "
        f"editor: {roles['editor']['backend']}, k={outcome.results['config']['protocol']['k']})\n"
    )
    print(score_table(outcome.results["results"]))
    print(
        f"\nwrote {outcome.output_dir / 'results.json'}, samples.jsonl and images/ "
        f"({outcome.results['wall_seconds']:.1f} s)"
    )
    return 0


def _run_lmms(args: argparse.Namespace) -> int:
    """``edct run --model … --tasks …``: the batched driver on an lmms-eval model."""
    from edct_task import config as cfg
    from edct_task.lmms_fastpath import results_files, run_fastpath
    from edct_task.lmms_hooks import hook_config

    config = cfg.load_config(args.config, args.overrides) if args.config else hook_config()
    if args.overrides and not args.config:
        config = cfg.config_from_dict(config.model_dump(mode="json"), args.overrides)
    if args.output:
        config = config.model_copy(update={"output_dir": args.output})
    if args.no_progress:
        config = config.model_copy(update={"progress": False})
    output_path = args.output_path or config.output_dir / "lmms"
    results = run_fastpath(
        args.model,
        args.model_args,
        args.tasks,
        config=config,
        output_path=output_path,
        log_samples=args.log_samples,
        limit=args.limit,
        batch_size=args.batch_size,
        device=args.device,
    )
    from lmms_eval.utils import make_table

    print(make_table(results))
    if "groups" in results:
        print(make_table(results, "groups"))
    files = results_files(output_path)
    print(f"wrote {files[-1] if files else output_path} ({results['edct']['wall_seconds']:.1f} s)")
    return 0


def _stability(paths: list[Path]) -> int:
    from edct_task.scoring import stability

    results = []
    for p in paths:
        f = p / "results.json" if p.is_dir() else p
        if not f.is_file():
            raise ConfigError(f"{f} does not exist: pass run output folders or their results.json")
        results.append(json.loads(f.read_text(encoding="utf-8")))
    if len(results) < 2:
        raise ConfigError("stability needs at least two runs")
    table = stability(results)
    print(f"{'metric':<12} {'mean':>8} {'SD':>8} runs")
    for name, row in table.items():
        mean = "–" if row["mean"] is None else f"{row['mean']:.4f}"
        sd = "–" if row["sd"] is None else f"{row['sd']:.4f}"
        print(f"{name:<12} {mean:>8} {sd:>8} {row['runs']}")
    print(json.dumps(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
