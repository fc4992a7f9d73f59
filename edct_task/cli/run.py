"""``edct run``: a YAML config, or an lmms-eval model as the target with ``--model``."""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output, add_progress_and_overrides
from edct_task.core.errors import ConfigError


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text}")
    return value


def _add_run_options(p: argparse.ArgumentParser) -> None:
    add_output(p, "output folder (overrides output_dir)")
    p.add_argument(
        "--fail-on-unscored",
        "--fail_on_unscored",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="exit 3 when more than FRACTION of the samples have no CCS_binary (or no CCS_graded): "
        "unscored, in error, or a step whose verdict of that kind could not be read "
        "(default: exit 3 only when no sample was scored)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        default=None,
        help="run only slice I (0 … N-1) of the items, chosen by a hash of each item's id, as an "
        "independent job (data.shard; after --limit); join the N output folders with `edct merge`",
    )
    add_progress_and_overrides(p)


def _add_lmms_options(p: argparse.ArgumentParser) -> None:
    from edct_task.lmms.tasks import edct_tasks

    g = p.add_argument_group(
        "lmms-eval model as the target",
        "run an lmms-eval model (through lmms-eval's registry) on the items of the EDCT lmms-eval tasks; "
        "the run folder is an ordinary EDCT run, lmms-eval's results files are exported beside it. "
        "lmms-eval's own flags are accepted as lmms-eval spells them (and with dashes: --model-args, "
        "--gen-kwargs, ...)",
    )
    g.add_argument("--model", help="lmms-eval model name (qwen3_vl, vllm, openai, edct_reference, ...)")
    g.add_argument(
        "--model_args",
        "--model-args",
        dest="model_args",
        default="",
        help="lmms-eval model_args, e.g. pretrained=Qwen/Qwen3-VL-8B-Instruct",
    )
    g.add_argument(
        "--tasks",
        default="edct_bench",
        help=f"EDCT task(s): {', '.join(edct_tasks())} (default edct_bench)",
    )
    g.add_argument(
        "--gen_kwargs",
        "--gen-kwargs",
        dest="gen_kwargs",
        default="",
        help="generation arguments for the target model, as lmms-eval takes them "
        "(e.g. max_new_tokens=256); they override the protocol's for the target's requests only",
    )
    g.add_argument(
        "--batch_size", "--batch-size", dest="batch_size", default=None, help="passed to the model"
    )
    g.add_argument("--device", default=None, help="passed to the lmms-eval model")
    g.add_argument(
        "--limit",
        type=int,
        default=None,
        help="first N documents of each task, as lmms-eval's --limit (data.limit_per_domain on EDCT-Bench)",
    )
    g.add_argument(
        "--output_path",
        "--output-path",
        dest="output_path",
        type=Path,
        default=None,
        help="as lmms-eval's --output_path: lmms-eval's results files go here and, without --output, "
        "the EDCT run folder goes to <output_path>/edct, where lmms-eval's loop puts it "
        "(default: the export in <output>/lmms)",
    )
    g.add_argument(
        "--log_samples",
        "--log-samples",
        dest="log_samples",
        action="store_true",
        help="the export also holds lmms-eval's per-sample JSONL",
    )


def add_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run EDCT from a YAML config or preset, or on an lmms-eval model (--model)",
        description="Run EDCT: with --config, the roles, protocol and data of a YAML file or a shipped "
        "preset (edct presets); with --model, the same run with an lmms-eval model as the target "
        "(backend lmms-eval) on the items of the EDCT lmms-eval tasks, plus lmms-eval's results files "
        "as an export (<output>/lmms). Writes results.json, samples.jsonl and images/ to the output "
        "folder; rerunning the same command resumes from the stage cache.",
    )
    run.add_argument(
        "--config",
        type=Path,
        help="YAML file or a shipped preset's name (edct presets): roles, protocol, verification, data "
        "(required unless --model is given; with --model it supplies the non-target roles)",
    )
    _add_run_options(run)
    _add_lmms_options(run)


def _flags(args: argparse.Namespace) -> dict[str, str]:
    """The config values the flags the user typed set (config path → flag): an invalid one is
    named by its flag."""
    typed: dict[str, str] = {}
    if args.shard:
        typed["data.shard"] = "--shard"
    if getattr(args, "limit", None) is not None:
        typed.update({"data.limit": "--limit", "data.limit_per_domain": "--limit"})
    return typed


def _config(args: argparse.Namespace) -> Any:
    """The run's config: ``--config`` (else the lmms-eval task's default roles), ``--set`` overrides,
    then ``--output`` and ``--no-progress``; one sequence for both paths."""
    from edct_task import config as cfg
    from edct_task.lmms.settings import hook_config
    from edct_task.presets import load_preset

    overrides = [*args.overrides, *([f"data.shard={args.shard}"] if args.shard else [])]
    if args.config is not None:  # a file, or a shipped preset's name
        config = load_preset(args.config, overrides, flags=_flags(args))
    else:
        config = cfg.config_from_dict(hook_config().model_dump(mode="json"), overrides, _flags(args))
    update: dict[str, Any] = {"output_dir": args.output} if args.output else {}
    if args.no_progress:
        update["progress"] = False
    return config.model_copy(update=update)


def run(args: argparse.Namespace) -> int:
    if args.model:
        return _run_lmms(args)
    if args.output_path is not None:  # without --model, lmms-eval's spelling names the output folder
        if args.output is not None and args.output != args.output_path:
            raise ConfigError("--output and --output_path name two folders; without --model give one")
        args.output = args.output_path
    if args.config is None:
        raise ConfigError("edct run needs --config FILE, or --model NAME (an lmms-eval model as the target)")
    outcome = _run_and_print(_config(args))
    if outcome is None:
        return 0
    return finish(outcome.records, args.fail_on_unscored, outcome.results.get("controls"))


def _run_and_print(config: Any, on_started: Callable[[], None] | None = None) -> Any:
    """``runner.run`` and its summary; None on a rank other than 0 of a torchrun group."""
    from edct_task.run.outputs import RESULTS_FILE, SAMPLES_FILE
    from edct_task.run.runner import run as run_edct
    from edct_task.scoring.table import score_table

    outcome = run_edct(config, on_started=on_started)
    if outcome.shard is not None and not outcome.shard.is_main:
        print(
            f"rank {outcome.shard.rank} of {outcome.shard.world_size}: "
            f"{len(outcome.records)} samples, sent to rank 0"
        )
        return None
    log = outcome.log
    roles = log.config.roles
    target = " ".join(f"{k}={v}" for k, v in roles["target"].items())
    judge, editor = _backend_names(roles["judge"]), roles["editor"]["backend"]
    print(f"\nEDCT on {log.config.data.source}, k={log.config.protocol.k}")
    print(f"  target: {target}\n  judge: {judge}, editor: {editor}\n")
    print(score_table(log.results))
    print(
        f"\nwrote {outcome.output_dir / RESULTS_FILE}, {SAMPLES_FILE} and images/ ({log.wall_seconds:.1f} s)"
    )
    if outcome.reused:
        calls = log.calls
        new = sum(calls["calls"].values()) + sum(calls["failures"].values())
        print(f"resumed: {outcome.reused} calls reused from the stage cache, {new} new")
    return outcome


def finish(records: list[Any], fail_on_unscored: float | None, controls: dict[str, Any] | None = None) -> int:
    """Print the failure summary, the judge-health warnings and the known-answer controls; the exit
    code: 3 when a whole judgement kind could not be read for any sample or too many samples went
    without a score (unscored, in error, or a step's verdict unreadable: per metric), else 4
    (``EXIT_UNRELIABLE``) when a text role is below the controls' bar (the same for every run)."""
    from edct_task.scoring.controls import EXIT_UNRELIABLE, controls_line, unreliable_reasons
    from edct_task.scoring.health import (
        health_line,
        health_warnings,
        judge_health,
        unreadable_kinds,
        unscored_by_metric,
    )

    summary = failure_summary(records)
    if summary:
        print(summary, file=sys.stderr)
    health = judge_health(records)
    print(health_line(health))
    for line in health_warnings(health):
        print(line, file=sys.stderr)
    print(controls_line(controls))
    unreliable = unreliable_reasons(controls)
    for line in unreliable:
        print(f"edct: UNRELIABLE RUN: {line}", file=sys.stderr)
    if not records:
        return 0
    unreadable = unreadable_kinds(records)
    if unreadable and fail_on_unscored != 1.0:  # 1.0: the user accepts any unscored share
        print(
            f"edct: no {' and no '.join(unreadable)} judgement of any sample could be read "
            "(see the judge health above and the raw replies in the records); exit code 3",
            file=sys.stderr,
        )
        return 3
    # A sample without a metric's score: unscored, in error, or a step whose verdict of that kind
    # could not be read (a score needs every step judged); the worst metric counts.
    shares = {"": sum(r.status in ("unscored", "error") for r in records) / len(records)}
    shares.update({m: k / len(records) for m, k in unscored_by_metric(records).items()})
    metric, not_scored = max(shares.items(), key=lambda kv: kv[1])
    none_scored = not any(r.status == "scored" for r in records)
    limit = fail_on_unscored
    if (limit is not None and not_scored > limit) or (limit is None and none_scored):
        what = (
            "unscored or in error"
            if not metric
            else f"without {metric} (unscored, in error or a step unreadable)"
        )
        print(
            f"edct: {not_scored:.0%} of the samples are {what}"
            + (f" (more than --fail-on-unscored {limit})" if limit is not None else " (none was scored)")
            + "; exit code 3",
            file=sys.stderr,
        )
        return 3
    if unreliable:
        print(
            f"edct: the scores above cannot be trusted (controls.jsonl has every reply); exit code "
            f"{EXIT_UNRELIABLE}",
            file=sys.stderr,
        )
        return EXIT_UNRELIABLE
    return 0


def failure_summary(records: list[Any]) -> str:
    """One line: samples not scored, by status and failure kind (``edct: not scored: …``); for
    failures (``error``, ``unscored``) the first such sample's reason follows as the cause, so a
    dead server says "Connection refused" on the console, not only in samples.jsonl."""
    kinds: Counter[str] = Counter()
    causes: dict[str, str] = {}
    for r in records:
        if r.status != "scored":
            key = f"{r.status} ({_kind(r.reason)})"
            kinds[key] += 1
            if r.status in ("error", "unscored") and r.reason:
                causes.setdefault(key, r.reason)
    if not kinds:
        return ""
    parts = []
    for k, n in kinds.most_common():
        cause = causes.get(k)
        parts.append(f"{n} {k}" + (f" [first: {_clip(cause)}]" if cause else ""))
    return "edct: not scored: " + ", ".join(parts)


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(reason: str | None) -> str:
    """The failure kind of a record's reason: ``rate_limited``, ``verification``, …"""
    if not reason:
        return "no reason"
    head = next((reason.split(marker)[0] for marker in (": ", " (") if marker in reason), reason)
    words = re.findall(r"\b([a-z]+_[a-z_]+)\b", reason)
    return words[0] if words else head[:40]


def _backend_names(spec: dict[str, Any] | list[dict[str, Any]]) -> str:
    return "+".join(s["backend"] for s in spec) if isinstance(spec, list) else spec["backend"]


def _run_lmms(args: argparse.Namespace) -> int:
    """``edct run --model … --tasks …``: an ordinary run whose target is the lmms-eval model
    (backend ``lmms-eval``) on the items the tasks name, then lmms-eval's files as an export."""
    from edct_task import config as cfg
    from edct_task.engine.files import remove_tree
    from edct_task.lmms.settings import LOOP_RUN_FOLDER
    from edct_task.lmms.tasks import task_data
    from model_adapters.lmms_eval_target import parse_gen_kwargs

    names = task_data(args.tasks, args.model)  # a typo answered before anything loads
    if args.output is None and args.output_path is not None:  # one flag, one place: as lmms-eval's loop
        args.output = args.output_path / LOOP_RUN_FOLDER
    base = _config(args)
    raw = base.model_dump(mode="json")
    target: dict[str, Any] = {"backend": "lmms-eval", "model": args.model, "model_args": args.model_args}
    try:
        gen_kwargs = parse_gen_kwargs(args.gen_kwargs)
    except ValueError as exc:
        raise ConfigError(f"--gen_kwargs: {exc}") from None
    extra = {"gen_kwargs": gen_kwargs, "batch_size": args.batch_size, "device": args.device}
    target.update({k: v for k, v in extra.items() if v})
    raw["roles"]["target"] = target
    data = {**raw["data"], "domains": None, **names}
    if args.limit is not None:
        data["limit" if data["source"] == "calibration" else "limit_per_domain"] = args.limit
    raw["data"] = data
    config = cfg.config_from_dict(raw, [], _flags(args))
    from edct_task.lmms.export import ExportProcess
    from edct_task.run.sharding import shard_from_env

    rank = shard_from_env()
    whole_run = config.data.shard is None and (rank is None or rank.is_main)  # rank 0 has it all
    if whole_run and args.output_path is not None:  # before the run, not after it
        from edct_task.run.workspace import check_writable

        check_writable(args.output_path, "lmms-eval results folder", "--output_path")
    exporter = ExportProcess() if whole_run else None
    own_export = config.output_dir / "lmms"  # the run's own export folder, when --output_path is not given

    def started() -> None:  # the folder is this run's now (claimed, its setup checked)
        if exporter is not None:
            if args.output_path is None:
                remove_tree(own_export)  # a previous run's export never reads as this run's
            exporter.start()

    try:
        outcome = _run_and_print(config, on_started=started)
        if outcome is None:  # a rank other than 0 of a torchrun group
            return 0
        if exporter is not None:
            output_path = args.output_path or own_export
            tables = exporter.export(
                outcome.output_dir, output_path, tasks=args.tasks, log_samples=args.log_samples
            )
            print(tables, end="")
            print(f"lmms-eval's files of the run (an export): {output_path}")
    finally:
        if exporter is not None:
            exporter.close()
    return finish(outcome.records, args.fail_on_unscored, outcome.results.get("controls"))
