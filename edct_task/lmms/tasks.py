"""The EDCT lmms-eval tasks as data: which items ``--tasks`` names, for ``edct run --model``.

The task YAMLs in ``task_configs/`` name their documents; an ``edct run --model … --tasks T`` run
reads the same items the way every run does (``run.runner.load_samples``): ``edct_calibration``
is the calibration world of the task's index file, the ``edct_bench*`` tasks are EDCT-Bench
(``$EDCT_BENCH_DATA``) or some of its domains. lmms-eval itself is not asked: no ``TaskManager``
is built for a run, only to name lmms-eval's own tasks in a refusal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from edct_task.core.errors import ConfigError

DOMAIN_TASKS = {"edct_bench_okvqa": "okvqa", "edct_bench_drivelm": "drivelm", "edct_bench_3dsr": "3dsr"}
GROUP = "edct_bench"
CALIBRATION = "edct_calibration"
EDCT_TASKS = (GROUP, *DOMAIN_TASKS, CALIBRATION)


def requested_tasks(tasks: str) -> list[str]:
    """The task names of ``--tasks`` (comma-separated, blanks ignored, each once)."""
    return list(dict.fromkeys(t.strip() for t in tasks.split(",") if t.strip()))


def calibration_index() -> tuple[int, int]:
    """``(n, seed)`` of the ``edct_calibration`` task's shipped index file (rows 0 … n-1, one seed)."""
    from task_configs import CALIBRATION_INDEX, TASK_DIR

    rows = [
        json.loads(line) for line in (TASK_DIR / CALIBRATION_INDEX).read_text("utf-8").splitlines() if line
    ]
    seeds = {int(r.get("seed", 0)) for r in rows}
    indices = [int(r["index"]) for r in rows]
    if len(seeds) != 1 or indices != list(range(len(rows))):
        raise ValueError(f"{CALIBRATION_INDEX}: expected rows 0 … n-1 of one world seed")
    return len(rows), seeds.pop()


def task_data(tasks: str, model: str = "") -> dict[str, Any]:
    """The ``data`` section ``--tasks`` stands for; ``ConfigError`` for a name that is not an
    EDCT task (lmms-eval's own tasks are named as such) or for tasks of two data sources."""
    names = requested_tasks(tasks)
    unknown = [t for t in names if t not in EDCT_TASKS]
    if unknown or not names:
        raise ConfigError(unknown_tasks(unknown, model))
    if CALIBRATION in names:
        if len(names) > 1:
            raise ConfigError(
                f"--tasks {tasks}: {CALIBRATION} (the calibration world) and EDCT-Bench are two benchmarks; "
                "run them one at a time"
            )
        n, seed = calibration_index()
        return {"source": "calibration", "n": n, "seed": seed}
    if GROUP in names:
        return {"source": "dataset"}
    return {"source": "dataset", "domains": [DOMAIN_TASKS[t] for t in names]}


def unknown_tasks(unknown: Sequence[str], model: str) -> str:
    """What to say about task names that are not EDCT tasks: lmms-eval's own are named as such."""
    listed = ", ".join(EDCT_TASKS)
    if not unknown:
        return f"--tasks names no task; EDCT tasks: {listed}"
    from lmms_eval.tasks import TaskManager

    theirs = set(TaskManager("WARNING", model_name=model or None).match_tasks(list(unknown)))
    parts = []
    if theirs:
        parts.append(
            f"{', '.join(sorted(theirs))}: lmms-eval task(s), not EDCT tasks; `edct run --model` runs EDCT "
            "tasks only (run them with lmms-eval, which runs the EDCT tasks too)"
        )
    rest = [t for t in unknown if t not in theirs]
    if rest:
        parts.append(f"unknown task(s) {', '.join(rest)}")
    return "; ".join(parts) + f"; EDCT tasks: {listed}"


def tasks_of_records(tasks: str, domains: Sequence[str]) -> dict[str, list[str]]:
    """lmms-eval task name → the record domains it holds, for the export of a run of ``tasks``
    (the group ``edct_bench`` stands for its three domain tasks)."""
    names = requested_tasks(tasks)
    if CALIBRATION in names:
        return {CALIBRATION: list(domains)}
    chosen = list(DOMAIN_TASKS) if GROUP in names else [t for t in names if t in DOMAIN_TASKS]
    return {t: [DOMAIN_TASKS[t]] for t in chosen}
