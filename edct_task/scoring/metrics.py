"""Benchmark-level scores from sample records.

Metric names live here and nowhere else (the lmms-eval hooks and the reports import them).
CCS_binary and CCS_graded: mean over scored samples with a 95% percentile bootstrap CI that
resamples samples. AC and EF at chain position k: proportion over samples judged at that position,
with a 95% Wilson CI. Excluded, unscored and errored samples are counted, never scored 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.scoring.statistics import Interval, bootstrap_ci, wilson_interval

CCS_BINARY = "ccs_binary"
CCS_GRADED = "ccs_graded"
POSITIONS = (1, 2)


def ac_name(k: int) -> str:
    return f"ac_k{k}"


def ef_name(k: int) -> str:
    return f"ef_k{k}"


METRIC_NAMES = (CCS_BINARY, CCS_GRADED, *(f(k) for k in POSITIONS for f in (ac_name, ef_name)))


def counts(records: Sequence[SampleRecord]) -> dict[str, int]:
    out = {"total": len(records), "scored": 0, "excluded": 0, "unscored": 0, "error": 0}
    for r in records:
        out[r.status] += 1
    out["binary_scored"] = sum(1 for r in records if r.scores and r.scores.ccs_binary is not None)
    out["graded_scored"] = sum(1 for r in records if r.scores and r.scores.ccs_graded is not None)
    out["steps_unscored"] = sum(
        1 for r in records for s in r.steps if s.verified and (s.binary is None or s.binary.ccs is None)
    )
    return out


def _position_values(records: Iterable[SampleRecord], k: int, attr: str) -> list[int]:
    values = []
    for r in records:
        if r.status != "scored" or r.scores is None:
            continue
        per_position = getattr(r.scores, attr)
        if len(per_position) >= k and per_position[k - 1] is not None:
            values.append(per_position[k - 1])
    return values


def metric_intervals(
    records: Sequence[SampleRecord], *, seed: int = 0, n_resamples: int = 10_000
) -> dict[str, Interval]:
    """Every metric with its CI over ``records`` (all domains together)."""
    scored = [r for r in records if r.status == "scored" and r.scores is not None]
    binary = [r.scores.ccs_binary for r in scored if r.scores.ccs_binary is not None]  # type: ignore[union-attr]
    graded = [r.scores.ccs_graded for r in scored if r.scores.ccs_graded is not None]  # type: ignore[union-attr]
    out = {
        CCS_BINARY: bootstrap_ci(binary, n_resamples=n_resamples, seed=seed),
        CCS_GRADED: bootstrap_ci(graded, n_resamples=n_resamples, seed=seed),
    }
    for k in POSITIONS:
        for name, attr in ((ac_name(k), "ac"), (ef_name(k), "ef")):
            values = _position_values(records, k, attr)
            out[name] = wilson_interval(sum(values), len(values))
    return out


def summarise(records: Sequence[SampleRecord], *, seed: int = 0, n_resamples: int = 10_000) -> dict[str, Any]:
    """``{"overall": {...}, "per_domain": {domain: {...}}}`` with metrics and counts."""

    def block(rs: Sequence[SampleRecord]) -> dict[str, Any]:
        return {
            "metrics": {
                k: v.as_dict() for k, v in metric_intervals(rs, seed=seed, n_resamples=n_resamples).items()
            },
            "counts": counts(rs),
        }

    domains = sorted({r.sample.domain for r in records})
    return {
        "overall": block(records),
        "per_domain": {d: block([r for r in records if r.sample.domain == d]) for d in domains},
    }


def stability(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Mean ± SD (ddof=1) of every overall metric across repeated runs (the paper's Table 5).

    ``results`` are parsed ``results.json`` files of runs that differ only in their seed.
    """
    from edct_task.scoring.statistics import mean_sd

    out: dict[str, dict[str, float | int | None]] = {}
    for name in METRIC_NAMES:
        values = [r["results"]["overall"]["metrics"][name]["estimate"] for r in results]
        values = [v for v in values if v is not None]
        mean, sd = mean_sd(values) if values else (float("nan"), float("nan"))
        out[name] = {"mean": _finite(mean), "sd": _finite(sd), "runs": len(values)}
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
