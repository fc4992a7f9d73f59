"""Write lmms-eval 0.7.3 output folders the way lmms-eval writes them (for the report tests).

What each piece follows in lmms-eval 0.7.3 (installed package ``lmms_eval``):

- ``evaluator.py`` ``evaluate``: the results dict ``{"results", "groups" (only when a group
  aggregates), "group_subtasks", "configs", "versions", "n-shot", "higher_is_better",
  "n-samples": {task: {"original", "effective"}}}``, then ``simple_evaluate`` adds ``config``
  (``model``, ``model_args``, …), ``git_hash``, ``date``, ``lmms_eval_version``.
- ``evaluator_utils.py`` ``consolidate_results``: ``results[task]["alias"]``,
  ``"<metric>,<filter>"``, ``"<metric>_stderr,<filter>"`` (the string ``"N/A"`` when
  ``api/metrics.py`` ``stderr_for_metric`` has no stderr for the aggregation: every custom
  ``!function`` aggregation such as MMMU's and MathVista's), ``samples``; and
  ``TaskOutput.calculate_clt_aggregate_metric``: ``"<metric>_stderr_clt,<filter>"``.
- ``evaluator_utils.py`` ``consolidate_group_results``: a group without
  ``aggregate_metric_list`` gets ``{" ": " "}`` and no score; one with it gets
  ``aggregate_subtask_metrics`` (size-weighted mean) and ``pooled_sample_stderr`` (or "N/A").
- ``evaluator_utils.py`` ``prepare_print_tasks``: subtask aliases prefixed ``" - "``, ``samples``
  popped from every entry.
- ``api/metrics.py`` ``mean`` / ``mean_stderr``: the ``mean`` aggregation and its stderr.
- ``loggers/evaluation_tracker.py`` ``EvaluationTracker.save_results_aggregated`` and
  ``save_results_samples`` do the writing: we call them, so paths (``<output>/<model>/`` or
  ``<output>/`` when model_args has no ``pretrained=``-like key), ``task_hashes`` and the logged
  sample flattening are lmms-eval's own.

EDCT tasks' per-sample values are what our ``process_results`` returns (``lmms.results.record_results``,
as during an export) and the YAML's aggregations; every call writing an EDCT task also writes the
EDCT run folder its logged samples name (``edct.run_dir``: ``support.edct_runs.write_edct_run`` over
the records of every EDCT task of the call, the lmms-eval model as its target).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.core.records import SampleInput, SampleRecord, SampleScores


@dataclass
class Bench:
    """A task whose aggregate value is given, as its aggregation function returned it."""

    name: str
    metric: str
    value: float
    n: int
    stderr: float | str = "N/A"
    filter: str = "none"
    alias: str | None = None
    other_filters: dict[str, float] = field(default_factory=dict)


@dataclass
class EdctTask:
    """One of our tasks: per-sample values from ``process_results`` over these records."""

    name: str
    records: list[SampleRecord]


@dataclass
class Group:
    name: str
    subtasks: list[Any]
    aggregate: list[tuple[str, str]] | None = None
    """(metric, filter) pairs of ``aggregate_metric_list``; None: the group has no score."""
    alias: str | None = None


def _ref(sample_id: str) -> str:
    return hashlib.sha256(sample_id.encode()).hexdigest()


def scored(sample_id: str, domain: str, ccs: float, graded: float, ac: tuple, ef: tuple) -> SampleRecord:
    return SampleRecord(
        sample=SampleInput(id=sample_id, domain=domain, question=f"Q {sample_id}?", image=_ref(sample_id)),
        status="scored",
        scores=SampleScores(ccs_binary=ccs, ccs_graded=graded, ac=ac, ef=ef),
    )


def excluded(sample_id: str, domain: str) -> SampleRecord:
    return SampleRecord(
        sample=SampleInput(id=sample_id, domain=domain, question=f"Q {sample_id}?", image=_ref(sample_id)),
        status="excluded",
        reason="verification failed after retry",
    )


def _edct_entry(
    task: EdctTask, run_dir: Path
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, bool]]:
    """results[task], logged samples, higher_is_better: our hooks + lmms-eval's aggregation code."""
    import yaml
    from lmms_eval.api.metrics import mean, mean_stderr

    from edct_task.lmms import aggregation
    from edct_task.lmms.results import record_results
    from task_configs import TASK_DIR

    loader = yaml.SafeLoader
    yaml.add_constructor("!function", lambda ld, node: ld.construct_scalar(node), Loader=loader)
    config = yaml.safe_load((Path(TASK_DIR) / "_edct_template_yaml").read_text())
    sample_metrics: dict[str, list[Any]] = {}
    logged = []
    for i, record in enumerate(task.records):
        response = record.model_dump_json()
        metrics = record_results(record, str(run_dir))
        for name, value in metrics.items():  # evaluator.py: sample_metrics[(metric, filter)].append
            sample_metrics.setdefault(name, []).append(value)
        logged.append(
            {
                "doc_id": i,
                "doc": {"id": record.sample.id},
                "target": record.sample.metadata.get("expected_answer", ""),
                "arguments": [record.sample.question],
                "resps": [[response]],
                "filtered_resps": [response],
                "doc_hash": f"{i:064x}",
                **metrics,
            }
        )
    aggregations = {
        "mean": mean,
        "edct_task.lmms.aggregation.count": aggregation.count,
        # the run folder's aggregation: an empty mapping (the run folder is written by the caller)
        "edct_task.lmms.aggregation.finish_run_folder": lambda items: {},
    }
    entry: dict[str, Any] = {"alias": task.name}
    hib = {}
    for spec in config["metric_list"]:
        name = spec["metric"]
        hib[name] = spec["higher_is_better"]
        items = sample_metrics.get(name)
        if not items:
            continue  # no sample returned it: lmms-eval has no (metric, filter) entry at all
        fn = aggregations[spec["aggregation"]]
        entry[f"{name},none"] = fn(items)
        # api/metrics.py stderr_for_metric: mean → mean_stderr, custom functions → None → "N/A"
        entry[f"{name}_stderr,none"] = mean_stderr(items) if fn is mean and len(items) > 1 else "N/A"
        entry["samples"] = len(items)
    return entry, logged, hib


def write_lmms_output(
    output_path: Path,
    *,
    model: str,
    model_args: str,
    tasks: list[Any],
    date: str = "2026-12-01T08:00:00.000000",
    log_samples: bool = True,
    run_dir: Path | None = None,
) -> Path:
    """Write one lmms-eval run; return its results file. Its EDCT tasks' records go to the EDCT run
    folder ``run_dir`` (default: ``<output_path>_edct/<model folder>_<date>``, beside the output)."""
    from lmms_eval.api.metrics import aggregate_subtask_metrics, pooled_sample_stderr
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker
    from support.edct_runs import write_edct_run

    tracker = EvaluationTracker(output_path=str(output_path))
    tracker.general_config_tracker.log_experiment_args(
        model_source=model,
        model_args=model_args,
        system_instruction=None,
        chat_template=None,
        fewshot_as_multiturn=False,
    )
    sanitized = tracker.general_config_tracker.model_name_sanitized
    folder = Path(output_path) / sanitized
    if run_dir is None:
        run_dir = Path(f"{output_path}_edct") / f"{sanitized or 'model'}_{date}".replace(":", "-")
    run_dir = run_dir.resolve()
    edct_records: list[SampleRecord] = []

    results: dict[str, dict[str, Any]] = {}
    samples: dict[str, list[dict[str, Any]]] = {}
    hib: dict[str, dict[str, bool]] = {}
    n_samples: dict[str, dict[str, int]] = {}
    group_subtasks: dict[str, list[str]] = {}
    groups_agg: dict[str, dict[str, Any]] = {}

    def leaf(task: Any, depth: int) -> None:
        prefix = " " * depth + "- " if depth else ""
        if isinstance(task, EdctTask):
            entry, logged, h = _edct_entry(task, run_dir)
            edct_records.extend(task.records)
            n = len(task.records)
        else:
            entry = {"alias": task.alias or task.name}
            for filt, value in {task.filter: task.value, **task.other_filters}.items():
                entry[f"{task.metric},{filt}"] = value
                entry[f"{task.metric}_stderr,{filt}"] = task.stderr
            entry["samples"] = task.n
            h = {task.metric: True}
            n = task.n
            logged = [
                {
                    "doc_id": i,
                    "doc": {},
                    "target": "A",
                    "arguments": ["question"],
                    "resps": [["A"]],
                    "filtered_resps": ["A"],
                    "doc_hash": f"{i:064x}",
                    task.metric: 1,
                }
                for i in range(min(n, 3))
            ]
        entry["alias"] = prefix + entry["alias"]
        results[task.name] = entry
        samples[task.name] = logged
        hib[task.name] = h
        n_samples[task.name] = {"original": n, "effective": n}

    def group(g: Group, depth: int) -> None:
        prefix = " " * depth + "- " if depth else ""
        names = []
        for sub in g.subtasks:
            (group if isinstance(sub, Group) else leaf)(sub, depth + 1)
            names.append(sub.name)
        group_subtasks[g.name] = names
        entry: dict[str, Any] = {"alias": prefix + (g.alias or g.name)}
        if g.aggregate is None:
            entry[" "] = " "  # consolidate_group_results: no aggregate_metric_list
        else:
            leaves = names
            for metric, filt in g.aggregate:
                key, se = f"{metric},{filt}", f"{metric}_stderr,{filt}"
                values = [results[t][key] for t in leaves if key in results[t]]
                stderrs = [results[t][se] for t in leaves if se in results[t]]
                sizes = [results[t]["samples"] for t in leaves if key in results[t]]
                entry[key] = aggregate_subtask_metrics(values, sizes, True)
                entry[se] = "N/A" if "N/A" in stderrs else pooled_sample_stderr(stderrs, sizes)
                entry["samples"] = sum(sizes)
            groups_agg[g.name] = entry
        results[g.name] = entry
        merged: dict[str, bool] = {}
        for t in names:
            merged.update(hib[t])
        hib[g.name] = merged

    for t in tasks:
        if isinstance(t, Group):
            group(t, 0)
        else:
            leaf(t, 0)
            group_subtasks[t.name] = []
    for entry in results.values():  # prepare_print_tasks pops "samples"
        entry.pop("samples", None)
    results_dict: dict[str, Any] = {
        "results": results,
        **({"groups": {k: dict(v) for k, v in groups_agg.items()}} if groups_agg else {}),
        "group_subtasks": dict(reversed(group_subtasks.items())),
        "configs": {name: {"task": name, "metadata": {"version": 0.0}} for name in samples},
        "versions": {name: 0.0 for name in samples},
        "n-shot": {name: 0 for name in samples},
        "higher_is_better": hib,
        "n-samples": n_samples,
        "config": {
            "model": model,
            "model_args": model_args,
            "batch_size": "1",
            "device": "cpu",
            "limit": None,
            "bootstrap_iters": 100000,
        },
        "git_hash": None,
        "date": date,
        "lmms_eval_version": "0.7.3",
    }
    if edct_records:  # what our hooks append to the run folder, and its run log
        write_edct_run(
            run_dir,
            edct_records,
            target={"backend": "lmms-eval", "model": model, "model_args": model_args},
            resamples=10_000,
        )
    tracker.save_results_aggregated(
        results=results_dict, samples=samples if log_samples else None, datetime_str=date
    )
    if log_samples:
        for name in samples:
            tracker.save_results_samples(task_name=name, samples=json.loads(json.dumps(samples[name])))
    return folder / f"{tracker.date_id}_results.json"
