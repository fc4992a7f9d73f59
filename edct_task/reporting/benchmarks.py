"""Scores of other lmms-eval benchmarks (MMMU, MathVista, MMLU variants…) on one [0, 1] scale.

Each benchmark reports on its own scale: MMMU's ``mmmu_acc`` is a proportion
(``lmms_eval/tasks/mmmu/utils.py`` ``mmmu_aggregate_results``), MathVista's GPT-judged
``llm_as_judge_eval`` a percentage (``lmms_eval/tasks/mathvista/utils.py``
``mathvista_aggregate_results``: ``round(correct / total * 100, 2)``), MMLU's ``acc`` and
MMLU-Pro's ``exact_match`` proportions. Every score is normalised to [0, 1] and keeps its original
scale. MathVista's judge model is read from the environment at evaluation time
(``mathvista_evals.py``: ``MODEL_VERSION``) and is not in the results file: it is "unknown".

A group with no score of its own (``mathvista_testmini`` in 0.7.3 has no ``aggregate_metric_list``)
is scored from its subtasks, weighted by their document counts, and the note says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from edct_task.run.lmms_results import ResultsFile, TaskEntry
from edct_task.scoring.metrics import PRIMARY

UNKNOWN_JUDGE = "unknown"


@dataclass(frozen=True)
class BenchmarkSpec:
    """What we know about a benchmark's results: the headline metric and its scale."""

    display: str
    metric: str
    """``"<metric>,<filter>"`` of the headline score."""
    scale: float
    """The score's maximum: 1 for proportions, 100 for percentages."""
    llm_judged: bool = False


_MATHVISTA = BenchmarkSpec("MathVista (testmini)", "llm_as_judge_eval,none", 100.0, llm_judged=True)
KNOWN_BENCHMARKS: dict[str, BenchmarkSpec] = {
    "mmmu_val": BenchmarkSpec("MMMU (val)", "mmmu_acc,none", 1.0),
    "mmmu_test": BenchmarkSpec("MMMU (test)", "mmmu_acc,none", 1.0),
    "mathvista_testmini": _MATHVISTA,
    "mathvista_testmini_cot": _MATHVISTA,
    "mathvista_testmini_solution": _MATHVISTA,
    "mathvista_testmini_format": _MATHVISTA,
    "mmlu": BenchmarkSpec("MMLU", "acc,none", 1.0),
    # the group's aggregate_metric_list names the flexible-extract filter (tasks/mmlu_pro/_mmlu_pro.yaml)
    "mmlu_pro": BenchmarkSpec("MMLU-Pro", "exact_match,flexible-extract", 1.0),
}

EDCT_METRIC = PRIMARY.name


@dataclass(frozen=True)
class BenchmarkScore:
    """One benchmark's score for one model, normalised to [0, 1], with its provenance."""

    task: str
    display: str
    score: float
    """Normalised to [0, 1]: ``raw / scale``."""
    raw: float
    scale: float
    scale_known: bool
    """False when the scale was inferred from the values (an unknown benchmark)."""
    metric: str
    source: str
    judge: str | None
    """The LLM judge of an LLM-judged benchmark (``"unknown"`` when the file does not say)."""
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "score": self.score,
            "raw_score": self.raw,
            "scale": f"0-{self.scale:g}",
            "scale_source": "known" if self.scale_known else "inferred from the value",
            "source": self.source,
            "metric": self.metric,
            "judge": self.judge,
            "note": self.note,
        }


def is_edct_task(entry: TaskEntry) -> bool:
    return entry.name.startswith("edct_") or any(m.metric == EDCT_METRIC for m in entry.metrics.values())


def _pick_metric(entry: TaskEntry, spec: BenchmarkSpec | None) -> str | None:
    if spec is not None and spec.metric in entry.metrics:
        return spec.metric
    numeric = [k for k, m in entry.metrics.items() if m.value is not None]
    if not numeric:
        return None
    higher = [k for k in numeric if entry.higher_is_better.get(entry.metrics[k].metric) is not False]
    candidates = higher or numeric
    unfiltered = [k for k in candidates if entry.metrics[k].filter == "none"]
    return (unfiltered or candidates)[0]


def _leaf_scores(
    results: ResultsFile, name: str, spec: BenchmarkSpec | None
) -> list[tuple[str, str, float, int]]:
    """(task, metric key, raw value, documents) of the scored leaves under ``name``."""
    entry = results.tasks.get(name)
    if entry is None:
        return []
    if entry.has_own_score or not entry.subtasks:
        key = _pick_metric(entry, spec or KNOWN_BENCHMARKS.get(name))
        if key is None or entry.metrics[key].value is None:
            return []
        n = entry.n_effective if entry.n_effective is not None else _documents(results, name)
        return [(name, key, entry.metrics[key].value, n)]  # type: ignore[list-item]
    out = []
    for sub in entry.subtasks:
        out.extend(_leaf_scores(results, sub, spec or KNOWN_BENCHMARKS.get(sub)))
    return out


def _documents(results: ResultsFile, name: str) -> int:
    entry = results.tasks.get(name)
    if entry is None:
        return 0
    if entry.n_effective is not None:
        return entry.n_effective
    return sum(_documents(results, s) for s in entry.subtasks)


def benchmark_score(results: ResultsFile, task: str) -> BenchmarkScore | None:
    """The normalised score of ``task`` in ``results``; None when the file holds no number for it."""
    entry = results.tasks[task]
    spec = KNOWN_BENCHMARKS.get(task)
    display = spec.display if spec else entry.alias or task
    judge = UNKNOWN_JUDGE if spec is not None and spec.llm_judged else None
    if entry.has_own_score:
        key = _pick_metric(entry, spec)
        if key is None:
            return None
        raw = entry.metrics[key].value
        assert raw is not None
        scale, known = _scale(spec, [raw])
        source = f"{results.path}: results[{task!r}][{key!r}]"
        return BenchmarkScore(task, display, raw / scale, raw, scale, known, key, source, judge)
    leaves = _leaf_scores(results, task, spec)
    if not leaves:
        return None
    total = sum(n for *_, n in leaves)
    if total <= 0:
        return None
    raw = sum(v * n for _, _, v, n in leaves) / total
    scale, known = _scale(spec, [v for _, _, v, _ in leaves])
    keys = sorted({k for _, k, _, _ in leaves})
    parts = ", ".join(f"{t} {v:g} (n={n})" for t, _, v, n in leaves)
    note = f"group '{task}' has no score of its own: mean of its subtasks weighted by documents: {parts}"
    source = f"{results.path}: results[subtasks of {task!r}][{'|'.join(keys)}], n-samples effective"
    return BenchmarkScore(task, display, raw / scale, raw, scale, known, "|".join(keys), source, judge, note)


def _scale(spec: BenchmarkSpec | None, values: list[float]) -> tuple[float, bool]:
    if spec is not None:
        return spec.scale, True
    return (100.0 if any(v > 1.0 for v in values) else 1.0), False
