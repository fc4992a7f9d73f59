"""Paired comparisons of runs over the same items: differences, tests, ranks and sample sizes.

Every model in EDCT is tested on the same (image, question) items, so two runs are compared item
by item: the difference of their per-item scores over the items *both* runs scored. Pairing
removes the between-item variance that two unpaired intervals carry, so the same data separate
models whose unpaired intervals overlap (overlap of two 95 % intervals is neither a test nor a
rank interval).

Pure functions on numbers (plus :func:`pair_records`, which only reads records), behind our own
names and types; the arithmetic is the maintained libraries' where one exists (``scipy`` for the
bootstrap, ``statsmodels`` for Holm and the power of the paired t-test; the sign-flip test is a
matrix product, checked against ``scipy.stats.permutation_test``, which is ~100 times slower on
it). Each function validates its inputs first, answers the degenerate cases itself and returns a
fixed type. Random streams follow ``scoring.statistics``: an explicit
``seed`` of ``numpy.random.default_rng`` and resampled indices drawn as
``rng.integers(0, n, (rows, n))``, so the bootstrap of a paired difference is
:func:`~edct_task.scoring.statistics.bootstrap_ci` of the per-item differences, draw for draw.

- :func:`pair_records`: the items two runs both scored, and why the others were dropped;
- :func:`paired_difference`: the mean difference with its percentile-bootstrap CI;
- :func:`sign_flip_test`: the paired permutation p-value (exact or Monte Carlo, it says which);
- :func:`compare_paired`: both, overall and per domain;
- :func:`holm`: Holm's step-down adjustment of a family of p-values;
- :func:`rank_intervals` and :func:`tied_groups`: bootstrap rank intervals of k entries over
  their common items, and the entries whose ranks cannot be told apart;
- :func:`paired_sample_size` and :func:`detectable_difference`: power of a paired comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from edct_task.core.records import SampleRecord
from edct_task.scoring.metrics import CCS_BINARY, CCS_GRADED
from edct_task.scoring.statistics import (
    _MAX_BLOCK_ELEMENTS,
    Interval,
    _as_finite_1d,
    _check_confidence,
    _check_int,
    bootstrap_ci,
)

__all__ = [
    "ALPHA",
    "DEFAULT_PAIRED_SD",
    "EXACT_MAX_NONZERO",
    "PAIRED_METRICS",
    "POWER",
    "Comparison",
    "Paired",
    "RankIntervals",
    "SignFlip",
    "compare_paired",
    "detectable_difference",
    "holm",
    "p_text",
    "pair_records",
    "paired_difference",
    "paired_sample_size",
    "rank_intervals",
    "sign_flip_test",
    "tied_groups",
]

PAIRED_METRICS = (CCS_BINARY, CCS_GRADED)
"""Per-item metrics a paired comparison can use (AC/EF are per chain position, not per item)."""

EXACT_MAX_NONZERO = 16
"""The sign-flip test is exact (all 2**m sign patterns) up to this many non-zero differences."""

ALPHA = 0.05
POWER = 0.8

DEFAULT_PAIRED_SD = 0.5
"""Paired SD assumed without a pilot: binary CCS of two models that disagree on 25 % of the items
(differences in {-1, 0, 1}, half each way: SD = sqrt(0.25) = 0.5)."""

ABSENT = "absent"
"""Drop reason: the item is not in that run at all."""


# ----------------------------------------------------------------------------- pairing


@dataclass(frozen=True)
class Paired:
    """Per-item scores of two runs over the items both scored, in item-id order."""

    ids: tuple[str, ...]
    domains: tuple[str, ...]
    a: NDArray[np.float64]
    b: NDArray[np.float64]
    dropped: dict[str, dict[str, int]]
    """``{"a": {reason: count}, "b": {...}}``: items left out because that side has no score.
    Reasons: the record's status (``excluded``, ``unscored``, ``error``), ``no <metric>`` (scored
    but without that metric) or ``absent`` (not in that run). An item neither side scored counts
    on both sides."""

    @property
    def n(self) -> int:
        return len(self.ids)


def _score(record: SampleRecord | None, metric: str) -> tuple[float | None, str]:
    if record is None:
        return None, ABSENT
    if record.status != "scored" or record.scores is None:
        return None, record.status
    value = getattr(record.scores, metric)
    return (None, f"no {metric}") if value is None else (float(value), "")


def pair_records(
    records_a: Sequence[SampleRecord], records_b: Sequence[SampleRecord], metric: str = CCS_BINARY
) -> Paired:
    """The items (by sample id) both runs scored on ``metric``, and why the others were dropped.

    Raises
    ------
    ValueError
        If ``metric`` is not one of :data:`PAIRED_METRICS` or a run holds one id twice.
    """
    if metric not in PAIRED_METRICS:
        raise ValueError(f"metric must be one of {', '.join(PAIRED_METRICS)}; got {metric!r}")
    by_id: list[dict[str, SampleRecord]] = []
    for side, records in (("A", records_a), ("B", records_b)):
        index: dict[str, SampleRecord] = {}
        for r in records:
            if r.sample.id in index:
                raise ValueError(f"run {side} holds sample {r.sample.id!r} twice")
            index[r.sample.id] = r
        by_id.append(index)
    ids, domains, a, b = [], [], [], []
    dropped: dict[str, dict[str, int]] = {"a": {}, "b": {}}
    for sid in sorted(set(by_id[0]) | set(by_id[1])):
        ra, rb = by_id[0].get(sid), by_id[1].get(sid)
        (va, why_a), (vb, why_b) = _score(ra, metric), _score(rb, metric)
        if va is None or vb is None:
            for side, value, why in (("a", va, why_a), ("b", vb, why_b)):
                if value is None:
                    dropped[side][why] = dropped[side].get(why, 0) + 1
            continue
        ids.append(sid)
        domains.append((ra or rb).sample.domain)  # type: ignore[union-attr]
        a.append(va)
        b.append(vb)
    return Paired(
        tuple(ids),
        tuple(domains),
        np.asarray(a, dtype=np.float64),
        np.asarray(b, dtype=np.float64),
        {side: dict(sorted(c.items())) for side, c in dropped.items()},
    )


def _pair_arrays(a: ArrayLike, b: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x, y = _as_finite_1d(a, "a"), _as_finite_1d(b, "b")
    if x.shape != y.shape:
        raise ValueError(
            f"a and b must hold one value per paired item each; got shapes {x.shape} and {y.shape}"
        )
    return x, y


# ----------------------------------------------------------------------------- difference and test


def paired_difference(
    a: ArrayLike, b: ArrayLike, *, n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """Mean of ``a - b`` over paired items with its percentile-bootstrap CI (resampling items).

    Parameters
    ----------
    a, b : array_like of float, shape (n,)
        Per-item scores of runs A and B on the same items, in the same order (finite).
    n_resamples, confidence, seed
        As :func:`~edct_task.scoring.statistics.bootstrap_ci`.

    Returns
    -------
    Interval
        ``estimate = mean(a) - mean(b)``; the interval is ``bootstrap_ci(a - b)``: resampling
        items resamples both runs' scores of an item together, which is the paired bootstrap.

    Raises
    ------
    ValueError
        If ``a`` and ``b`` differ in shape, are not 1-D, or hold NaN/inf; bad parameters as
        ``bootstrap_ci``.
    """
    x, y = _pair_arrays(a, b)
    return bootstrap_ci(x - y, n_resamples=n_resamples, confidence=confidence, seed=seed)


@dataclass(frozen=True)
class SignFlip:
    """A two-sided paired sign-flip permutation test of "mean difference = 0"."""

    p: float
    """The p-value (1.0 when every difference is zero or there are none)."""
    method: str
    """``"exact"`` (all 2**m sign patterns of the m non-zero differences) or ``"monte-carlo"``."""
    n_nonzero: int
    """Items whose difference is not zero (zeros carry no sign)."""
    n_resamples: int
    """Sign patterns evaluated: 2**m when exact, the Monte Carlo draws otherwise."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "p": self.p,
            "method": self.method,
            "n_nonzero": self.n_nonzero,
            "n_resamples": self.n_resamples,
        }


def sign_flip_test(
    differences: ArrayLike, *, n_resamples: int = 10_000, seed: int = 0, exact_max: int = EXACT_MAX_NONZERO
) -> SignFlip:
    """Two-sided paired permutation test: the per-item differences' signs flipped at random.

    Under the null hypothesis that A and B are exchangeable on every item, each difference is as
    likely to have either sign. The statistic is the sum T of the differences; zeros are left out
    (their sign changes nothing); the p-value is ``P(|T*| >= |T|)`` over sign patterns T*.

    Parameters
    ----------
    differences : array_like of float, shape (n,)
        Per-item ``a - b`` (finite).
    n_resamples : int, optional
        Monte Carlo patterns when the test is not exact, >= 1. Default 10,000.
    seed : int, optional
        Seed of ``numpy.random.default_rng`` for the Monte Carlo patterns, >= 0.
    exact_max : int, optional
        With at most this many non-zero differences all 2**m sign patterns are enumerated (the
        exact p-value); above it the p-value is Monte Carlo,
        ``(1 + #{|T*| >= |T|}) / (1 + n_resamples)``, never zero (Phipson & Smyth 2010).
        Default :data:`EXACT_MAX_NONZERO`.

    Returns
    -------
    SignFlip

    Raises
    ------
    ValueError
        If ``differences`` is not 1-D or holds NaN/inf, or a parameter is out of range.

    Notes
    -----
    ``scipy.stats.permutation_test(permutation_type="samples")`` on one sample is the same test
    (its exact p-values are equal, which the tests check), but it builds the patterns as generic
    pairings, about 100 times slower than the matrix product used here (``signs @ |d|``), which
    the board runs for every pair of every track. Monte Carlo signs are drawn as
    ``default_rng(seed).integers(0, 2, (rows, m))`` in blocks of at most 2**22 elements.
    """
    d = _as_finite_1d(differences, "differences")
    n_resamples = _check_int(n_resamples, "n_resamples", minimum=1)
    seed = _check_int(seed, "seed", minimum=0)
    exact_max = _check_int(exact_max, "exact_max", minimum=0)
    nonzero = d[d != 0.0]
    m = int(nonzero.size)
    if m == 0:
        return SignFlip(1.0, "exact", 0, 1)
    size = np.abs(nonzero)
    observed = abs(float(nonzero.sum()))
    threshold = observed - 1e-9 * max(1.0, float(size.sum()))  # sums equal up to rounding count
    if m <= min(exact_max, 24):
        patterns = 2**m
        hits = 0
        rows = max(1, _MAX_BLOCK_ELEMENTS // m)
        bits = np.arange(m, dtype=np.int64)
        for start in range(0, patterns, rows):
            codes = np.arange(start, min(patterns, start + rows), dtype=np.int64)
            signs = ((codes[:, None] >> bits) & 1) * 2 - 1
            hits += int(np.count_nonzero(np.abs(signs @ size) >= threshold))
        return SignFlip(min(1.0, hits / patterns), "exact", m, patterns)
    rng = np.random.default_rng(seed)
    rows = max(1, _MAX_BLOCK_ELEMENTS // m)
    hits = done = 0
    while done < n_resamples:
        block = min(rows, n_resamples - done)
        signs = rng.integers(0, 2, (block, m), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ size) >= threshold))
        done += block
    return SignFlip((1 + hits) / (1 + n_resamples), "monte-carlo", m, n_resamples)


def p_text(p: float, method: str, n_resamples: int) -> str:
    """A p-value for a table: ``0.0123``, ``1.2e-05``, or ``≤ 0.0001`` where a Monte Carlo test
    found no pattern as extreme (its floor ``1 / (n_resamples + 1)``: the true p is below it)."""
    floor = 1.0 / (n_resamples + 1)
    if method == "monte-carlo" and p <= floor * (1 + 1e-9):
        return f"≤ {floor:.4f}" if floor >= 1e-4 else f"≤ {floor:.1e}"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of A and B on one metric: the difference (A - B), its CI and test."""

    metric: str
    difference: Interval
    test: SignFlip
    mean_a: float
    mean_b: float
    sd: float
    """Sample SD (ddof=1) of the per-item differences (NaN with fewer than two items)."""
    per_domain: dict[str, Comparison] = field(default_factory=dict)

    @property
    def n_paired(self) -> int:
        return self.difference.n

    def as_dict(self) -> dict[str, Any]:
        d = self.difference.as_dict()
        out: dict[str, Any] = {
            "metric": self.metric,
            "difference": d["estimate"],
            "low": d["low"],
            "high": d["high"],
            "p": self.test.p,
            "test": self.test.method,
            "n_paired": self.n_paired,
            "mean_a": _none_if_nan(self.mean_a),
            "mean_b": _none_if_nan(self.mean_b),
            "sd": _none_if_nan(self.sd),
        }
        if self.per_domain:
            out["per_domain"] = {k: v.as_dict() for k, v in self.per_domain.items()}
        return out


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else x


def _one(
    metric: str,
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    *,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> Comparison:
    d = a - b
    return Comparison(
        metric=metric,
        difference=paired_difference(a, b, n_resamples=n_resamples, confidence=confidence, seed=seed),
        test=sign_flip_test(d, n_resamples=n_resamples, seed=seed),
        mean_a=float(a.mean()) if a.size else math.nan,
        mean_b=float(b.mean()) if b.size else math.nan,
        sd=float(d.std(ddof=1)) if d.size > 1 else math.nan,
    )


def compare_paired(
    paired: Paired,
    metric: str = CCS_BINARY,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Difference A - B with CI and sign-flip p-value, overall and per domain (same seed each)."""
    conf = _check_confidence(confidence)
    overall = _one(metric, paired.a, paired.b, n_resamples=n_resamples, seed=seed, confidence=conf)
    domains = np.asarray(paired.domains, dtype=object)
    per = {}
    for dom in sorted(set(paired.domains)):
        mask = domains == dom
        per[dom] = _one(
            metric, paired.a[mask], paired.b[mask], n_resamples=n_resamples, seed=seed, confidence=conf
        )
    return replace(overall, per_domain=per)


# ----------------------------------------------------------------------------- multiple comparisons


def holm(pvalues: ArrayLike) -> NDArray[np.float64]:
    """Holm's step-down adjusted p-values (family-wise error rate), in the input order.

    ``statsmodels.stats.multitest.multipletests(method="holm")``: the i-th smallest of m
    p-values becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``.

    Raises
    ------
    ValueError
        If ``pvalues`` is not 1-D, holds NaN/inf or a value outside [0, 1].
    """
    p = _as_finite_1d(pvalues, "pvalues")
    if p.size and (p.min() < 0.0 or p.max() > 1.0):
        raise ValueError("pvalues must lie in [0, 1]")
    if p.size == 0:
        return p.copy()
    from statsmodels.stats.multitest import multipletests  # imported at first use (pulls pandas)

    return np.asarray(multipletests(p, method="holm")[1], dtype=np.float64)


# ----------------------------------------------------------------------------- ranks


@dataclass(frozen=True)
class RankIntervals:
    """Ranks of k entries (1 = best) with their bootstrap intervals over the common items."""

    rank: NDArray[np.int64]
    """Observed rank: 1 + the number of entries with a strictly higher mean (ties share)."""
    low: NDArray[np.int64]
    """Best rank inside the interval (the lower ``(1 - confidence) / 2`` quantile)."""
    high: NDArray[np.int64]
    """Worst rank inside the interval (the upper quantile)."""
    means: NDArray[np.float64]
    n_items: int
    n_resamples: int
    confidence: float


def _ranks(means: NDArray[np.float64]) -> NDArray[np.int64]:
    """Competition ranks along the last axis: 1 + number of strictly greater values."""
    greater = means[..., None, :] > means[..., :, None]
    return (1 + greater.sum(axis=-1)).astype(np.int64)


def rank_intervals(
    scores: ArrayLike, *, n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> RankIntervals:
    """Bootstrap rank intervals of k entries scored on the same n items.

    Each resample draws n items with replacement (all entries' scores of an item together), ranks
    the entries by their mean over the resample (1 = best, ties share the better rank), and each
    entry's interval is the ``(1 ± confidence) / 2`` quantiles of its ranks (``lower`` and
    ``higher`` quantiles, so the bounds are ranks that occurred). The intervals are marginal (one
    per entry, like Chatbot Arena's), not simultaneous.

    Parameters
    ----------
    scores : array_like of float, shape (n_items, k)
        Column j holds entry j's per-item scores over the items every entry scored.
    n_resamples, confidence, seed
        As :func:`~edct_task.scoring.statistics.bootstrap_ci`; the resampled indices are the
        same draws (``default_rng(seed).integers(0, n, (rows, n))`` per block).

    Returns
    -------
    RankIntervals
        With no items nothing tells the entries apart: every rank is 1 and every interval 1..k.

    Raises
    ------
    ValueError
        If ``scores`` is not 2-D, has no column, or holds NaN/inf; bad parameters as
        ``bootstrap_ci``.
    """
    arr = np.asarray(scores)
    if arr.ndim != 2:
        raise ValueError(f"scores must be two-dimensional (items × entries); got shape {arr.shape}")
    n, k = arr.shape
    if k == 0:
        raise ValueError("scores must have at least one column (entry)")
    values = _as_finite_1d(arr.reshape(-1), "scores").reshape(n, k)
    n_resamples = _check_int(n_resamples, "n_resamples", minimum=1)
    conf = _check_confidence(confidence)
    seed = _check_int(seed, "seed", minimum=0)
    if n == 0:
        ones = np.ones(k, dtype=np.int64)
        return RankIntervals(ones, ones, np.full(k, k, dtype=np.int64), np.full(k, math.nan), 0, 0, conf)
    means = values.mean(axis=0)
    rank = _ranks(means)
    rng = np.random.default_rng(seed)
    rows_per_block = max(1, _MAX_BLOCK_ELEMENTS // n)
    boot = np.empty((n_resamples, k), dtype=np.int64)
    done = 0
    while done < n_resamples:
        rows = min(rows_per_block, n_resamples - done)
        idx = rng.integers(0, n, (rows, n))
        boot[done : done + rows] = _ranks(values[idx].mean(axis=1))
        done += rows
    alpha = (1.0 - conf) / 2.0
    low = np.quantile(boot, alpha, axis=0, method="lower").astype(np.int64)
    high = np.quantile(boot, 1.0 - alpha, axis=0, method="higher").astype(np.int64)
    return RankIntervals(rank, low, high, means, n, n_resamples, conf)


def tied_groups(low: ArrayLike, high: ArrayLike) -> list[list[int]]:
    """Entries whose rank intervals overlap, transitively: the connected components of the graph
    with an edge between i and j when ``[low_i, high_i]`` and ``[low_j, high_j]`` share a rank.

    Two entries in different groups are told apart (every rank of one's interval is better than
    every rank of the other's, and so for every entry in between); inside a group they are not,
    even where two of its members' intervals do not overlap but are chained by a third.

    Parameters
    ----------
    low, high : array_like of int, shape (k,)
        Rank interval bounds (1 = best), ``low <= high``.

    Returns
    -------
    list of list of int
        Groups of entry indices, best first (by their best ``low``), each sorted by ``(low, high,
        index)``; every index in exactly one group.

    Raises
    ------
    ValueError
        If the shapes differ, are not 1-D, or some ``low > high``.
    """
    lo, hi = _pair_arrays(low, high)
    if np.any(lo > hi):
        raise ValueError("every rank interval needs low <= high")
    order = sorted(range(lo.size), key=lambda i: (lo[i], hi[i], i))
    groups: list[list[int]] = []
    reach = -math.inf
    for i in order:  # sorted by low: a new group starts where no earlier interval reaches
        if groups and lo[i] <= reach:
            groups[-1].append(i)
            reach = max(reach, hi[i])
        else:
            groups.append([i])
            reach = hi[i]
    return groups


# ----------------------------------------------------------------------------- power


def _check_positive(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise TypeError(f"{name} must be a finite real number; got {value!r}")
    v = float(value)
    if v <= 0.0:
        raise ValueError(f"{name} must be > 0; got {value!r}")
    return v


def _check_level(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1; got {value!r}")
    return float(value)


def paired_sample_size(delta: float, sd: float, *, alpha: float = ALPHA, power: float = POWER) -> int:
    """Items needed to detect a mean paired difference ``delta`` with a two-sided test.

    The power of the paired t-test (the one-sample t-test of the differences, which the sign-flip
    test approaches as n grows) at effect size ``|delta| / sd``:
    ``statsmodels.stats.power.TTestPower().solve_power``, rounded up.

    Parameters
    ----------
    delta : float
        The difference to detect (its sign is ignored), != 0.
    sd : float
        SD of the per-item differences (e.g. a pilot's, ddof=1), > 0.
    alpha : float, optional
        Two-sided significance level. Default 0.05.
    power : float, optional
        Wanted power. Default 0.8.

    Returns
    -------
    int
        The smallest n >= 2 whose power is at least ``power``.

    Raises
    ------
    ValueError
        If ``delta == 0``, ``sd <= 0`` or alpha/power outside (0, 1).
    """
    size = _check_positive(
        abs(delta) if isinstance(delta, Real) and not isinstance(delta, bool) else delta, "|delta|"
    )
    effect = size / _check_positive(sd, "sd")
    alpha, power = _check_level(alpha, "alpha"), _check_level(power, "power")
    from statsmodels.stats.power import TTestPower  # imported at first use

    analysis = TTestPower()
    n = max(2, math.ceil(analysis.solve_power(effect_size=effect, alpha=alpha, power=power)))
    while n > 2 and analysis.power(effect_size=effect, nobs=n - 1, alpha=alpha) >= power:
        n -= 1  # solve_power is a root finder: make n the smallest that reaches the power
    while analysis.power(effect_size=effect, nobs=n, alpha=alpha) < power:
        n += 1
    return n


def detectable_difference(n: int, sd: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean paired difference that ``n`` items detect with the given power.

    The inverse of :func:`paired_sample_size`: the effect size solved by
    ``TTestPower().solve_power(nobs=n)`` times ``sd``.

    Raises
    ------
    ValueError
        If ``n < 2``, ``sd <= 0`` or alpha/power outside (0, 1).
    """
    n = _check_int(n, "n", minimum=2)
    sd = _check_positive(sd, "sd")
    alpha, power = _check_level(alpha, "alpha"), _check_level(power, "power")
    from statsmodels.stats.power import TTestPower

    effect = TTestPower().solve_power(nobs=n, alpha=alpha, power=power)
    return float(effect) * sd


def paired_summary(paired: Paired, metric: str, *, n_resamples: int, seed: int) -> dict[str, Any]:
    """One pair's row of a differences table: the paired difference with its CI, the sign-flip p
    and its method, and the number of items paired (Holm's adjustment is the table's)."""
    c = compare_paired(paired, metric, n_resamples=n_resamples, seed=seed)
    d = c.difference.as_dict()
    return {
        "difference": d["estimate"],
        "low": d["low"],
        "high": d["high"],
        "p": c.test.p,
        "test": c.test.method,
        "n_resamples": c.test.n_resamples,
        "n_paired": paired.n,
    }
