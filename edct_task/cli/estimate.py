"""``edct estimate``: calls, tokens, cost and wall time of a run, before any model is contacted;
``--detect DELTA``: the items a paired difference of DELTA needs (``estimate.power``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_overrides
from edct_task.scoring.compare import paired_metrics
from edct_task.scoring.metrics import PRIMARY


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text}")
    return value


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "estimate",
        help="predict a run's calls, tokens, cost and wall time without contacting any model",
        description="Simulate a run with the real pipelined scheduler on a virtual clock: calls and "
        "images per role, prompt/completion tokens, cost from the roles' prices:, wall time, the busy "
        "share of each role's pool, the bottleneck and what-if rows.",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE|PRESET",
        help="a config file or a preset name (required unless --sweep or --detect)",
    )
    p.add_argument(
        "--sweep", type=Path, metavar="SWEEP.yaml", help="a sweep file: its wall time on --workers"
    )
    p.add_argument("--workers", type=int, default=1, metavar="N", help="--sweep: jobs running at once (1)")
    p.add_argument("--n", type=int, default=None, help="items to estimate for (default: the config's data)")
    p.add_argument(
        "--latencies-from",
        type=Path,
        default=None,
        metavar="RUN",
        help="a finished run's folder: per-call seconds, failures, verification pass rate, tokens",
    )
    p.add_argument(
        "--latency",
        action="append",
        default=[],
        metavar="ROLE=SECONDS",
        help="seconds per call of a role (target: per batch; 'text' sets extractor, judge, edit_parser)",
    )
    p.add_argument("--failure-rate", action="append", default=[], metavar="ROLE=P", help="calls that fail")
    p.add_argument(
        "--retry-rate", action="append", default=[], metavar="ROLE=P", help="calls that need one retry"
    )
    p.add_argument("--verify-pass-rate", type=_fraction, default=None, help="edit attempts that pass (0.8)")
    p.add_argument("--image-tokens", type=int, default=1000, help="tokens per image a model reads (1000)")
    p.add_argument(
        "--cores", type=int, default=None, help="processors for in-process work (default: this machine's)"
    )
    p.add_argument("--no-what-if", action="store_true", help="skip the what-if rows")
    p.add_argument("--json", action="store_true", help="print the estimate as JSON")
    p.add_argument(
        "--detect",
        type=float,
        default=None,
        metavar="DELTA",
        help="instead of the run: the items `edct compare`'s test needs for 80%% power to detect a paired "
        "difference DELTA at α = 0.05 (its power simulated), and the difference the current size (--n, "
        "the pilot's items or the config's data) detects",
    )
    p.add_argument(
        "--pilot",
        nargs=2,
        type=Path,
        default=None,
        metavar=("RUN_A", "RUN_B"),
        help="with --detect: two runs of one setup whose per-item differences are planned from "
        "(default: binary CCS of two models disagreeing on 25%% of the items)",
    )
    p.add_argument(
        "--metric",
        choices=paired_metrics(),
        default=PRIMARY.name,
        help=f"with --pilot: the per-item score whose paired SD is used (default {PRIMARY.name})",
    )
    add_overrides(p, example="limits.editor_concurrency=16")


def _items(config: Any, n: int | None) -> int:
    if n is not None:
        return n
    data = config.data
    if data.source == "calibration":
        return min(data.n, data.limit or data.n)
    from edct_task.bench_data import load_bench

    size = len(load_bench(data.path))
    return min(size, data.limit or size)


def _detect(args: argparse.Namespace) -> int:
    from edct_task.cli.compare import paired_runs
    from edct_task.config import load_config
    from edct_task.core.errors import ConfigError
    from edct_task.estimate.power import plan_power, render_power
    from edct_task.estimate.presets import config_location

    if not args.detect > 0 or args.detect != args.detect:
        raise ConfigError(f"--detect must be a difference > 0, got {args.detect}")
    if args.pilot is None and args.metric != PRIMARY.name:
        raise ConfigError("--metric needs --pilot (it chooses the pilot's per-item score)")
    differences = source = mean = None
    n_current = args.n
    if args.pilot is not None:
        a, b = args.pilot
        paired = paired_runs(a, b, metric=args.metric, force=False)[3]
        differences = paired.a - paired.b
        if differences.min() == differences.max():
            raise ConfigError(
                f"the pilot runs differ by the same amount on every one of their {paired.n} paired items "
                "(paired SD 0): no variance to plan from; use runs that differ"
            )
        mean = float(differences.mean())
        source = f"pilot {a} vs {b}, {args.metric}, {paired.n} paired items"
        n_current = n_current or paired.n
    if n_current is None and args.config is not None:
        n_current = _items(load_config(config_location(args.config), args.overrides), None)
    try:
        plan = plan_power(
            args.detect, differences=differences, sd_source=source, n_current=n_current, pilot_difference=mean
        )
    except ValueError as exc:
        raise ConfigError(f"--detect {args.detect:g}: {exc}") from None
    print(json.dumps(plan.as_dict(), indent=2) if args.json else render_power(plan))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.detect is not None:
        if args.n is not None and args.n < 2:
            from edct_task.core.errors import ConfigError

            raise ConfigError("--n must be at least 2 with --detect")
        return _detect(args)
    if args.pilot is not None:
        from edct_task.core.errors import ConfigError

        raise ConfigError("--pilot needs --detect DELTA")
    from edct_task.config import load_config
    from edct_task.core.errors import ConfigError
    from edct_task.estimate.latency import from_run, parse_assignments
    from edct_task.estimate.plan import estimate
    from edct_task.estimate.presets import config_location
    from edct_task.estimate.report import render

    if args.n is not None and args.n < 1:
        raise ConfigError("--n must be at least 1")
    if args.cores is not None and args.cores < 1:
        raise ConfigError("--cores must be at least 1")
    if args.sweep is not None:
        if args.config is not None:
            raise ConfigError("give --config or --sweep, not both")
        return _sweep(args)
    if args.config is None:
        raise ConfigError("--config FILE|PRESET is required (or --sweep FILE, or --detect DELTA)")
    path = config_location(args.config)
    config = load_config(path, args.overrides)
    result = estimate(
        config,
        _items(config, args.n),
        run=from_run(args.latencies_from) if args.latencies_from else None,
        latency=parse_assignments(args.latency, "--latency"),
        failure={k: min(v, 1.0) for k, v in parse_assignments(args.failure_rate, "--failure-rate").items()},
        retry={k: min(v, 1.0) for k, v in parse_assignments(args.retry_rate, "--retry-rate").items()},
        verify_pass_rate=args.verify_pass_rate,
        image_tokens=args.image_tokens,
        what_if=not args.no_what_if,
        cpus=args.cores,
    )
    print(json.dumps(result.as_dict(), indent=2) if args.json else render(result, path.stem))
    return 0


def _sweep(args: argparse.Namespace) -> int:
    """``--sweep``: each job estimated for its slice's items, the jobs placed on ``--workers``."""
    from edct_task.core.errors import ConfigError
    from edct_task.estimate.latency import from_run, parse_assignments
    from edct_task.estimate.plan import estimate, hours
    from edct_task.scale.plan import estimate_sweep, slice_items
    from edct_task.scale.sweep import expand

    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    sweep = expand(args.sweep)
    run = from_run(args.latencies_from) if args.latencies_from else None
    latency = parse_assignments(args.latency, "--latency")

    def job_wall(job: Any) -> float:
        config = job.config.model_copy(update={"data": job.config.data.model_copy(update={"shard": None})})
        n = slice_items(_items(config, args.n), sweep.spec.shards)
        return estimate(config, n, run=run, latency=latency, what_if=False, cpus=args.cores).wall_s

    result = estimate_sweep(sweep.jobs, args.workers, job_wall)
    if args.json:
        print(json.dumps({"workers": result.workers, "wall_s": round(result.wall_s, 1), "jobs": result.jobs}))
        return 0
    print(f"{len(result.jobs)} job(s) of {args.sweep}, {result.busy_s:.0f} job-seconds in all")
    print(f"wall time on {result.workers} worker(s): {hours(result.wall_s)} ({result.wall_s:.0f} s)")
    return 0
