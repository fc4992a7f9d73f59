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

A file reaches a leaderboard only when ``dataset.id`` is a registered *benchmark*: a Hub dataset
repo with an ``eval.yaml`` at its root (``name``, ``description``, ``evaluation_framework``,
``tasks: [{id, config, split}]``, validated by the Hub at push time, then allow-listed) whose task
ids are the entries' ``task_id``s. ``edct hub-benchmark OUT`` writes that repository
(``write_benchmark_repo``): ``eval.yaml`` with one task per metric name, exactly the ``task_id``s
written here, and a README card; ``eval_yaml_problems`` is the documented schema.

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
from edct_task.scoring.metrics import metric_names, metric_row
from edct_task.scoring.results import Results, ScoreBlock

FOLDER = ".eval_results"
EVALUATION_FRAMEWORK = "edct-bench"
"""The ``evaluation_framework`` of the benchmark's ``eval.yaml`` and of every entry ("should be the
same as the one in the eval.yaml", hub-docs eval-results)."""
EVAL_YAML_KEYS = frozenset({"name", "description", "evaluation_framework", "tasks"})
TASK_KEYS = frozenset({"id", "config", "split"})
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


def claimed_overall(meta: Mapping[str, Any]) -> ScoreBlock:
    """The overall scores a bundle claims (``bundle.json`` ``claimed``, as ``edct submit`` wrote it)."""
    return Results.model_validate(meta.get("claimed")).overall


def notes_for(meta: Mapping[str, Any]) -> str:
    """The setup an entry was measured under, in one line."""
    setup = {k: v for k, v in (meta.get("setup") or {}).items() if k != "target"}
    manifest = str(setup.get("dataset_digest") or "")[:12]
    n = claimed_overall(meta).counts.total
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
    overall = claimed_overall(meta)
    date = str(meta.get("created") or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    out = {}
    for name in metric_names():
        estimate = overall.estimate(name)
        if estimate is None:
            continue
        ds: dict[str, Any] = {"id": dataset_id, "task_id": name}
        if revision:
            ds["revision"] = revision
        entry: dict[str, Any] = {"dataset": ds, "value": round(float(estimate), 6), "date": date}
        if source_url:
            entry["source"] = {"url": source_url, "name": f"EDCT bundle {str(meta.get('digest'))[:12]}"}
        entry["evaluation_framework"] = EVALUATION_FRAMEWORK
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


def benchmark_eval_yaml(*, name: str, config: str = "default", split: str = "test") -> dict[str, Any]:
    """The benchmark's ``eval.yaml``: one task per EDCT metric, its id the metric name (the
    ``task_id`` of every ``.eval_results`` entry ``edct submit`` writes)."""
    description = (
        "EDCT (Explanation-Driven Counterfactual Testing) measures whether a vision-language "
        "model's explanations are faithful: the concepts an explanation cites are edited out of "
        "the image by verified counterfactual edits, and the model's answer and explanation are "
        "judged again. Tasks: " + "; ".join(f"{m}: {metric_row(m).description}" for m in metric_names()) + "."
    )
    return {
        "name": name,
        "description": description,
        "evaluation_framework": EVALUATION_FRAMEWORK,
        "tasks": [{"id": metric, "config": config, "split": split} for metric in metric_names()],
    }


def eval_yaml_problems(data: Any) -> list[str]:
    """Every way ``data`` departs from the documented ``eval.yaml`` (hub-docs ``eval-results.md``,
    "Registering a Benchmark"): strings ``name``, ``description``, ``evaluation_framework``; a
    non-empty ``tasks`` list of ``{id, config, split}`` strings with distinct ids."""
    if not isinstance(data, Mapping):
        return ["eval.yaml must hold a mapping"]
    problems = [
        f"{key} is required (a non-empty string)"
        for key in ("name", "description", "evaluation_framework")
        if not isinstance(data.get(key), str) or not data[key].strip()
    ]
    unknown = sorted(set(map(str, data)) - EVAL_YAML_KEYS)
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)}")
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        return [*problems, "tasks is required (a non-empty list)"]
    ids = []
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            problems.append(f"task {i}: not a mapping")
            continue
        for key in ("id", "config", "split"):
            if not isinstance(task.get(key), str) or not task[key]:
                problems.append(f"task {i}: {key} is required (a string)")
        extra = sorted(set(map(str, task)) - TASK_KEYS)
        if extra:
            problems.append(f"task {i}: unknown field(s) {', '.join(extra)}")
        ids.append(task.get("id"))
    if len(set(map(str, ids))) != len(ids):
        problems.append("task ids must be distinct")
    return problems


def benchmark_card(dataset_id: str, eval_yaml: Mapping[str, Any]) -> str:
    """The benchmark repo's README (dataset card): what it measures and how results reach it."""
    rows = "\n".join(f"| `{t['id']}` | {metric_row(t['id']).description} |" for t in eval_yaml["tasks"])
    first = eval_yaml["tasks"][0]
    front = yaml.safe_dump(
        {
            "pretty_name": eval_yaml["name"],
            "tags": ["benchmark", "evaluation", "vision-language", "faithfulness"],
        },
        sort_keys=False,
    )
    return f"""---
{front}---

# {eval_yaml["name"]}

{eval_yaml["description"]}

Each task of [`eval.yaml`](eval.yaml) is one EDCT metric; a model repo's
`.eval_results/*.yaml` entries name this dataset (`dataset.id: {dataset_id}`) and the metric as
`task_id` (config `{first["config"]}`, split `{first["split"]}`):

| task id | metric |
|---|---|
{rows}

## Adding a model's results

```bash
edct run --config run.yaml                      # or lmms-eval with the edct tasks
edct submit runs/my-model --output my-model.edct.zip \\
  --eval-results path/to/model-repo --dataset-id {dataset_id}
```

`edct submit` writes one `.eval_results/edct_<metric>_<setup>.yaml` per metric and setup into
the model repo (its `notes` name the judge, editor and thresholds); open a pull request with them
on the model's Hub repo. The Hub validates this `eval.yaml` at push time; benchmarks are shown
as leaderboards once allow-listed (beta).
"""


def write_benchmark_repo(
    out: Path, *, dataset_id: str, name: str, config: str = "default", split: str = "test"
) -> list[Path]:
    """Write ``eval.yaml`` and ``README.md`` of the benchmark dataset repo into ``out``."""
    from edct_task.engine.files import atomic_write

    spec = benchmark_eval_yaml(name=name, config=config, split=split)
    problems = eval_yaml_problems(spec)
    if problems:  # our own output must be valid; a failure here is a bug, not a user error
        raise AssertionError(f"eval.yaml: {problems}")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "eval.yaml", yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100))
    atomic_write(out / "README.md", benchmark_card(dataset_id, spec))
    return [out / "eval.yaml", out / "README.md"]
