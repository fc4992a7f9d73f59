"""Paired comparisons of runs over the same items: differences, tests, ranks and sample sizes.

Every model in EDCT is tested on the same (image, question) items, so two runs are compared item
by item: the difference of their per-item scores over the items *both* runs scored. Pairing
removes the between-item variance that two unpaired intervals carry, so the same data separate
models whose unpaired intervals overlap (overlap of two 95 % intervals is neither a test nor a
rank interval).

Pure functions on numbers (plus :func:`pair_records`, which only reads records), behind our own
names and types; the arithmetic is the maintained libraries' where one exists (``statsmodels``
for Holm, ``scipy.optimize`` for the tilt of a pilot; the sign-flip test is a matrix product,
checked against ``scipy.stats.permutation_test``, which is ~100 times slower on it). Each
function validates its inputs first, answers the degenerate cases itself and returns a fixed type.
Random streams follow ``scoring.statistics``: an explicit ``seed`` of
``numpy.random.default_rng``.

- :func:`pair_records`: the items two runs both scored, and why the others were dropped;
- :func:`sign_flip_test`: the paired permutation p-value (exact or Monte Carlo, it says which)
  and the interval of the mean difference that inverts the same test, so the two never disagree;
- :func:`compare_paired`: both, overall and per domain;
- :func:`holm`: Holm's step-down adjustment of a family of p-values;
- :func:`rank_intervals` and :func:`tied_groups`: bootstrap rank intervals of k entries over
  their common items, and the entries whose ranks cannot be told apart;
- :func:`sign_flip_power`, :func:`paired_sample_size` and :func:`detectable_difference`: the
  power of that test, simulated from a pilot's per-item differences, and what it plans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from numbers import Real
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from edct_task.core.records import SampleRecord, SampleScores
from edct_task.scoring.metrics import PRIMARY, family, metric_row
from edct_task.scoring.statistics import (
    _MAX_BLOCK_ELEMENTS,
    Interval,
    _as_finite_1d,
    _check_confidence,
    _check_int,
)

__all__ = [
    "ALPHA",
    "DEFAULT_DIFFERENCES",
    "EXACT_MAX",
    "POWER",
    "Comparison",
    "Differences",
    "Paired",
    "RankIntervals",
    "SampleSize",
    "SignFlip",
    "compare_paired",
    "detectable_difference",
    "holm",
    "p_text",
    "pair_records",
    "paired_metrics",
    "paired_sample_size",
    "rank_intervals",
    "sign_flip_power",
    "sign_flip_test",
    "tied_groups",
]


def paired_metrics() -> tuple[str, ...]:
    """Per-item metrics a paired comparison can use: the metric table's scores (AC/EF are per chain
    position, not per item)."""
    return tuple(m.name for m in family("score"))


EXACT_MAX = 2**16
"""The sign-flip test is exact when its sign patterns, counted by group of equal differences, number
at most this (every n <= 16; more items when many differences are equal)."""

ALPHA = 0.05
POWER = 0.8

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


def metric_value(name: str, scores: SampleScores) -> float | int | None:
    """The value of metric ``name`` for one sample's scores (its row of the metric table)."""
    return metric_row(name).value(scores)


def _score(record: SampleRecord | None, metric: str) -> tuple[float | None, str]:
    if record is None:
        return None, ABSENT
    if record.status != "scored" or record.scores is None:
        return None, record.status
    value = metric_value(metric, record.scores)
    return (None, f"no {metric}") if value is None else (float(value), "")


def pair_records(
    records_a: Sequence[SampleRecord], records_b: Sequence[SampleRecord], metric: str = PRIMARY.name
) -> Paired:
    """The items (by sample id) both runs scored on ``metric``, and why the others were dropped.

    Raises
    ------
    ValueError
        If ``metric`` is not one of :func:`paired_metrics` or a run holds one id twice.
    """
    if metric not in paired_metrics():
        raise ValueError(f"metric must be one of {', '.join(paired_metrics())}; got {metric!r}")
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


@dataclass(frozen=True)
class SignFlip:
    """A two-sided paired sign-flip permutation test and the confidence interval it inverts to.

    The interval is every mean difference δ the same test does not reject at level
    ``1 - confidence`` (the test of "the differences are symmetric about δ", on the same sign
    patterns), so ``low <= 0 <= high`` exactly when ``p >= 1 - confidence``: the interval and
    the p-value never disagree."""

    p: float
    """The p-value of "mean difference = 0" (1.0 when every difference is zero or there are none)."""
    low: float
    """Lower bound of the interval: the smallest δ the test does not reject (NaN without items)."""
    high: float
    """Upper bound of the interval: the largest δ the test does not reject (NaN without items)."""
    method: str
    """``"exact"`` (all 2**n sign patterns of the n differences) or ``"monte-carlo"``."""
    n_nonzero: int
    """Items whose difference is not zero (zeros carry no sign at δ = 0)."""
    n_resamples: int
    """Sign patterns evaluated: the Monte Carlo draws, or when exact the distinct patterns, items of
    equal difference taken together (``Π (g_k + 1)``, standing for all 2**n)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "p": self.p,
            "low": _none_if_nan(self.low),
            "high": _none_if_nan(self.high),
            "method": self.method,
            "n_nonzero": self.n_nonzero,
            "n_resamples": self.n_resamples,
        }


SIGN_FLIP_METHOD = "sign-flip"
"""``Interval.method`` of a paired difference: the inverted sign-flip test."""

BOUNDS = (-1.0, 1.0)
"""Where a difference of two scores in [0, 1] lies: the interval never reaches past it."""

_TIE = 1e-9
"""Relative slack (of the bounds' width) within which a pattern's statistic counts as tied with the
observed one: sums equal up to rounding are ties, and ties count as extreme."""


def _group_patterns(
    values: NDArray[np.float64], counts: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Every sign pattern of items with these distinct ``values`` (``counts`` of each), by group.

    Items of equal value are interchangeable: a pattern matters only through how many of each
    group get +, j_k of g_k, which C(g_k, j_k) of the 2**g_k patterns of the group do. Returns
    ``(A, E, weight)`` per group pattern: ``A = Σ v_k (2 j_k - g_k)``, ``E = Σ (2 j_k - g_k)``
    and the number of sign patterns it stands for divided by 2**n (its probability; exact
    integers over a power of two up to n = 53 items)."""
    a = np.zeros(1)
    e = np.zeros(1)
    weight = np.ones(1)
    for v, g in zip(values, counts, strict=True):
        g = int(g)
        shift = 2.0 * np.arange(g + 1) - g
        ways = np.array([math.comb(g, j) for j in range(g + 1)], dtype=np.float64) / 2.0**g
        a = (a[:, None] + v * shift[None, :]).reshape(-1)
        e = (e[:, None] + shift[None, :]).reshape(-1)
        weight = (weight[:, None] * ways[None, :]).reshape(-1)
    return a, e, weight


def _random_patterns(
    d: NDArray[np.float64], n_resamples: int, seed: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(A, E)`` of ``n_resamples`` random sign patterns of ``d``.

    The signs are the bits of ``default_rng(seed).integers(0, 256, (rows, ceil(n / 8)), uint8)``
    (least significant first, 1 is +), in blocks of at most 2**22 items. With at most 64 distinct
    differences a pattern's sums are taken per group of equal ones (``Σ_k v_k (2 plus_k - g_k)``,
    the counts exact in float32), which is several times faster than the sum over items."""
    n = d.size
    values, inverse, counts = np.unique(d, return_inverse=True, return_counts=True)
    grouped = values.size <= 64
    if grouped:
        onehot = np.zeros((n, values.size), dtype=np.float32)
        onehot[np.arange(n), inverse.reshape(-1)] = 1.0
    rng = np.random.default_rng(seed)
    rows = max(1, _MAX_BLOCK_ELEMENTS // n)
    a, e = [], []
    done = 0
    while done < n_resamples:
        size = min(rows, n_resamples - done)
        raw = rng.integers(0, 256, (size, (n + 7) // 8), dtype=np.uint8)
        plus = np.unpackbits(raw, axis=1, count=n, bitorder="little")
        if grouped:
            shift = 2.0 * (plus.astype(np.float32) @ onehot).astype(np.float64) - counts
            a.append(shift @ values)
            e.append(shift.sum(axis=1))
        else:
            signs = 2.0 * plus - 1.0
            a.append(signs @ d)
            e.append(signs.sum(axis=1))
        done += size
    return np.concatenate(a), np.concatenate(e)


def _first_reaching(
    ends: NDArray[np.float64], weight: NDArray[np.float64], need: float, descending: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64], float | None]:
    """``(end, cumulative)``: pattern ends sorted (ascending, or descending), the running total of
    their weights; and the first end whose running total reaches ``need`` (or None)."""
    order = np.argsort(-ends if descending else ends, kind="stable")
    sorted_ends, running = ends[order], np.cumsum(weight[order])
    first = int(np.searchsorted(running, need, side="left"))
    return sorted_ends, running, (sorted_ends[first] if first < running.size else None)


def sign_flip_test(
    differences: ArrayLike,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    exact_max: int = EXACT_MAX,
    confidence: float = 0.95,
    bounds: tuple[float, float] = BOUNDS,
) -> SignFlip:
    """Two-sided paired permutation test (the differences' signs flipped at random) and its interval.

    Under the null hypothesis that A and B are exchangeable on every item, each difference is as
    likely to have either sign. The statistic is the sum T of the differences; the p-value is
    ``P(|T*| >= |T|)`` over sign patterns T* (zeros change nothing: their sign is irrelevant).
    The interval inverts the same test: δ is inside when the test of "the differences are
    symmetric about δ" (the signs of ``d - δ`` flipped by *the same patterns*) has
    ``p(δ) >= 1 - confidence``. Each pattern is at least as extreme as the data on an interval of
    δ around the mean difference, so the accepted δ form one interval, and ``0`` is inside it
    exactly when ``p >= 1 - confidence``.

    Parameters
    ----------
    differences : array_like of float, shape (n,)
        Per-item ``a - b`` (finite, within ``bounds``).
    n_resamples : int, optional
        Monte Carlo patterns when the test is not exact, >= 1. Default 10,000.
    seed : int, optional
        Seed of ``numpy.random.default_rng`` for the Monte Carlo patterns, >= 0.
    exact_max : int, optional
        The test is exact when the sign patterns, counted by group of equal differences
        (``Π (g_k + 1)``: items of equal value are interchangeable), number at most this; all
        2**n patterns are then accounted for. Otherwise it is Monte Carlo,
        ``p = (1 + #{|T*| >= |T|}) / (1 + n_resamples)``, never zero (Phipson & Smyth 2010).
        Default :data:`EXACT_MAX` (2**16: every n <= 16; 30 items that differ in 300).
    confidence : float, optional
        Level of the interval, in (0, 1). Default 0.95.
    bounds : tuple of float, optional
        Where the mean difference can lie (``low <= 0 <= high``); the interval is clipped to it
        (a difference of two scores in [0, 1] lies in [-1, 1], the default). With too few items to
        reject any δ the interval is the whole of ``bounds``.

    Returns
    -------
    SignFlip

    Raises
    ------
    ValueError
        If ``differences`` is not 1-D, holds NaN/inf or a value outside ``bounds``, or a
        parameter is out of range.

    Notes
    -----
    Pattern b (signs ε) gives ``A = Σ ε_i d_i`` and ``E = Σ ε_i``; at δ its statistic is
    ``A - δE`` against the observed ``n (mean - δ)``, and it is at least as extreme for δ
    between ``(A + T) / (n + E)`` and ``(T - A) / (n - E)`` (every δ when ``|E| = n``). These
    intervals all hold the mean, so ``p(δ)`` falls monotonically away from it on either side, and
    the interval's ends are weighted order statistics of the patterns' ends; the p-value is read
    from the same sorted ends, so the two agree in floating point too.
    ``scipy.stats.permutation_test(permutation_type="samples")`` on one sample is the same test
    at δ = 0 (its exact p-values are equal, which the tests check), about 100 times slower.
    """
    d = _as_finite_1d(differences, "differences")
    n_resamples = _check_int(n_resamples, "n_resamples", minimum=1)
    seed = _check_int(seed, "seed", minimum=0)
    exact_max = _check_int(exact_max, "exact_max", minimum=1)
    alpha = 1.0 - _check_confidence(confidence)
    lo_bound, hi_bound = (float(b) for b in bounds)
    if not lo_bound <= 0.0 <= hi_bound or lo_bound == hi_bound:
        raise ValueError(f"bounds must be (low, high) with low <= 0 <= high, low < high; got {bounds!r}")
    n = int(d.size)
    if n == 0:
        return SignFlip(1.0, math.nan, math.nan, "exact", 0, 1)
    if d.min() < lo_bound or d.max() > hi_bound:
        raise ValueError(f"differences must lie within bounds {bounds}; got {d.min()!r} … {d.max()!r}")
    values, counts = np.unique(d, return_counts=True)
    if math.prod(int(g) + 1 for g in counts) <= exact_max:
        a, e, weight = _group_patterns(values, counts)
        method, total = "exact", int(a.size)
        offset, scale = 0.0, 1.0  # p(δ) = P(pattern as extreme at δ)
    else:
        method, total = "monte-carlo", n_resamples
        a, e = _random_patterns(d, n_resamples, seed)
        weight = np.ones(a.size)
        offset, scale = 1.0, float(1 + n_resamples)  # p(δ) = (1 + #as extreme) / (1 + draws)
    t = float(d.sum())
    tie = _TIE * (hi_bound - lo_bound)
    every = np.abs(e) >= n  # all signs alike: as extreme as the data at every δ
    with np.errstate(divide="ignore", invalid="ignore"):
        r1, r2 = (a + t) / (n + e), (t - a) / (n - e)
    low_ends = np.where(every, -np.inf, np.minimum(r1, r2) - tie)
    high_ends = np.where(every, np.inf, np.maximum(r1, r2) + tie)
    need = alpha * scale - offset  # p(δ) >= alpha  ⇔  weight of the patterns extreme at δ >= need
    lows, low_run, low = _first_reaching(low_ends, weight, need, descending=False)
    highs, high_run, high = _first_reaching(high_ends, weight, need, descending=True)
    # Every pattern's range holds the mean: on its side of 0, p(0) is the running weight of the ends
    # that reach 0, read from the same sorted ends as the interval's bound on that side.
    if t >= 0.0:
        reach = int(np.searchsorted(lows, 0.0, side="right"))
        extreme = float(low_run[reach - 1]) if reach else 0.0
    else:
        reach = int(np.searchsorted(-highs, 0.0, side="right"))
        extreme = float(high_run[reach - 1]) if reach else 0.0
    p = min(1.0, (offset + extreme) / scale)
    if need <= 0.0:
        low, high = lo_bound, hi_bound
    low = lo_bound if low is None else max(float(low), lo_bound)
    high = hi_bound if high is None else min(float(high), hi_bound)
    return SignFlip(p, low, high, method, int(np.count_nonzero(d)), total)


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
    """Mean of A - B with the interval of :attr:`test` (``method`` ``"sign-flip"``)."""
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
    test = sign_flip_test(d, n_resamples=n_resamples, seed=seed, confidence=confidence)
    estimate = float(d.mean()) if d.size else math.nan
    return Comparison(
        metric=metric,
        difference=Interval(estimate, test.low, test.high, int(d.size), SIGN_FLIP_METHOD),
        test=test,
        mean_a=float(a.mean()) if a.size else math.nan,
        mean_b=float(b.mean()) if b.size else math.nan,
        sd=float(d.std(ddof=1)) if d.size > 1 else math.nan,
    )


def compare_paired(
    paired: Paired,
    metric: str = PRIMARY.name,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Difference A - B with the sign-flip p-value and the CI that inverts it, overall and per
    domain (the same seed each): the CI excludes 0 exactly when p < 1 - confidence."""
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
        empty: NDArray[np.float64] = p.copy()
        return empty
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
    ranks: NDArray[np.int64] = (1 + greater.sum(axis=-1)).astype(np.int64)
    return ranks


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


@dataclass(frozen=True)
class Differences:
    """A discrete distribution of per-item differences A - B: its values and their probabilities.

    What a power calculation draws items from: a pilot's paired differences
    (:meth:`from_sample`), or :data:`DEFAULT_DIFFERENCES`, tilted to the difference to detect
    (:meth:`tilted`)."""

    values: NDArray[np.float64]
    """The distinct differences, ascending."""
    weights: NDArray[np.float64]
    """Their probabilities (positive, summing to 1)."""

    @classmethod
    def from_sample(cls, differences: ArrayLike) -> Differences:
        """The empirical distribution of a pilot's per-item differences.

        Raises
        ------
        ValueError
            If there are none, or they are not 1-D and finite.
        """
        d = _as_finite_1d(differences, "differences")
        if d.size == 0:
            raise ValueError("a distribution of differences needs at least one item")
        values, counts = np.unique(d, return_counts=True)
        return cls(values, counts / counts.sum())

    @property
    def mean(self) -> float:
        return float(self.values @ self.weights)

    @property
    def sd(self) -> float:
        """Population SD of the distribution (``ddof=0``)."""
        variance = float((self.values - self.mean) ** 2 @ self.weights)
        return float(np.sqrt(max(0.0, variance)))

    def tilted(self, delta: float) -> Differences:
        """The same values reweighted to mean ``±delta``, in this distribution's own direction.

        The exponential tilt ``w_k ∝ p_k exp(λ v_k)`` with λ solved for the mean (the
        distribution closest to this one, in Kullback–Leibler divergence, with that mean): it keeps
        the values, so a discrete pilot stays discrete, and it is the identity when the mean is
        already ``±delta``. The direction is the sign of :attr:`mean` (+ when it is 0).

        Raises
        ------
        ValueError
            If ``delta <= 0`` or no reweighting of these values reaches ``±delta`` (every value
            on that side is smaller).
        """
        size = _check_positive(delta, "delta")
        target = size if self.mean >= 0.0 else -size
        if not self.values[0] < target < self.values[-1]:
            side = "above" if target > 0 else "below"
            raise ValueError(
                f"no mix of these differences ({self.values[0]:g} … {self.values[-1]:g}) has mean "
                f"{target:g}: it needs differences {side} it"
            )
        from scipy.optimize import brentq  # imported at first use

        log_w = np.log(self.weights)

        def mean_at(lam: float) -> float:
            z = log_w + lam * self.values
            w = np.exp(z - z.max())
            return float(self.values @ w / w.sum()) - target

        lo, hi = -1.0, 1.0
        while mean_at(lo) > 0.0:
            lo *= 2.0
        while mean_at(hi) < 0.0:
            hi *= 2.0
        lam = brentq(mean_at, lo, hi, xtol=1e-14, rtol=1e-14)
        z = log_w + lam * self.values
        w = np.exp(z - z.max())
        return Differences(self.values, w / w.sum())


DEFAULT_DIFFERENCES = Differences(np.array([-1.0, 0.0, 1.0]), np.array([0.125, 0.75, 0.125]))
"""Differences assumed without a pilot: binary CCS of two models that disagree on 25 % of the
items, half each way (values -1, 0, 1; SD 0.5)."""

POWER_SIMS = 2000
"""Simulated comparisons per power estimate (its Monte Carlo SE is about 0.9 % at 80 % power)."""


def sign_flip_power(
    distribution: Differences,
    n: int,
    *,
    alpha: float = ALPHA,
    sims: int = POWER_SIMS,
    seed: int = 0,
    n_resamples: int = 10_000,
    exact_max: int = EXACT_MAX,
) -> float:
    """The power of :func:`sign_flip_test` (``edct compare``'s test) at ``n`` items, simulated.

    ``sims`` comparisons of ``n`` items drawn from ``distribution``; each is tested as
    :func:`sign_flip_test` tests it (exact when its sign patterns counted by group number at most
    ``exact_max``, else ``n_resamples`` random sign patterns,
    ``p = (1 + #extreme) / (1 + n_resamples)``), and the power is the share with ``p < alpha``.
    The items of a simulated comparison are sorted by value (their order is arbitrary, so the
    test's outcome has the same distribution), which makes each random pattern's sum a difference
    of prefix sums of its signs: the cost is O(patterns · (n + sims · values)) instead of
    O(patterns · n · sims). The Monte Carlo patterns (``n_resamples`` of them, as the test
    draws) are one seeded draw per call, shared by the simulated comparisons (their luck adds
    about 0.5 % to the SE of a power near 80 %); each distinct vector of counts is tested once.

    Raises
    ------
    ValueError
        If ``n < 1``, ``sims < 1`` or ``alpha`` is outside (0, 1).
    """
    n = _check_int(n, "n", minimum=1)
    sims = _check_int(sims, "sims", minimum=1)
    seed = _check_int(seed, "seed", minimum=0)
    alpha = _check_level(alpha, "alpha")
    rng = np.random.default_rng(seed)
    order = np.argsort(distribution.values == 0.0, kind="stable")  # zeros last: they add nothing
    values, weights = distribution.values[order], distribution.weights[order]
    drawn = rng.multinomial(n, weights, size=sims)  # sims × K
    # The test's outcome depends on the counts alone (the patterns are one draw per call): test
    # each distinct count vector once.
    counts, inverse = np.unique(drawn, axis=0, return_inverse=True)
    observed = np.abs(counts @ values) - _TIE * (BOUNDS[1] - BOUNDS[0]) * n
    exact = np.log(counts + 1.0).sum(axis=1) <= math.log(exact_max) + 1e-12
    p = np.empty(len(counts))
    for i in np.flatnonzero(exact):
        used = (counts[i] > 0) & (values != 0.0)
        a, _, weight = _group_patterns(values[used], counts[i][used])
        p[i] = weight[np.abs(a) >= observed[i]].sum()
    random = np.flatnonzero(~exact)
    if random.size:
        # Items sorted by value: a pattern's sum is Σ_k v_k (P[e_k] - P[e_{k-1}]) over the prefix
        # sums P of its signs, = Σ_k P[e_k] (v_k - v_{k+1}) over the non-zero values k.
        nonzero = int(np.count_nonzero(values))
        ends = np.cumsum(counts[random], axis=1)[:, :nonzero]
        coef = (values[:nonzero] - np.append(values[1:nonzero], 0.0)).astype(np.float32)
        extreme = np.zeros(random.size, dtype=np.int64)
        pattern_rng = np.random.default_rng(int(rng.integers(2**63 - 1)))
        rows_per_block = max(1, _MAX_BLOCK_ELEMENTS // n)
        done = 0
        while done < n_resamples:
            size = min(rows_per_block, n_resamples - done)
            raw = pattern_rng.integers(0, 256, (size, (n + 7) // 8), dtype=np.uint8)
            prefix = np.zeros((size, n + 1), dtype=np.int16 if n < 2**15 else np.int32)
            np.cumsum(np.unpackbits(raw, axis=1, count=n).view(np.int8) * 2 - 1, axis=1, out=prefix[:, 1:])
            step = max(1, _MAX_BLOCK_ELEMENTS // size)
            for first in range(0, random.size, step):
                rows = slice(first, first + step)
                sums = np.zeros((size, len(ends[rows])), dtype=np.float32)
                for k in range(nonzero):
                    sums += prefix[:, ends[rows, k]] * coef[k]
                extreme[rows] += np.count_nonzero(np.abs(sums) >= observed[random][rows], axis=0)
            done += size
        p[random] = (1 + extreme) / (1 + n_resamples)
    p = p[inverse.reshape(-1)]
    return float(np.mean(p < alpha))


@dataclass(frozen=True)
class SampleSize:
    """Items a paired comparison needs, and the power :func:`sign_flip_power` gives it there."""

    n: int
    power: float
    """Simulated power of the sign-flip test at ``n`` items (at least the power asked for)."""


def paired_sample_size(
    distribution: Differences,
    delta: float,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    sims: int = POWER_SIMS,
    seed: int = 0,
    max_n: int = 100_000,
) -> SampleSize:
    """Items ``edct compare``'s sign-flip test needs to detect a mean difference ``delta``.

    The per-item differences are ``distribution`` tilted to mean ``±delta``
    (:meth:`Differences.tilted`: a pilot's own values, reweighted); the power at n items is
    :func:`sign_flip_power`. The search (``sims / 4`` comparisons per size, the same ``seed`` at
    every n) starts at the normal-theory size, brackets by factors of 1.25 and bisects to 1 % of
    n; the size found is then checked with ``sims`` fresh comparisons (``seed + 1``) and moved in
    steps of 2 % to the smallest whose power is at least ``power`` plus one Monte Carlo SE, so that
    the plan keeps its promise despite the noise of the estimates (taking the first n whose noisy
    estimate reaches ``power`` would, on average, fall short of it). The sign-flip test is discrete (with few
    non-zero differences it cannot reject at all), so its power is not always monotone in n; the
    n returned is one whose confirmed power reaches the target.

    Raises
    ------
    ValueError
        If ``delta <= 0``, the distribution cannot be tilted to it, alpha/power are outside
        (0, 1), or more than ``max_n`` items would be needed.
    """
    alpha, power = _check_level(alpha, "alpha"), _check_level(power, "power")
    sims = _check_int(sims, "sims", minimum=4)
    tilted = distribution.tilted(delta)
    normal = NormalDist()
    z = normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)
    start = max(2, math.ceil((z * tilted.sd / abs(delta)) ** 2))

    def reached(n: int) -> bool:
        return sign_flip_power(tilted, n, alpha=alpha, sims=sims // 4, seed=seed) >= power

    def too_many(n: int) -> None:
        if n > max_n:
            raise ValueError(f"more than {max_n} items would be needed to detect {delta:g}")

    lo, hi = start, start
    while not reached(hi):  # grow until the power is reached
        lo, hi = hi, math.ceil(hi * 1.25)
        too_many(hi)
    if lo == hi:  # reached at the start: shrink until it is not
        while lo > 1:
            lo = max(1, math.floor(lo / 1.25))
            if not reached(lo):
                break
            hi = lo
    while hi - lo > max(1, hi // 100):  # power(lo) < power <= power(hi), to 1 % of n
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    target = power + math.sqrt(power * (1 - power) / sims)

    def confirmed(n: int) -> float:
        return sign_flip_power(tilted, n, alpha=alpha, sims=sims, seed=seed + 1)

    n, got = hi, confirmed(hi)
    while got < target:  # short of the target: grow by 2 %
        n = max(n + 1, math.ceil(n * 1.02))
        too_many(n)
        got = confirmed(n)
    while n > 2:  # past it: shrink by 2 % while the target holds
        smaller = min(n - 1, math.floor(n / 1.02))
        if (at := confirmed(smaller)) < target:
            break
        n, got = smaller, at
    return SampleSize(n, got)


def detectable_difference(
    distribution: Differences,
    n: int,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    sims: int = POWER_SIMS,
    seed: int = 0,
) -> float | None:
    """The smallest mean difference ``n`` items detect with ``power`` by ``edct compare``'s test.

    Bisection (to 0.001) on the difference the distribution is tilted to: a difference is
    detected when :func:`sign_flip_power` reaches ``power`` plus one Monte Carlo SE (as
    :func:`paired_sample_size` confirms its sizes). None when even the largest reachable
    difference is not detected (too few items for the test to reject).

    Raises
    ------
    ValueError
        If ``n < 2`` or alpha/power are outside (0, 1).
    """
    n = _check_int(n, "n", minimum=2)
    alpha, power = _check_level(alpha, "alpha"), _check_level(power, "power")
    reach: float = distribution.values[-1] if distribution.mean >= 0 else -distribution.values[0]
    if reach <= 0:
        return None

    target = power + math.sqrt(power * (1 - power) / sims)

    def detected(delta: float) -> bool:
        return sign_flip_power(distribution.tilted(delta), n, alpha=alpha, sims=sims, seed=seed) >= target

    lo, hi = 0.0, reach * (1 - 1e-6)
    if not detected(hi):
        return None
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        if detected(mid):
            hi = mid
        else:
            lo = mid
    return hi


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
