"""Benchmark-level statistics: the interval of a mean score, Wilson and bootstrap intervals, mean ± SD.

Pure functions on numbers, behind our own names and types: the arithmetic is the maintained
libraries' (``scipy.special.betaincinv`` for the Clopper–Pearson bounds of
:func:`mean_interval`, ``scipy.stats.bootstrap`` for the percentile bootstrap; the Wilson
interval is ``statsmodels.stats.proportion.proportion_confint``'s formula written out, held to it
by the tests, because importing statsmodels costs every run log about a second); what is ours is
the contract. Each function validates its inputs first, with a message that names the rule that
was broken, answers the degenerate cases the libraries refuse or warn about (no values, one
value, zero trials) itself, and returns a fixed type. Nothing here reads
or writes files, and nothing seeds a global random state: the bootstrap takes an explicit
``seed``.

``scipy`` is imported at first use, not with this module: ``scipy.stats`` takes about 0.5 s to
import, and the CLI and the lmms-eval task import this module at start-up.

:func:`mean_interval` is the interval of every CCS (a mean of per-sample scores in [0, 1]):
Clopper–Pearson at an *effective* number of trials (Korn & Graubard 1998), which is the
Clopper–Pearson interval itself when the scores are 0/1. It never has zero width on a finite
sample (an all-pass run of 10 gets [0.69, 1]) and its coverage was measured by simulation at
n = 10 … 300 against the percentile bootstrap, BCa, Student t and Wilson
(``benchmarks/ccs_interval_coverage.py``, ``docs/concepts/intervals.md``).

Unscored samples (unparseable judgements, failed calls) are left out by the caller *before* the
values reach these functions; a NaN here is therefore a bug upstream and is rejected, never
skipped silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BOOTSTRAP_METHOD",
    "MEAN_METHOD",
    "WILSON_METHOD",
    "Interval",
    "bootstrap_ci",
    "mean_interval",
    "mean_sd",
    "wilson_interval",
]

MEAN_METHOD = "clopper-pearson-effective-n"
"""``Interval.method`` of :func:`mean_interval`."""

BOOTSTRAP_METHOD = "bootstrap-percentile"
"""``Interval.method`` of :func:`bootstrap_ci`."""

WILSON_METHOD = "wilson"
"""``Interval.method`` of :func:`wilson_interval`."""

# Upper bound on the number of elements of one block of resampled indices (and of the gathered
# values): 2**22 elements is 32 MiB for int64 indices plus 32 MiB for float64 values.
_MAX_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval.

    When there is nothing to estimate (``n == 0``) ``estimate``, ``low`` and ``high`` are all
    NaN; :meth:`as_dict` writes them as ``None`` so that results stay strict JSON.
    """

    estimate: float
    """The point estimate: the sample mean, or the observed proportion (Wilson)."""
    low: float
    """Lower bound of the interval."""
    high: float
    """Upper bound of the interval."""
    n: int
    """Number of observations the interval rests on (samples of a mean, trials for Wilson)."""
    method: str
    """How the interval was computed: ``"clopper-pearson-effective-n"`` (:func:`mean_interval`),
    ``"bootstrap-percentile"`` or ``"wilson"``."""

    def as_dict(self) -> dict[str, Any]:
        """The interval as a JSON-ready dict; NaN bounds become ``None``."""
        return {
            "estimate": _none_if_nan(self.estimate),
            "low": _none_if_nan(self.low),
            "high": _none_if_nan(self.high),
            "n": self.n,
            "method": self.method,
        }


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else x


def _as_finite_1d(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Validate ``values`` as a 1-D array of finite real numbers and return it as float64."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one value per sample); got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must hold real numbers; got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must hold real numbers; got complex dtype {arr.dtype}")
    out = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(out)):
        bad = int(np.count_nonzero(~np.isfinite(out)))
        raise ValueError(
            f"{name} must be finite: found {bad} NaN/inf value(s); leave unscored samples out "
            "before computing statistics"
        )
    return out


def _check_confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, Real):
        raise TypeError(f"confidence must be a real number in (0, 1); got {confidence!r}")
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence!r}")
    return c


def _check_int(value: object, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer; got {value!r}")
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {v}")
    return v


def bootstrap_ci(
    values: ArrayLike,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap confidence interval of the mean.

    ``scipy.stats.bootstrap(method="percentile")`` of the mean: resamples the per-sample values
    with replacement ``n_resamples`` times, takes the mean of each resample, and returns the
    ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those means (linear
    interpolation). For means of values in [0, 1] (every CCS) use :func:`mean_interval`
    instead: the percentile bootstrap gives a constant sample (an all-pass run) a zero-width
    interval and covers 5–90 % near 0 and 1; this one is for values without known bounds (a
    fine-tuning loss, attention localization).

    Parameters
    ----------
    values : array_like of float, shape (n,)
        One finite value per sample; NaN or inf is an error.
    n_resamples : int, optional
        Number of bootstrap resamples, >= 1. Default 10,000 (ours; the paper gives no number).
    confidence : float, optional
        Confidence level in (0, 1). Default 0.95.
    seed : int, optional
        Seed of ``numpy.random.default_rng``, >= 0. The same values, ``n_resamples``,
        ``confidence`` and ``seed`` always give the same interval.

    Returns
    -------
    Interval
        ``estimate`` is the sample mean, ``method`` is ``"bootstrap-percentile"``.
        With ``n == 0`` estimate and bounds are NaN; with ``n == 1`` (or all values equal) the
        interval is degenerate: ``low == estimate == high``.

    Raises
    ------
    ValueError
        If ``values`` is not one-dimensional or holds NaN/inf, if ``n_resamples < 1``, if
        ``confidence`` is outside (0, 1) or ``seed < 0``.
    TypeError
        If ``values`` is not numeric or an argument has the wrong type.

    Notes
    -----
    The random stream is ``numpy.random.default_rng(seed).integers(0, n, (rows, n))`` per block
    of ``rows`` resamples, which is what scipy draws with ``rng=default_rng(seed)``; the
    intervals are the same as those of the hand-written resampler this replaced (to 1e-16), so
    results written before the switch keep their numbers. Resampling is done in blocks of at
    most 2**22 indices (scipy's ``batch``), so memory stays bounded (about 64 MiB) whatever
    ``n`` and ``n_resamples`` are; the block size depends only on ``n``. scipy refuses fewer
    than two observations; those cases, and constant data (whose interval is the value itself),
    are answered here without resampling.
    """
    arr = _as_finite_1d(values, "values")
    n_resamples = _check_int(n_resamples, "n_resamples", minimum=1)
    conf = _check_confidence(confidence)
    seed = _check_int(seed, "seed", minimum=0)

    n = int(arr.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, BOOTSTRAP_METHOD)
    estimate = float(arr.mean())
    if n == 1 or bool(np.all(arr == arr[0])):
        return Interval(estimate, estimate, estimate, n, BOOTSTRAP_METHOD)

    from scipy import stats  # imported at first use, see the module docstring

    result = stats.bootstrap(
        (arr,),
        np.mean,
        n_resamples=n_resamples,
        batch=max(1, _MAX_BLOCK_ELEMENTS // n),
        vectorized=True,
        confidence_level=conf,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval.low, result.confidence_interval.high
    return Interval(estimate, float(low), float(high), n, BOOTSTRAP_METHOD)


def mean_interval(values: ArrayLike, *, confidence: float = 0.95) -> Interval:
    """Confidence interval of the mean of values in [0, 1]: Clopper–Pearson at an effective n.

    The interval of every CCS (CCS_binary is a mean of 0/1 steps per sample, CCS_graded of
    (s − 1) / 4). With ``m`` the mean and ``v`` the variance (``ddof=0``) of the ``n`` values,
    the sample is read as ``m · n_eff`` successes in ``n_eff`` Bernoulli trials, where

    ``n_eff = n · m (1 − m) / v'``,  ``v' = (n v + z² m (1 − m)) / (n + z²)``

    and ``z`` is the normal quantile of ``confidence`` (1.96): the design-effect correction of
    Korn & Graubard (1998), with the variance shrunk towards its bound ``m (1 − m)`` by z²
    pseudo-observations, so that a sample whose values are all equal still has a finite n_eff.
    The bounds are the Clopper–Pearson (exact binomial) bounds at those (fractional) counts:
    ``Beta(x, n_eff − x + 1)`` and ``Beta(x + 1, n_eff − x)`` quantiles.

    - 0/1 values have ``v = m (1 − m)``: ``n_eff = n`` and the interval *is* Clopper–Pearson;
    - values strictly inside [0, 1] vary less than 0/1 values of the same mean, so
      ``n_eff >= n``: the interval is narrower than Clopper–Pearson on n trials;
    - all values 0 or all 1 (``m (1 − m) = 0``): ``n_eff = n``, e.g. [0.69, 1] for ten 1s;
    - the interval never has zero width for ``n >= 1``; it needs no resampling and no seed.

    Parameters
    ----------
    values : array_like of float, shape (n,)
        One finite value in [0, 1] per scored sample. Unscored samples must be left out by the
        caller; NaN or inf is an error.
    confidence : float, optional
        Confidence level in (0, 1). Default 0.95.

    Returns
    -------
    Interval
        ``estimate`` is the mean, ``method`` is ``"clopper-pearson-effective-n"``; with
        ``n == 0`` estimate and bounds are NaN.

    Raises
    ------
    ValueError
        If ``values`` is not one-dimensional, holds NaN/inf or a value outside [0, 1], or
        ``confidence`` is outside (0, 1).
    TypeError
        If ``values`` is not numeric or ``confidence`` is not a number.

    Notes
    -----
    Measured coverage of the 95 % interval (``benchmarks/ccs_interval_coverage.py``): at least
    94.5 % on every tested distribution of CCS_binary-, 0/1- and CCS_graded-like scores at
    n = 10, 30, 60 and 300, means 0.02 … 0.997, where the percentile bootstrap falls to 5 % on
    near-all-pass runs (it returns [1, 1] for ten 1s).
    """
    arr = _as_finite_1d(values, "values")
    conf = _check_confidence(confidence)
    n = int(arr.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, MEAN_METHOD)
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(
            f"values must lie in [0, 1] (per-sample scores); got min {arr.min()!r}, max {arr.max()!r}"
        )
    m = min(max(float(arr.mean()), 0.0), 1.0)
    bound = m * (1.0 - m)
    if bound <= 0.0:
        n_eff = float(n)
    else:
        z2 = NormalDist().inv_cdf(1.0 - (1.0 - conf) / 2.0) ** 2
        variance = min(float(np.mean((arr - m) ** 2)), bound)
        n_eff = n * bound * (n + z2) / (n * variance + z2 * bound)
    low, high = _clopper_pearson(m * n_eff, n_eff, conf)
    return Interval(float(arr.mean()), low, high, n, MEAN_METHOD)


def _clopper_pearson(x: float, n: float, confidence: float) -> tuple[float, float]:
    """Clopper–Pearson bounds of x successes in n trials, both possibly fractional (0 <= x <= n)."""
    from scipy.special import betaincinv  # imported at first use, see the module docstring

    tail = (1.0 - confidence) / 2.0
    low = 0.0 if x <= 0.0 else float(betaincinv(x, n - x + 1.0, tail))
    high = 1.0 if x >= n else float(betaincinv(x + 1.0, n - x, 1.0 - tail))
    return min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Wilson score interval of a binomial proportion (agreement rates, the paper's Table 4).

    Parameters
    ----------
    successes : int
        Number of successes (e.g. agreeing cases), ``0 <= successes <= n``.
    n : int
        Number of trials, >= 0.
    confidence : float, optional
        Confidence level in (0, 1). Default 0.95.

    Returns
    -------
    Interval
        ``estimate = successes / n``; the bounds of
        ``statsmodels.stats.proportion.proportion_confint(method="wilson")``, clipped to
        [0, 1]; ``method`` is ``"wilson"``. With ``n == 0`` (where statsmodels divides by zero
        with a ``RuntimeWarning``) estimate and bounds are NaN, without a warning.

    Raises
    ------
    TypeError
        If ``successes`` or ``n`` is not an integer (bool is refused).
    ValueError
        If ``n < 0``, ``successes`` is outside ``[0, n]`` or ``confidence`` is outside (0, 1).
    """
    successes = _check_int(successes, "successes", minimum=0)
    n = _check_int(n, "n", minimum=0)
    if successes > n:
        raise ValueError(f"successes must be <= n; got successes={successes}, n={n}")
    conf = _check_confidence(confidence)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, WILSON_METHOD)

    # statsmodels' proportion_confint(method="wilson") term for term (its import, ≈ 1 s with
    # pandas, would be paid by every run log for four lines; the tests hold it to statsmodels).
    p = successes / n
    z = NormalDist().inv_cdf(1.0 - (1.0 - conf) / 2.0)
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n**2)) / denominator
    low = min(max(centre - half, 0.0), 1.0)
    high = min(max(centre + half, 0.0), 1.0)
    return Interval(p, low, high, n, WILSON_METHOD)


def mean_sd(values: ArrayLike) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``), for stability over runs (mean ± SD).

    Parameters
    ----------
    values : array_like of float, shape (n_runs,)
        One finite value per run (e.g. the benchmark CCS of each of 5 runs).

    Returns
    -------
    tuple of (float, float)
        ``(mean, sd)``. With one value the SD is undefined and returned as NaN; with no
        values both are NaN.

    Raises
    ------
    ValueError
        If ``values`` is not one-dimensional or holds NaN/inf.
    TypeError
        If ``values`` is not numeric.
    """
    arr = _as_finite_1d(values, "values")
    if arr.size == 0:
        return (math.nan, math.nan)
    mean = float(arr.mean())
    if arr.size == 1:
        return (mean, math.nan)
    return (mean, float(arr.std(ddof=1)))
