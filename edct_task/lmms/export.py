"""lmms-eval's results files of a finished EDCT run, written by lmms-eval itself.

``edct run --model … --tasks …`` writes the ordinary EDCT run folder (``results.json``,
``samples.jsonl``, ``images/``); this module then exports it as lmms-eval's ``*_results.json``
and sample logs (``<output>/lmms``), so tools that read lmms-eval's output and ``edct report``'s
side-by-side with other benchmarks read the run. Nothing of lmms-eval's evaluator is copied:
lmms-eval's own ``simple_evaluate`` runs the EDCT tasks on a replay model, the task hooks answer
each document with its finished record (``Replay``), and lmms-eval's ``process_results``,
aggregations, group consolidation and ``EvaluationTracker`` produce the files.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.lmms.tasks import requested_tasks, tasks_of_records
from edct_task.run.log import LmmsRunBlock, RunLog


@dataclass(frozen=True)
class Replay:
    """What the task hooks answer while an export runs: each task's documents (the records' items,
    no image) and each document's finished record."""

    docs: dict[str, list[dict[str, Any]]]
    records: dict[str, SampleRecord]
    setup: dict[str, Any]
    """The setup each logged sample carries (``edct.setup``)."""


_ACTIVE: Replay | None = None
_LOCK = threading.Lock()


def active() -> Replay | None:
    """The replay in progress (read by the hooks; lmms-eval scores documents in a thread pool)."""
    return _ACTIVE


@contextmanager
def replaying(replay: Replay) -> Iterator[Replay]:
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("an lmms-eval export is already running in this process")
        _ACTIVE = replay
    try:
        yield replay
    finally:
        _ACTIVE = None


def doc_of(record: SampleRecord) -> dict[str, Any]:
    """The lmms-eval document of a record's item (the EDCT-Bench row format, without the image)."""
    s = record.sample
    meta = {k: v for k, v in s.metadata.items() if k not in ("source", "source_id")}
    return {
        "id": s.id,
        "domain": s.domain,
        "question": s.question,
        "system_prompt": s.system_prompt or "",
        "source": s.metadata.get("source", ""),
        "source_id": s.metadata.get("source_id", ""),
        "metadata": json.dumps(meta, sort_keys=True),
        "image": None,
    }


def setup_of(log: RunLog, run_dir: Path) -> dict[str, Any]:
    """The setup every logged sample carries: what the run log says besides the target."""
    roles = {r: s for r, s in log.config.roles.items() if r != "target"}
    target = log.config.backends.get("target") or {}
    return {
        "roles": roles,
        "protocol": log.config.protocol,
        "verification": log.config.verification,
        "prompt_versions": log.prompt_versions,
        "target_rendering": target.get("rendering", "multi-turn"),
        "run_dir": str(run_dir.resolve()),
    }


def replay_model() -> Any:
    """The model of an export: no model at all. lmms-eval's loop asks it once per document, and
    the task hooks answer the document with its finished record."""
    from lmms_eval.api.model import lmms

    class ReplayModel(lmms):  # type: ignore[misc]
        is_simple = True

        def __init__(self) -> None:
            super().__init__()
            self.device = "cpu"

        def generate_until(self, requests: list[Any]) -> list[str]:
            return ["" for _ in requests]

        def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
            raise NotImplementedError("an export replays finished records only")

        def generate_until_multi_round(self, requests: list[Any]) -> list[str]:
            raise NotImplementedError("an export replays finished records only")

    return ReplayModel()


def export(
    log: RunLog,
    records: Sequence[SampleRecord],
    run_dir: Path,
    output_path: Path,
    *,
    tasks: str,
    log_samples: bool = True,
    bootstrap_iters: int = 100_000,
) -> dict[str, Any]:
    """Write lmms-eval's results (and, with ``log_samples``, sample logs) of the run ``log`` /
    ``records`` under ``output_path``; lmms-eval's results dict."""
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.loggers import EvaluationTracker
    from lmms_eval.tasks import TaskManager
    from lmms_eval.utils import get_datetime_str

    from task_configs import TASK_DIR

    target = dict(log.config.backends.get("target") or {})
    domains = sorted({r.sample.domain for r in records})
    per_task = tasks_of_records(tasks, domains)
    docs = {
        task: [doc_of(r) for r in records if r.sample.domain in wanted] for task, wanted in per_task.items()
    }
    docs = {task: rows for task, rows in docs.items() if rows}
    names = requested_tasks(tasks) if len(docs) == len(per_task) else list(docs)
    replay = Replay(docs, {r.sample.id: r for r in records}, setup_of(log, run_dir))
    manager = TaskManager("WARNING", include_path=str(TASK_DIR), include_defaults=False)
    with replaying(replay):
        results = simple_evaluate(
            model=replay_model(),
            tasks=names,
            task_manager=manager,
            log_samples=log_samples,
            bootstrap_iters=bootstrap_iters,
            verbosity="WARNING",
        )
    samples = results.pop("samples", None)
    results["config"].update(model=target.get("model", "?"), model_args=target.get("model_args", ""))
    results["edct"] = LmmsRunBlock(
        **{k: replay.setup[k] for k in ("roles", "protocol", "verification", "prompt_versions", "run_dir")},
        target_rendering=replay.setup["target_rendering"],
        limits=log.config.limits,
        target=target,
        calls=log.calls,
        judge_health=log.judge_health,
        versions=log.versions,
        wall_seconds=log.wall_seconds,
    ).model_dump(mode="json")
    tracker = EvaluationTracker(output_path=str(output_path))
    tracker.general_config_tracker.log_experiment_args(
        model_source=str(target.get("model", "edct")),
        model_args=str(target.get("model_args", "")),
        system_instruction=None,
        chat_template=None,
        fewshot_as_multiturn=False,
    )
    tracker.save_results_aggregated(
        results=results, samples=samples if log_samples else None, datetime_str=get_datetime_str()
    )
    if log_samples and samples:
        for task_name in results["configs"]:
            tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    return results
