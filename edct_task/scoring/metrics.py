"""Benchmark-level scores from sample records, and the one table of the metrics.

Every metric is one :class:`Metric` row of :func:`metrics`: its name (the key in ``results.json``,
lmms-eval's metric name, the Hub task id), label, per-sample value from ``SampleScores``, interval
kind, direction and description. Every output iterates the table (``results.json``, the console
and report tables, the leaderboard's Markdown/HTML/JSON/CSV, the Hub eval-results files, the audit
view, lmms-eval's ``process_results``), so a metric name is spelled here and nowhere else
(``tests/test_one_metric_table.py``). A new metric is a ``SampleScores`` field computed by
``score_sample`` (when its value needs one) plus a row here, or :func:`register_metric` at run time.

CCS_binary and CCS_graded: mean over scored samples with a 95% CI of the mean of scores in [0, 1]
(``statistics.mean_interval``: Clopper–Pearson at an effective n, over samples, not steps). AC and
EF at chain position k: proportion over samples judged at that position, with a 95% Wilson CI.
A registered metric whose values have no known bounds takes the percentile bootstrap (the run's
seed and ``bootstrap_resamples``). Excluded, unscored and errored samples are counted, never
scored 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from edct_task.core.records import SampleRecord, SampleScores
from edct_task.scoring.results import Counts, MetricValue, Results, ScoreBlock
from edct_task.scoring.statistics import Interval, bootstrap_ci, mean_interval, wilson_interval

IntervalKind = Literal["mean", "wilson", "bootstrap"]
Family = Literal["score", "rate"]
JudgeKind = Literal["binary", "graded"]


@dataclass(frozen=True)
class Metric:
    """One row of the metric table."""

    name: str
    """Key in ``results.json`` (``results.overall.metrics``), lmms-eval's metric name, the column
    stem in CSV files and the Hub ``task_id``: lower-case letters, digits and ``_``."""
    label: str
    """Column header in the console, report and leaderboard tables (e.g. ``CCS_binary``)."""
    value: Callable[[SampleScores], float | int | None]
    """The metric's value for one scored sample; None where the sample does not count for it."""
    interval: IntervalKind
    """How its 95% CI is computed over the samples' values (:data:`INTERVALS`)."""
    family: Family
    """``score``: a per-sample mean (CCS table: 3 decimals, with the counts; the report's CCS
    tables); ``rate``: a 0/1 proportion (AC/EF table: 2 decimals)."""
    description: str
    """One line for readers (the Hub benchmark card, the docs)."""
    higher_is_better: bool = True
    """Direction (lmms-eval's ``higher_is_better``)."""
    judge: JudgeKind | None = None
    """The judgement kind every verified step needs for the value to exist (``binary``,
    ``graded``), or None; ``--fail-on-unscored`` counts a score's missing values per kind asked."""

    def __post_init__(self) -> None:
        if not self.name or not all(c.islower() or c.isdigit() or c == "_" for c in self.name):
            raise ValueError(f"a metric name is lower-case letters, digits and '_'; got {self.name!r}")
        if self.interval not in INTERVALS:
            raise ValueError(
                f"metric {self.name}: interval kind {self.interval!r} is not one of {sorted(INTERVALS)}"
            )
        if self.family not in ("score", "rate"):
            raise ValueError(f"metric {self.name}: family {self.family!r} is not 'score' or 'rate'")
        if self.judge not in (None, "binary", "graded"):
            raise ValueError(
                f"metric {self.name}: judge kind {self.judge!r} is not 'binary', 'graded' or None"
            )


def _mean(values: Sequence[float], *, seed: int, n_resamples: int) -> Interval:
    del seed, n_resamples  # closed-form
    return mean_interval(values)


def _bootstrap(values: Sequence[float], *, seed: int, n_resamples: int) -> Interval:
    return bootstrap_ci(values, n_resamples=n_resamples, seed=seed)


def _wilson(values: Sequence[float], *, seed: int, n_resamples: int) -> Interval:
    if any(v not in (0, 1) for v in values):
        raise ValueError("a Wilson interval is over 0/1 values (a proportion)")
    del seed, n_resamples  # closed-form
    return wilson_interval(sum(1 for v in values if v == 1), len(values))


INTERVALS: dict[str, Callable[..., Interval]] = {"mean": _mean, "wilson": _wilson, "bootstrap": _bootstrap}
"""Interval kind → the function computing it from the per-sample values (the one dispatch point)."""

INTERVAL_TEXT = {
    "mean": "Clopper–Pearson at an effective n",
    "bootstrap": "percentile bootstrap over samples",
    "wilson": "Wilson score intervals",
}
"""Interval kind → how table notes name it."""

POSITIONS = (1, 2)
"""The chain positions k with an AC and an EF row."""


def _at(attr: str, k: int) -> Callable[[SampleScores], int | None]:
    def value(scores: SampleScores) -> int | None:
        per_position = getattr(scores, attr)
        return per_position[k - 1] if len(per_position) >= k else None

    return value


_ORDINAL = {1: "first", 2: "second"}

BUILTIN: tuple[Metric, ...] = (
    Metric(
        "ccs_binary",
        "CCS_binary",
        lambda s: s.ccs_binary,
        "mean",
        "score",
        "CCS with the binary judge: PCS x NCC over the verified counterfactual chains",
        judge="binary",
    ),
    Metric(
        "ccs_graded",
        "CCS_graded",
        lambda s: s.ccs_graded,
        "mean",
        "score",
        "CCS with the graded (1-5) judge",
        judge="graded",
    ),
    *(
        row
        for k in POSITIONS
        for row in (
            Metric(
                f"ac_k{k}",
                f"AC k={k}",
                _at("ac", k),
                "wilson",
                "rate",
                f"answer change after the {_ORDINAL[k]} verified edit",
            ),
            Metric(
                f"ef_k{k}",
                f"EF k={k}",
                _at("ef", k),
                "wilson",
                "rate",
                f"explanation faithfulness after the {_ORDINAL[k]} verified edit",
            ),
        )
    ),
)
"""The shipped rows, in ``results.json`` order."""

_registered: list[Metric] = []


def metrics() -> tuple[Metric, ...]:
    """The metric table: the shipped rows, then those registered at run time."""
    return (*BUILTIN, *_registered)


def metric_names() -> tuple[str, ...]:
    """Every metric's name, in table order."""
    return tuple(m.name for m in metrics())


def metric_row(name: str) -> Metric:
    """The row called ``name``."""
    for m in metrics():
        if m.name == name:
            return m
    raise KeyError(f"no metric {name!r}; the table has {', '.join(metric_names())}")


def family(kind: Family) -> tuple[Metric, ...]:
    """The rows of one family (``score`` or ``rate``), in table order."""
    return tuple(m for m in metrics() if m.family == kind)


PRIMARY = BUILTIN[0]
"""The headline metric (CCS_binary): what the leaderboard ranks by and the default of comparisons."""
GRADED = BUILTIN[1]
"""CCS with the graded judge (CCS_graded): the second series of the paper's figure."""


def register_metric(row: Metric) -> Metric:
    """Add ``row`` to the table for the rest of the process (a plugin's or a study's metric)."""
    if row.name in metric_names():
        raise ValueError(f"a metric called {row.name!r} is in the table already")
    _registered.append(row)
    return row


def unregister_metric(name: str) -> None:
    """Remove a row added by :func:`register_metric` (the shipped rows stay)."""
    for i, m in enumerate(_registered):
        if m.name == name:
            del _registered[i]
            return
    raise KeyError(f"no registered metric {name!r}")


@contextmanager
def extra_metric(row: Metric) -> Iterator[Metric]:
    """``with extra_metric(Metric(...)):`` the table has ``row`` inside the block (tests, studies)."""
    register_metric(row)
    try:
        yield row
    finally:
        unregister_metric(row.name)


def counts(records: Sequence[SampleRecord]) -> Counts:
    """How ``records`` ended, and how many have each score."""
    status = {"scored": 0, "excluded": 0, "unscored": 0, "error": 0}
    for r in records:
        status[r.status] += 1
    return Counts(
        total=len(records),
        **status,
        binary_scored=sum(1 for r in records if r.scores and r.scores.ccs_binary is not None),
        graded_scored=sum(1 for r in records if r.scores and r.scores.ccs_graded is not None),
        steps_unscored=sum(
            1 for r in records for s in r.steps if s.verified and (s.binary is None or s.binary.ccs is None)
        ),
    )


def sample_value(row: Metric, record: SampleRecord) -> float | int | None:
    """``row``'s value for one record: None unless the record is scored and counts for it."""
    if record.status != "scored" or record.scores is None:
        return None
    return row.value(record.scores)


def sample_values(record: SampleRecord) -> dict[str, float | int | None]:
    """Every metric's value for one record (the table's order): None where it does not count (the
    sample is not scored: excluded, unscored or an error)."""
    return {m.name: sample_value(m, record) for m in metrics()}


def values(row: Metric, records: Iterable[SampleRecord]) -> list[float | int]:
    """``row``'s values over the records that count for it."""
    return [v for r in records if (v := sample_value(row, r)) is not None]


def interval(
    row: Metric, values: Sequence[float | int], *, seed: int = 0, n_resamples: int = 10_000
) -> Interval:
    """``row``'s estimate and 95% CI over per-sample ``values`` (by its interval kind)."""
    return INTERVALS[row.interval](values, seed=seed, n_resamples=n_resamples)


def metric_intervals(
    records: Sequence[SampleRecord], *, seed: int = 0, n_resamples: int = 10_000
) -> dict[str, Interval]:
    """Every metric with its CI over ``records`` (all domains together)."""
    return {m.name: interval(m, values(m, records), seed=seed, n_resamples=n_resamples) for m in metrics()}


def summarise(records: Sequence[SampleRecord], *, seed: int = 0, n_resamples: int = 10_000) -> Results:
    """Every metric with its CI and the counts, overall and per domain (``seed`` and
    ``n_resamples`` reach only the rows whose interval kind is the bootstrap)."""

    def block(rs: Sequence[SampleRecord]) -> ScoreBlock:
        got = metric_intervals(rs, seed=seed, n_resamples=n_resamples)
        return ScoreBlock(metrics={k: MetricValue.of(v) for k, v in got.items()}, counts=counts(rs))

    domains = sorted({r.sample.domain for r in records})
    return Results(
        overall=block(records),
        per_domain={d: block([r for r in records if r.sample.domain == d]) for d in domains},
    )


def stability(results: Sequence[Results]) -> dict[str, dict[str, float | int | None]]:
    """Mean ± SD (ddof=1) of every overall metric across repeated runs (the paper's Table 5).

    ``results`` are the scores of runs that differ only in their seed.
    """
    from edct_task.scoring.statistics import mean_sd

    out: dict[str, dict[str, float | int | None]] = {}
    for name in metric_names():
        got = [v for r in results if (v := r.overall.estimate(name)) is not None]
        mean, sd = mean_sd(got) if got else (float("nan"), float("nan"))
        out[name] = {"mean": _finite(mean), "sd": _finite(sd), "runs": len(got)}
    return out


def _finite(x: float) -> float | None:
    return None if x != x else float(x)


def judge_agreement(records: Sequence[SampleRecord]) -> dict[str, Any] | None:
    """Judge–judge agreement of a judge panel (percent and Cohen's κ per pair and on average).

    Items are the judged chain steps; each judge's vote is its own majority (AC, EF) or mean
    (graded) over its self-consistency samples. None when no step was judged by a panel.
    """
    from edct_task.scoring.panel import agreement, judge_vote

    items = [s for r in records for s in r.steps if s.votes]
    if not items:
        return None
    members = sorted({v.member for s in items for v in s.votes})

    def votes(kind: str, value: Any) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {f"judge{m}": [] for m in members}
        for step in items:
            for m in members:
                samples = [value(v) for v in step.votes if v.member == m]
                vote = judge_vote(samples, kind) if samples else None  # type: ignore[arg-type]
                out[f"judge{m}"].append(
                    None if vote is None else (int(vote) if kind == "binary" else round(vote))
                )
        return out

    result: dict[str, Any] = {"items": len(items), "judges": len(members)}
    result["ac"] = agreement(votes("binary", lambda v: v.binary.ac), kind="binary")
    result["ef"] = agreement(votes("binary", lambda v: v.binary.ef), kind="binary")
    if any(v.graded is not None for s in items for v in s.votes):
        result["graded"] = agreement(
            votes("graded", lambda v: v.graded.score if v.graded else None), kind="graded"
        )
    return result
