"""The Hugging Face Hub's evaluation-results files (``.eval_results/<name>.yaml`` in a model repo).

Format (https://huggingface.co/docs/hub/eval-results): a YAML list of entries ::

    - dataset:
        id: org/benchmark        # required: the Hub dataset id of the benchmark
        task_id: ccs_binary      # required: the task, as the benchmark's eval.yaml names it
        revision: <hash>         # optional: dataset revision
      value: 0.712               # required: the metric value
      date: "2026-12-01"         # optional: ISO-8601 date or datetime
      source:                    # optional: attribution; url required when given
        url: https://…
        name: …
      notes: "…"                 # optional: details about the evaluation setup

``edct submit --eval-results DIR`` writes one file per metric and setup (the Hub keeps variants
of one benchmark apart by file), its ``notes`` naming the setup (judge, editor, extractor, k,
thresholds, setup id, dataset manifest and size, bundle digest). ``edct leaderboard
--eval-results DIR`` reads such files back as *unverified* entries: nothing in them can be
re-derived, so they are shown apart and never ranked. The YAML is written and read with PyYAML
(``safe_dump`` / ``safe_load``); the checks below are the documented schema.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from edct_task.core.inputs import InputFileError, read_yaml
from edct_task.leaderboard.identity import sanitise
from edct_task.reporting.setup import setup_id, setup_label
from edct_task.scoring.metrics import METRIC_NAMES

FOLDER = ".eval_results"
ENTRY_KEYS = frozenset({"dataset", "value", "verifyToken", "date", "source", "evaluation_framework", "notes"})
DATASET_KEYS = frozenset({"id", "task_id", "revision"})
SOURCE_KEYS = frozenset({"url", "name", "user", "org"})
MAX_FILE_BYTES = 1 << 20
MAX_VALUE = 1e15
"""Largest magnitude of a value (a metric; anything beyond is a forged or broken file)."""


class EvalResultsError(ValueError):
    """A file that is not a Hub eval-results file; the message names the file and the field."""


def schema_problems(data: Any) -> list[str]:
    """Every way ``data`` (a parsed file) departs from the documented schema; [] when valid."""
    if not isinstance(data, list) or not data:
        return ["the file must hold a non-empty list of entries"]
    problems = []
    for i, entry in enumerate(data):
        at = f"entry {i}"
        if not isinstance(entry, Mapping):
            problems.append(f"{at}: not a mapping")
            continue
        unknown = sorted(set(map(str, entry)) - ENTRY_KEYS)
        if unknown:
            problems.append(f"{at}: unknown field(s) {', '.join(unknown)}")
        ds = entry.get("dataset")
        if not isinstance(ds, Mapping):
            problems.append(f"{at}: dataset is required (a mapping with id and task_id)")
        else:
            for key in ("id", "task_id"):
                if not isinstance(ds.get(key), str) or not ds.get(key):
                    problems.append(f"{at}: dataset.{key} is required (a string)")
            if "revision" in ds and not isinstance(ds["revision"], str):
                problems.append(f"{at}: dataset.revision must be a string")
            extra = sorted(set(map(str, ds)) - DATASET_KEYS)
            if extra:
                problems.append(f"{at}: unknown dataset field(s) {', '.join(extra)}")
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            problems.append(f"{at}: value is required (a number)")
        elif not -MAX_VALUE <= value <= MAX_VALUE:  # compares ints exactly, no float overflow
            problems.append(f"{at}: value is not a finite number within ±{MAX_VALUE:g}")
        if "date" in entry and not isinstance(entry["date"], (str, dt.date)):
            problems.append(f"{at}: date must be an ISO-8601 date or datetime")
        elif isinstance(entry.get("date"), str):
            try:
                dt.datetime.fromisoformat(entry["date"].replace("Z", "+00:00"))
            except ValueError:
                problems.append(f"{at}: date {entry['date']!r} is not ISO-8601")
        if "source" in entry:
            src = entry["source"]
            if not isinstance(src, Mapping) or not isinstance(src.get("url"), str):
                problems.append(f"{at}: source needs a url")
            elif sorted(set(map(str, src)) - SOURCE_KEYS):
                problems.append(f"{at}: unknown source field(s)")
        for key in ("notes", "verifyToken", "evaluation_framework"):
            if key in entry and not isinstance(entry[key], str):
                problems.append(f"{at}: {key} must be a string")
    return problems


def notes_for(meta: Mapping[str, Any]) -> str:
    """The setup an entry was measured under, in one line."""
    setup = {k: v for k, v in (meta.get("setup") or {}).items() if k != "target"}
    manifest = str(setup.get("dataset_digest") or "")[:12]
    n = ((meta.get("claimed") or {}).get("overall") or {}).get("counts", {}).get("total")
    return (
        f"EDCT {setup_label(setup)}; setup {setup_id(setup)}; dataset manifest {manifest} ({n} samples); "
        f"bundle {str(meta.get('digest'))[:12]}"
    )


def entries_for(
    meta: Mapping[str, Any],
    *,
    dataset_id: str,
    revision: str | None = None,
    source_url: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """File name → entries, one file per metric of one setup (claimed overall estimates)."""
    setup = {k: v for k, v in (meta.get("setup") or {}).items() if k != "target"}
    sid = setup_id(setup)
    metrics = ((meta.get("claimed") or {}).get("overall") or {}).get("metrics") or {}
    date = str(meta.get("created") or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    out = {}
    for name in METRIC_NAMES:
        estimate = (metrics.get(name) or {}).get("estimate")
        if estimate is None:
            continue
        ds: dict[str, Any] = {"id": dataset_id, "task_id": name}
        if revision:
            ds["revision"] = revision
        entry: dict[str, Any] = {"dataset": ds, "value": round(float(estimate), 6), "date": date}
        if source_url:
            entry["source"] = {"url": source_url, "name": f"EDCT bundle {str(meta.get('digest'))[:12]}"}
        entry["notes"] = notes_for(meta)
        out[f"edct_{name}_{sid}.yaml"] = [entry]
    return out


def write_eval_results(
    meta: Mapping[str, Any],
    folder: Path,
    *,
    dataset_id: str,
    revision: str | None = None,
    source_url: str | None = None,
) -> list[Path]:
    """Write the files into ``folder/.eval_results/`` (``folder`` is the model repo's root)."""
    from edct_task.engine.files import atomic_write

    target = folder / FOLDER
    target.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, entries in entries_for(
        meta, dataset_id=dataset_id, revision=revision, source_url=source_url
    ).items():
        problems = schema_problems(entries)
        if problems:  # our own output must be valid; a failure here is a bug, not a user error
            raise AssertionError(f"{name}: {problems}")
        atomic_write(target / name, yaml.safe_dump(entries, sort_keys=False, allow_unicode=True))
        paths.append(target / name)
    return paths


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]  # read only if it is a regular file (core.inputs)
    folder = path / FOLDER if (path / FOLDER).is_dir() else path
    return sorted(folder.glob("*.y*ml"))


def read_eval_results(paths: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(unverified entries, rejected files) from model-repo folders, ``.eval_results`` folders or
    files. The model is named by the repo folder (its name is all the format gives)."""
    entries: list[dict[str, Any]] = []
    rejected: list[dict[str, str]] = []
    for root in paths:
        for file in _files(root):
            repo = file.parent.parent if file.parent.name == FOLDER else file.parent
            try:
                data = read_yaml(file, MAX_FILE_BYTES)
                problems = schema_problems(data)
                if problems:
                    raise EvalResultsError("; ".join(problems[:3]))
            except (InputFileError, EvalResultsError) as exc:
                first = str(exc).splitlines()[0].removeprefix(f"{file}: ")[:300]
                rejected.append(
                    {
                        "bundle": str(file),
                        "reason": f"not a Hub eval-results file: {first}",
                        "code": "eval_results",
                    }
                )
                continue
            for entry in data:
                entries.append(
                    {
                        "model": sanitise(repo.name),
                        "dataset": sanitise(entry["dataset"]["id"], 120),
                        "task_id": sanitise(entry["dataset"]["task_id"], 60),
                        "revision": sanitise(entry["dataset"].get("revision") or "", 64),
                        "value": entry["value"],
                        "date": sanitise(entry.get("date") or "", 40),
                        "notes": sanitise(entry.get("notes") or "", 300),
                        "source": sanitise((entry.get("source") or {}).get("url") or "", 200),
                        "file": str(file),
                    }
                )
    return entries, rejected
