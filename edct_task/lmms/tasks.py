"""The EDCT lmms-eval tasks as data: which items ``--tasks`` names, for ``edct run --model``.

The task YAMLs in ``task_configs/`` name their documents; an ``edct run --model … --tasks T`` run
reads the same items the way every run does (``run.runner.load_samples``): ``edct_calibration``
is the calibration world of the task's index file, the ``edct_bench*`` tasks are EDCT-Bench
(``$EDCT_BENCH_DATA``) or some of its domains. lmms-eval itself is not asked: no ``TaskManager``
is built for a run, only to name lmms-eval's own tasks in a refusal.

Each registered domain (``bench_data.domains``) is one task, ``Domain.task``, whose YAML is
``task_yaml(domain)``: the shipped domains' YAMLs are in ``task_configs/`` (a test checks they are
that text), a domain registered elsewhere gets its YAML written into a folder of this process
(``task_folders``), which lmms-eval indexes beside ``task_configs/``.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edct_task.bench_data import domains as registry
from edct_task.bench_data.domain import Domain
from edct_task.core.errors import ConfigError
from edct_task.lmms import state
from task_configs import calibration_index

GROUP = "edct_bench"
CALIBRATION = "edct_calibration"


def domain_tasks() -> dict[str, str]:
    """lmms-eval task → its domain, for every registered domain."""
    return {d.task: d.name for d in registry.domains()}


def edct_tasks() -> tuple[str, ...]:
    """Every EDCT task name: the group, one per registered domain, the calibration world."""
    return (GROUP, *domain_tasks(), CALIBRATION)


def task_yaml(domain: Domain, task_dir: str = "") -> str:
    """The lmms-eval task YAML of ``domain``; ``task_dir``: where ``task_configs/`` is, when the
    YAML is written anywhere else (its include and placeholder file are then absolute paths)."""
    base = f"{task_dir.rstrip('/')}/" if task_dir else ""
    return (
        f"# EDCT-Bench, domain {domain.name} ({domain.label}): edct_task.lmms.tasks.task_yaml of its\n"
        "# Domain record. Documents come from $EDCT_BENCH_DATA (the dataset built by\n"
        f'# `edct build-bench`: a save_to_disk folder or a hub id), filtered to domain == "{domain.name}".\n'
        "# To name the dataset in YAML instead, include this file and set dataset_path (and\n"
        "# dataset_kwargs: {load_from_disk: true} for a local folder).\n"
        f"task: {domain.task}\n"
        f"include: {base}_edct_template_yaml\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        f"  data_files: {base}edct_bench_source.jsonl\n"
        f"process_docs: !function edct_task.lmms.documents.{domain.hook}\n"
    )


def task_folders() -> list[str]:
    """The folders lmms-eval indexes for the EDCT tasks: ``task_configs/``, and a folder of this
    process holding the YAML of every registered domain that ``task_configs/`` does not ship."""
    from task_configs import TASK_DIR

    extra = tuple(d.name for d in registry.domains() if not (TASK_DIR / f"{d.task}.yaml").is_file())
    if not extra:
        return [str(TASK_DIR)]

    def make() -> Path:
        folder = Path(tempfile.mkdtemp(prefix="edct-domain-tasks-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        for record in registry.domains():
            if record.name in extra:
                (folder / f"{record.task}.yaml").write_text(task_yaml(record, str(TASK_DIR)), "utf-8")
        return folder

    return [str(TASK_DIR), str(state.task_folder(extra, make))]


def requested_tasks(tasks: str) -> list[str]:
    """The task names of ``--tasks`` (comma-separated, blanks ignored, each once)."""
    return list(dict.fromkeys(t.strip() for t in tasks.split(",") if t.strip()))


def task_data(tasks: str, model: str = "") -> dict[str, Any]:
    """The ``data`` section ``--tasks`` stands for; ``ConfigError`` for a name that is not an
    EDCT task (lmms-eval's own tasks are named as such) or for tasks of two data sources."""
    names = requested_tasks(tasks)
    unknown = [t for t in names if t not in edct_tasks()]
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
    return {"source": "dataset", "domains": [domain_tasks()[t] for t in names]}


def unknown_tasks(unknown: Sequence[str], model: str) -> str:
    """What to say about task names that are not EDCT tasks: lmms-eval's own are named as such."""
    import difflib

    known = edct_tasks()
    listed = ", ".join(known)
    if not unknown:
        return f"--tasks names no task; EDCT tasks: {listed}"
    close = {t: difflib.get_close_matches(t, known, n=3, cutoff=0.8) for t in unknown}
    if all(close.values()):  # typos of EDCT tasks: answered at once, lmms-eval's index not built
        return "; ".join(f"unknown task {t} (did you mean {' or '.join(m)}?)" for t, m in close.items())
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
        hints = [f"{t} (did you mean {' or '.join(close[t])}?)" if close[t] else t for t in rest]
        parts.append(f"unknown task(s) {', '.join(hints)}")
    return "; ".join(parts) + f"; EDCT tasks: {listed}"


def tasks_of_records(tasks: str, domains: Sequence[str]) -> dict[str, list[str]]:
    """lmms-eval task name → the record domains it holds, for the export of a run of ``tasks``
    (the group ``edct_bench`` stands for every domain task)."""
    names = requested_tasks(tasks)
    if CALIBRATION in names:
        return {CALIBRATION: list(domains)}
    by_task = domain_tasks()
    chosen = list(by_task) if GROUP in names else [t for t in names if t in by_task]
    return {t: [by_task[t]] for t in chosen}
