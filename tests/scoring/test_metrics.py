"""Benchmark-level aggregation: denominators, positions, domains, CIs."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from edct_task.core.records import SampleInput, SampleRecord, SampleScores
from edct_task.scoring.metrics import counts, metric_intervals, metric_names, summarise


def _record(i: int, domain: str, status: str, ac=(), ef=(), graded=None) -> SampleRecord:
    scores = None
    if status in ("scored", "unscored"):
        ccs = [a * e for a, e in zip(ac, ef, strict=True) if a is not None and e is not None]
        scores = SampleScores(
            ccs_binary=sum(ccs) / len(ccs) if ccs else None,
            ccs_graded=graded,
            ac=tuple(ac),
            ef=tuple(ef),
        )
    return SampleRecord(
        sample=SampleInput(id=f"s{i}", domain=domain, question="q", image="0" * 64),
        status=status,
        scores=scores,
    )


def test_excluded_unscored_and_errors_are_counted_not_zeroed() -> None:
    records = [
        _record(0, "a", "scored", ac=(1, 1), ef=(1, 0), graded=0.5),  # ccs 0.5
        _record(1, "a", "scored", ac=(1, None), ef=(1, None), graded=1.0),  # ccs 1 (step 2 unscored)
        _record(2, "b", "scored", ac=(0,), ef=(0,), graded=0.0),  # ccs 0, k=1 chain
        _record(3, "b", "excluded"),
        _record(4, "b", "unscored", ac=(None,), ef=(None,)),
        _record(5, "a", "error"),
    ]
    m = metric_intervals(records)
    assert set(m) == set(metric_names())
    assert m["ccs_binary"].n == 3 and m["ccs_binary"].estimate == pytest.approx(0.5)
    assert m["ccs_graded"].estimate == pytest.approx(0.5)
    assert (m["ac_k1"].n, m["ac_k1"].estimate) == (3, pytest.approx(2 / 3))
    assert (m["ef_k2"].n, m["ef_k2"].estimate) == (1, 0.0)  # only sample 0 was judged at k=2
    low, high = proportion_confint(2, 3, method="wilson")
    assert (m["ac_k1"].low, m["ac_k1"].high) == (pytest.approx(low), pytest.approx(high))
    c = counts(records)
    assert c.model_dump() == {
        "total": 6,
        "scored": 3,
        "excluded": 1,
        "unscored": 1,
        "error": 1,
        "binary_scored": 3,
        "graded_scored": 3,
        "steps_unscored": 0,
    }


def test_per_domain_blocks_partition_the_samples() -> None:
    rng = np.random.default_rng(1)
    records = [
        _record(
            i,
            "ab"[i % 2],
            "scored",
            ac=(int(rng.random() < 0.8),),
            ef=(int(rng.random() < 0.5),),
            graded=float(rng.integers(0, 5)) / 4,
        )
        for i in range(200)
    ]
    s = summarise(records, n_resamples=1000)
    assert s.overall.counts.scored == 200
    assert [s.per_domain[d].counts.scored for d in "ab"] == [100, 100]
    overall = s.overall.metrics["ccs_binary"]
    expected = np.mean([r.scores.ccs_binary for r in records])
    assert overall.estimate == pytest.approx(expected)
    assert overall.low < expected < overall.high


def test_no_scored_samples_gives_empty_intervals_not_zero() -> None:
    m = metric_intervals([_record(0, "a", "excluded")])
    assert m["ccs_binary"].n == 0 and np.isnan(m["ccs_binary"].estimate)


def test_an_all_pass_run_gets_an_interval_with_width() -> None:
    # Issue 44: the percentile bootstrap gave ten all-pass samples CCS_binary [1.00, 1.00].
    records = [_record(i, "a", "scored", ac=(1, 1), ef=(1, 1), graded=1.0) for i in range(10)]
    s = summarise(records).overall.metrics
    for name in ("ccs_binary", "ccs_graded"):
        assert s[name].estimate == 1.0 and s[name].high == 1.0
        assert s[name].low == pytest.approx(0.6915, abs=1e-4)  # Clopper–Pearson of 10/10
        assert s[name].method == "clopper-pearson-effective-n"
