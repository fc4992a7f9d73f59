"""lmms-eval 0.7.3 output folders, read as that version writes them.

Layout (``lmms_eval/loggers/evaluation_tracker.py``):

- ``EvaluationTracker.save_results_aggregated`` writes ``<output_path>/<model_name_sanitized>/
  <date_id>_results.json``; ``model_name_sanitized`` comes from the ``pretrained=`` / ``model=`` /
  ``model_version=`` … argument (``GeneralConfigTracker._get_model_name``) and is the empty string
  when the model has none, so the file then lies directly in ``<output_path>``.
- ``EvaluationTracker.save_results_samples`` writes ``<date_id>_samples_<task>.jsonl`` beside it,
  one logged sample per line: ``doc_id``, ``target``, ``filtered_resps`` (flattened to the single
  response when there is one request per document), ``doc_hash`` and every key ``process_results``
  returned (``lmms_eval/evaluator.py`` ``_process_document_results``).

Inside the results file (``lmms_eval/evaluator.py`` ``evaluate`` and
``lmms_eval/evaluator_utils.py`` ``consolidate_results`` / ``consolidate_group_results`` /
``prepare_print_tasks``):

- ``results[task]`` maps ``"<metric>,<filter>"`` to the value and ``"<metric>_stderr,<filter>"`` to
  the standard error, which is the *string* ``"N/A"`` when lmms-eval has none (custom aggregation
  functions, ``bootstrap_iters=0``); plus ``alias`` (indented with ``" - "`` for subtasks) and
  ``_stderr_clt`` / ``_stderr_clustered`` variants. ``samples`` is popped before writing.
- A group whose YAML has no ``aggregate_metric_list`` has no score of its own: its entry is
  ``{"alias": …, " ": " "}``. ``group_subtasks`` maps every group to its subtasks (solo tasks to
  ``[]``); ``n-samples[task]`` holds ``original`` and ``effective`` document counts (per task,
  never per group).
- ``config.model`` is the ``--model`` name, ``config.model_args`` the ``--model_args`` string (or
  dict); ``higher_is_better[task][metric]``; ``versions``; ``configs[task]`` the task YAML as loaded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.run.outputs import LMMS_RESULTS_SUFFIX as RESULTS_SUFFIX
from edct_task.run.outputs import LMMS_SAMPLES_MARK as SAMPLES_MARK
from edct_task.run.outputs import find_files

# lmms_eval/loggers/evaluation_tracker.py GeneralConfigTracker._get_model_name: the order matters
# (peft/delta come with pretrained).
_MODEL_NAME_PREFIXES = (
    "peft=",
    "delta=",
    "pretrained=",
    "model=",
    "model_version=",
    "model_name=",
    "model_id=",
    "path=",
    "engine=",
)


class ResultsFileError(UserError, ValueError):
    """A file that is not an lmms-eval results file (named in the message)."""


@dataclass(frozen=True)
class MetricValue:
    """One ``<metric>,<filter>`` entry of a task's results."""

    metric: str
    filter: str
    value: float | None
    stderr: float | None
    """lmms-eval's ``_stderr`` (None where it wrote ``"N/A"``)."""

    @property
    def key(self) -> str:
        return f"{self.metric},{self.filter}"


@dataclass(frozen=True)
class TaskEntry:
    """One task or group of a results file."""

    name: str
    alias: str
    metrics: dict[str, MetricValue]
    """``"<metric>,<filter>"`` → value; empty for a group without a score of its own."""
    subtasks: tuple[str, ...]
    n_effective: int | None
    """Documents evaluated (``n-samples[task].effective``); None for groups."""
    higher_is_better: dict[str, bool | None]
    has_own_score: bool


@dataclass(frozen=True)
class ResultsFile:
    """A parsed ``<date>_results.json``."""

    path: Path
    date_id: str
    model: str
    model_args: str
    tasks: dict[str, TaskEntry]
    raw: dict[str, Any] = field(repr=False)

    @property
    def model_key(self) -> str:
        """Model identity as lmms-eval records it: model name and model args."""
        return f"{self.model}({self.model_args})" if self.model_args else self.model

    @property
    def model_name(self) -> str:
        """The name lmms-eval derives from the model args (``pretrained=…``), else ``--model``."""
        named = model_name_from_args(self.model_args)
        return named or self.model_key

    def top_level(self) -> list[str]:
        """Tasks and groups that are nobody's subtask, in file order."""
        children = {t for entry in self.tasks.values() for t in entry.subtasks}
        return [name for name in self.tasks if name not in children]

    def samples_files(self) -> dict[str, Path]:
        """Task → its logged-samples file beside this results file (``--log_samples``)."""
        out = {}
        for p in sorted(self.path.parent.glob(f"{self.date_id}{SAMPLES_MARK}*.jsonl")):
            out[p.name[len(self.date_id) + len(SAMPLES_MARK) : -len(".jsonl")]] = p
        return out


def model_name_from_args(model_args: str) -> str:
    """``GeneralConfigTracker._get_model_name``: the value after the first known prefix, or ''."""
    for prefix in _MODEL_NAME_PREFIXES:
        if prefix in model_args:
            return model_args.split(prefix)[1].split(",")[0]
    return ""


def _args_string(model_args: Any) -> str:
    if model_args is None:
        return ""
    if isinstance(model_args, dict):
        return ",".join(f"{k}={v}" for k, v in model_args.items())
    return str(model_args)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def find_results_files(path: Path) -> list[Path]:
    """Every lmms-eval results file at or under ``path`` (a file, a model folder or an output path)."""
    if path.is_file():
        return [path] if path.name.endswith(RESULTS_SUFFIX) else []
    return find_files(path, "", RESULTS_SUFFIX)


def read_results_file(path: Path) -> ResultsFile:
    """Parse one results file; :class:`ResultsFileError` names what is missing."""
    try:
        raw = json.loads(_utf8_text(path))
    except (OSError, json.JSONDecodeError, RecursionError) as exc:
        raise ResultsFileError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("results"), dict):
        raise ResultsFileError(f"{path}: no 'results' object; not an lmms-eval results file")
    config = raw.get("config") or {}
    group_subtasks: dict[str, list[str]] = raw.get("group_subtasks") or {}
    n_samples: dict[str, dict[str, int]] = raw.get("n-samples") or {}
    hib: dict[str, dict[str, bool | None]] = raw.get("higher_is_better") or {}
    # groups with a score appear in "groups" as well (same numbers); "results" has every entry
    entries: dict[str, dict[str, Any]] = dict(raw["results"])
    for name, entry in (raw.get("groups") or {}).items():
        entries.setdefault(name, entry)
    tasks = {}
    for name, entry in entries.items():
        metrics: dict[str, MetricValue] = {}
        for key, value in entry.items():
            metric, sep, filt = key.partition(",")
            if not sep or "_stderr" in metric:
                continue  # alias, " ", samples, stderr variants
            stderr = entry.get(f"{metric}_stderr,{filt}")
            metrics[key] = MetricValue(metric, filt, _number(value), _number(stderr))
        alias = str(entry.get("alias", name)).strip()
        alias = alias[2:] if alias.startswith("- ") else alias
        tasks[name] = TaskEntry(
            name=name,
            alias=alias,
            metrics=metrics,
            subtasks=tuple(group_subtasks.get(name, ())),
            n_effective=(n_samples.get(name) or {}).get("effective"),
            higher_is_better=dict(hib.get(name, {})),
            has_own_score=bool(metrics) and " " not in entry,
        )
    name = path.name
    return ResultsFile(
        path=path,
        date_id=name[: -len(RESULTS_SUFFIX)],
        model=str(config.get("model") or "unknown-model"),
        model_args=_args_string(config.get("model_args")),
        tasks=tasks,
        raw=raw,
    )


def _utf8_text(path: Path) -> str:
    """The file as UTF-8 text; a bad byte is a ``ResultsFileError`` naming its line."""
    from edct_task.run.checks import MAX_JSON_BYTES, RunReadError, decode_utf8, read_regular_file

    try:
        return decode_utf8(path, read_regular_file(path, MAX_JSON_BYTES))
    except RunReadError as exc:
        raise ResultsFileError(str(exc)) from None
