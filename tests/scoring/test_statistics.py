"""The benchmark's statistics pinned to reference implementations (scipy, statsmodels, numpy)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from edct_task.scoring import statistics as st
from edct_task.scoring.statistics import Interval, bootstrap_ci, mean_interval, mean_sd, wilson_interval


def _bernoulli(n: int, p: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(np.float64)


def _graded(n: int, seed: int) -> np.ndarray:
    # CCS_graded-like values: means of 1-4 normalised 0..4 scores, skewed towards 1.
    rng = np.random.default_rng(seed)
    steps = rng.integers(1, 5, size=n)
    return np.array([rng.choice(5, size=k, p=[0.1, 0.1, 0.15, 0.25, 0.4]).mean() / 4 for k in steps])


def _scipy_percentile_ci(x: np.ndarray, seed: int, confidence: float = 0.95) -> tuple[float, float]:
    res = stats.bootstrap(
        (x,),
        np.mean,
        method="percentile",
        n_resamples=10_000,
        confidence_level=confidence,
        random_state=np.random.default_rng(seed),
        vectorized=True,
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _hand_resampled_ci(
    x: np.ndarray, seed: int, *, n_resamples: int = 10_000, confidence: float = 0.95, rows: int | None = None
) -> tuple[float, float]:
    """The resampler edct-bench wrote by hand before scipy: blocks of ``rows`` resamples drawn as
    ``default_rng(seed).integers(0, n, (rows, n))``, percentiles of the resample means."""
    rng = np.random.default_rng(seed)
    rows = rows or n_resamples
    means = np.concatenate(
        [
            x[rng.integers(0, x.size, size=(min(rows, n_resamples - start), x.size))].mean(axis=1)
            for start in range(0, n_resamples, rows)
        ]
    )
    alpha = 1.0 - confidence
    low, high = np.percentile(means, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return float(low), float(high)


# --------------------------------------------------------------------------- mean_interval (every CCS)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (57, 60), (150, 300), (299, 300), (1, 1)])
@pytest.mark.parametrize("confidence", [0.95, 0.90])
def test_mean_interval_of_0_1_scores_is_clopper_pearson(k: int, n: int, confidence: float) -> None:
    values = np.r_[np.ones(k), np.zeros(n - k)]
    ci = mean_interval(values, confidence=confidence)
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    assert (ci.low, ci.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert (ci.estimate, ci.n, ci.method) == (k / n, n, "clopper-pearson-effective-n")


def test_an_all_pass_run_of_ten_has_a_real_interval_not_a_point() -> None:
    # The percentile bootstrap gave [1.00, 1.00] here (every resample of ten 1s is ten 1s).
    ci = mean_interval(np.ones(10))
    assert ci.low == pytest.approx(0.025 ** (1 / 10), abs=1e-12)  # Clopper–Pearson: 0.6915
    assert ci.high == 1.0 and round(ci.low, 2) == 0.69
    assert mean_interval(np.zeros(10)).high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)


@pytest.mark.parametrize("value", [0.0, 0.125, 0.5, 0.875, 1.0])
@pytest.mark.parametrize("n", [1, 2, 10, 300])
def test_mean_interval_never_has_zero_width(value: float, n: int) -> None:
    ci = mean_interval(np.full(n, value))
    assert ci.low < ci.high and ci.low <= value <= ci.high
    assert ci.low >= 0.0 and ci.high <= 1.0


def test_mean_interval_by_hand_on_binary_ccs_values() -> None:
    # CCS_binary at k = 2: four samples 1, one 0.5, one 0 -> m = 0.75, v = 7/48 (ddof 0)
    values = [1, 1, 1, 1, 0.5, 0]
    n, m, v = 6, 0.75, float(np.var(values))
    assert v == pytest.approx((4 * 0.25**2 + 0.25**2 + 0.75**2) / 6)
    z2 = stats.norm.ppf(0.975) ** 2
    n_eff = n * m * (1 - m) / ((n * v + z2 * m * (1 - m)) / (n + z2))
    ci = mean_interval(values)
    assert ci.low == pytest.approx(stats.beta.ppf(0.025, m * n_eff, n_eff - m * n_eff + 1), abs=1e-10)
    assert ci.high == pytest.approx(stats.beta.ppf(0.975, m * n_eff + 1, n_eff - m * n_eff), abs=1e-10)
    # values inside [0, 1] vary less than 0/1 values of the same mean: narrower than Clopper–Pearson
    # of n trials, wider than the binomial of 2n steps would be (steps of one sample correlate)
    assert n < n_eff
    low, high = proportion_confint(4.5, 6, method="beta")
    assert high - low > ci.high - ci.low


def test_mean_interval_covers_where_the_bootstrap_collapsed() -> None:
    # Runs that nearly always pass: 0/1 scores with p = 0.995 at n = 30 (the percentile bootstrap
    # covers 13.5 % here: all-pass samples give [1, 1]); coverage of 2,000 seeded samples.
    rng = np.random.default_rng(7)
    hits = sum(
        (ci := mean_interval((rng.random(30) < 0.995).astype(float))).low <= 0.995 <= ci.high
        for _ in range(2000)
    )
    assert hits / 2000 >= 0.95


def test_mean_interval_edge_cases_and_validation() -> None:
    empty = mean_interval([])
    assert empty.n == 0 and math.isnan(empty.estimate) and math.isnan(empty.low)
    assert empty.as_dict()["low"] is None
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mean_interval([0.5, 1.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mean_interval([-0.1, 0.5])
    with pytest.raises(ValueError, match="finite"):
        mean_interval([0.5, math.nan])
    with pytest.raises(ValueError, match="one-dimensional"):
        mean_interval([[0.5]])
    with pytest.raises(ValueError, match="between 0 and 1"):
        mean_interval([0.5], confidence=1.0)


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("bernoulli_0.5", _bernoulli(300, 0.5, 1)),
        ("bernoulli_0.6", _bernoulli(300, 0.6, 2)),
        ("bernoulli_0.1", _bernoulli(300, 0.1, 3)),
        ("graded", _graded(300, 4)),
    ],
)
@pytest.mark.parametrize("confidence", [0.95, 0.90])
def test_bootstrap_agrees_with_scipy_percentile(name: str, values: np.ndarray, confidence: float) -> None:
    ours = bootstrap_ci(values, confidence=confidence, seed=123)
    low, high = _scipy_percentile_ci(values, seed=7, confidence=confidence)
    assert ours.estimate == pytest.approx(values.mean(), abs=1e-15)
    # Independent random streams: agreement within Monte-Carlo error of 10,000 resamples.
    assert abs(ours.low - low) < 0.01, name
    assert abs(ours.high - high) < 0.01, name
    assert ours.low <= ours.estimate <= ours.high
    assert ours.n == 300
    assert ours.method == "bootstrap-percentile"


@pytest.mark.parametrize(
    ("values", "seed", "confidence"),
    [
        (_bernoulli(300, 0.5, 1), 0, 0.95),
        (_bernoulli(300, 0.1, 3), 0, 0.95),
        (_bernoulli(57, 0.6, 2), 42, 0.90),
        (_graded(300, 4), 123, 0.95),
    ],
)
def test_bootstrap_keeps_the_numbers_of_the_hand_written_resampler(
    values: np.ndarray, seed: int, confidence: float
) -> None:
    # scipy.stats.bootstrap draws the same stream from default_rng(seed): intervals written by the
    # hand-written resampler (results.json, README tables) are reproduced, not just approximated.
    ci = bootstrap_ci(values, seed=seed, confidence=confidence)
    low, high = _hand_resampled_ci(values, seed, confidence=confidence)
    assert ci.low == pytest.approx(low, abs=1e-12)
    assert ci.high == pytest.approx(high, abs=1e-12)


def test_bootstrap_pinned_reference_values() -> None:
    # Computed by the hand-written resampler (edct-bench before the switch to scipy).
    ci = bootstrap_ci(_bernoulli(300, 0.5, 1), seed=0)
    assert (ci.low, ci.high) == (
        pytest.approx(0.4533333333333333, abs=1e-12),
        pytest.approx(0.5666666666666667),
    )
    ci = bootstrap_ci(_bernoulli(57, 0.6, 2), seed=42)
    assert (ci.low, ci.high) == (
        pytest.approx(0.43859649122807015, abs=1e-12),
        pytest.approx(0.6842105263157895),
    )


def test_bootstrap_coverage_sanity_on_bernoulli_half() -> None:
    values = np.zeros(300)
    values[np.random.default_rng(0).permutation(300)[:150]] = 1.0  # exactly 150 successes
    ci = bootstrap_ci(values)
    assert ci.estimate == 0.5
    assert ci.low < 0.5 < ci.high
    expected_width = 2 * 1.96 * math.sqrt(0.25 / 300)
    assert ci.high - ci.low == pytest.approx(expected_width, rel=0.10)


def test_bootstrap_repeated_coverage_is_near_nominal() -> None:
    # 200 data sets of 60 Bernoulli(0.3) values: the 95% interval should cover 0.3 about 95% of
    # the time (the percentile bootstrap under-covers slightly at small n).
    rng = np.random.default_rng(2024)
    hits = 0
    trials = 200
    for i in range(trials):
        x = (rng.random(60) < 0.3).astype(float)
        ci = bootstrap_ci(x, n_resamples=2_000, seed=i)
        hits += ci.low <= 0.3 <= ci.high
    assert 0.88 <= hits / trials <= 0.99


def test_bootstrap_is_deterministic_for_a_seed_and_varies_across_seeds() -> None:
    x = _graded(300, 11)
    a = bootstrap_ci(x, seed=5)
    b = bootstrap_ci(list(x), seed=5)
    c = bootstrap_ci(x, seed=6)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)


def test_bootstrap_blocked_resampling_matches_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    # Force many small blocks (7 resamples of n=300 per block) to exercise the chunked path.
    x = _bernoulli(300, 0.4, 9)
    monkeypatch.setattr(st, "_MAX_BLOCK_ELEMENTS", 300 * 7)
    blocked = bootstrap_ci(x, seed=1)
    blocked_again = bootstrap_ci(x, seed=1)
    low, high = _scipy_percentile_ci(x, seed=2)
    assert blocked == blocked_again
    assert (blocked.low, blocked.high) == pytest.approx(_hand_resampled_ci(x, 1, rows=7), abs=1e-12)
    assert abs(blocked.low - low) < 0.01
    assert abs(blocked.high - high) < 0.01


def test_bootstrap_handles_n_larger_than_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "_MAX_BLOCK_ELEMENTS", 16)
    x = _bernoulli(100, 0.5, 3)
    ci = bootstrap_ci(x, n_resamples=200, seed=0)
    assert ci.low <= ci.estimate <= ci.high
    assert ci.low >= 0.0 and ci.high <= 1.0


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int64, np.float32, np.float64])
def test_bootstrap_accepts_numeric_dtypes(dtype: type) -> None:
    x = _bernoulli(120, 0.5, 5).astype(dtype)
    ci = bootstrap_ci(x, n_resamples=1_000)
    ref = bootstrap_ci(x.astype(np.float64), n_resamples=1_000)
    assert ci.estimate == pytest.approx(ref.estimate, abs=1e-7)
    assert ci.low == pytest.approx(ref.low, abs=1e-7)
    assert ci.high == pytest.approx(ref.high, abs=1e-7)


def test_bootstrap_empty_is_nan_interval_with_n_zero() -> None:
    ci = bootstrap_ci([])
    assert ci.n == 0
    assert math.isnan(ci.estimate) and math.isnan(ci.low) and math.isnan(ci.high)
    assert ci.as_dict() == {
        "estimate": None,
        "low": None,
        "high": None,
        "n": 0,
        "method": "bootstrap-percentile",
    }


@pytest.mark.parametrize("values", [[0.75], [1.0, 1.0, 1.0, 1.0]])
def test_bootstrap_single_value_or_constant_is_degenerate(values: list[float]) -> None:
    ci = bootstrap_ci(values)
    assert ci.low == ci.estimate == ci.high == values[0]
    assert ci.n == len(values)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"values": [0.5, math.nan]}, ValueError, "finite"),
        ({"values": [0.5, math.inf]}, ValueError, "finite"),
        ({"values": [[0.1, 0.2], [0.3, 0.4]]}, ValueError, "one-dimensional"),
        ({"values": 0.5}, ValueError, "one-dimensional"),
        ({"values": ["a", "b"]}, TypeError, "real numbers"),
        ({"values": [1 + 2j]}, TypeError, "real numbers"),
        ({"values": [0.1], "n_resamples": 0}, ValueError, "n_resamples must be >= 1"),
        ({"values": [0.1], "n_resamples": 10.0}, TypeError, "n_resamples must be an integer"),
        ({"values": [0.1], "confidence": 1.0}, ValueError, "strictly between 0 and 1"),
        ({"values": [0.1], "confidence": 0}, ValueError, "strictly between 0 and 1"),
        ({"values": [0.1], "confidence": "0.95"}, TypeError, "confidence"),
        ({"values": [0.1], "seed": -1}, ValueError, "seed must be >= 0"),
        ({"values": [0.1], "seed": None}, TypeError, "seed must be an integer"),
    ],
)
def test_bootstrap_validates_inputs(kwargs: dict, error: type[Exception], match: str) -> None:
    values = kwargs.pop("values")
    with pytest.raises(error, match=match):
        bootstrap_ci(values, **kwargs)


# --------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize("n", [1, 2, 5, 10, 88, 100, 128, 1000])
@pytest.mark.parametrize("confidence", [0.95, 0.90, 0.99])
def test_wilson_matches_statsmodels(n: int, confidence: float) -> None:
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        ours = wilson_interval(k, n, confidence=confidence)
        low, high = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
        assert ours.low == pytest.approx(low, abs=1e-12)
        assert ours.high == pytest.approx(high, abs=1e-12)
        assert ours.estimate == k / n
        assert ours.n == n
        assert ours.method == "wilson"


def test_wilson_paper_example() -> None:
    # EDCT matched the human consensus in 83 of 88 cases (the paper's human validation).
    ci = wilson_interval(83, 88)
    assert ci.estimate == pytest.approx(0.9432, abs=1e-4)
    assert ci.low == pytest.approx(0.8738, abs=1e-4)
    assert ci.high == pytest.approx(0.9755, abs=1e-4)


def test_wilson_accepts_numpy_integers() -> None:
    assert wilson_interval(np.int64(3), np.int32(10)) == wilson_interval(3, 10)


def test_wilson_zero_trials_is_nan_interval() -> None:
    ci = wilson_interval(0, 0)
    assert ci.n == 0 and math.isnan(ci.estimate) and math.isnan(ci.low) and math.isnan(ci.high)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((5, 4), {}, ValueError, "successes must be <= n"),
        ((-1, 4), {}, ValueError, "successes must be >= 0"),
        ((0, -1), {}, ValueError, "n must be >= 0"),
        ((1.0, 4), {}, TypeError, "successes must be an integer"),
        ((1, 4.0), {}, TypeError, "n must be an integer"),
        ((True, 4), {}, TypeError, "successes must be an integer"),
        ((1, 4), {"confidence": 95}, ValueError, "strictly between 0 and 1"),
    ],
)
def test_wilson_validates_inputs(args: tuple, kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        wilson_interval(*args, **kwargs)


# --------------------------------------------------------------------------- mean ± SD


def test_mean_sd_matches_numpy_sample_sd() -> None:
    runs = [0.61, 0.55, 0.58, 0.53, 0.62]
    mean, sd = mean_sd(runs)
    assert mean == pytest.approx(np.mean(runs), abs=1e-15)
    assert sd == pytest.approx(np.std(runs, ddof=1), abs=1e-15)
    assert sd == pytest.approx(stats.tstd(runs), abs=1e-15)
    assert isinstance(mean, float) and isinstance(sd, float)


def test_mean_sd_edge_cases() -> None:
    m, s = mean_sd([0.4])
    assert m == 0.4 and math.isnan(s)
    m, s = mean_sd([])
    assert math.isnan(m) and math.isnan(s)


def test_mean_sd_rejects_nan() -> None:
    with pytest.raises(ValueError, match="finite"):
        mean_sd([0.5, math.nan])


# --------------------------------------------------------------------------- Interval


def test_interval_is_frozen_and_json_ready() -> None:
    ci = wilson_interval(7, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ci.low = 0.0  # type: ignore[misc]
    d = ci.as_dict()
    assert d == {"estimate": 0.7, "low": ci.low, "high": ci.high, "n": 10, "method": "wilson"}
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert Interval(**d) == ci
