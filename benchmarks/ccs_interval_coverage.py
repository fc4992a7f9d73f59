"""Coverage of the CCS interval, and of the candidates it was chosen from, by simulation.

    python benchmarks/ccs_interval_coverage.py [--sims 4000] [--boot-sims 1000] [--seed 1] [--json FILE]

A CCS is the mean over samples of a per-sample score in [0, 1]: CCS_binary is the mean of 0/1
steps (values 0, ½, 1 at k = 2; 0/1 at k = 1 or on a truncated chain), CCS_graded the mean of
(s − 1) / 4 (values on a grid of 1/8 at k = 2). For each true distribution below and each
n in 10, 30, 60, 300, ``--sims`` samples of n values are drawn and every candidate's 95 %
interval is computed; coverage is the share that holds the true mean, width the mean width,
"zero" the share of zero-width intervals. Truths are on the grid (0.5, 1.0) and off it (0.05,
0.55, 0.997, …), with near-degenerate ones (a run that nearly always passes).

Candidates:

- ``percentile``: the percentile bootstrap (what the CCS used before), 1,000 resamples;
- ``bca``: the BCa bootstrap, 1,000 resamples (a constant sample: zero width, as scipy);
- ``t``: Student's t interval, clipped to [0, 1];
- ``wilson-n``: Wilson on the mean as a proportion of n trials (the Bernoulli variance bound);
- ``wilson-neff``: Wilson at the effective n of ``mean_interval`` (Wilson where the values are 0/1);
- ``cp-neff-c1``: Clopper–Pearson at an effective n whose variance is shrunk by 1 pseudo-observation;
- ``mean_interval``: the chosen one, ``edct_task.scoring.statistics.mean_interval`` itself
  (Clopper–Pearson at the effective n, variance shrunk by z² pseudo-observations).

The bootstrap candidates draw resample *counts* of each value from a multinomial (the same
distribution as resampling the values, far faster), over ``--boot-sims`` of the samples.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from edct_task.scoring.statistics import mean_interval

NS = (10, 30, 60, 300)
Z = float(stats.norm.ppf(0.975))
THREE = np.array([0.0, 0.5, 1.0])
TWO = np.array([0.0, 1.0])


def _graded(a: float, b: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    j = np.arange(9)
    return j / 8, stats.betabinom.pmf(j, 8, a, b)


TRUTHS: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = {
    "binary 0.05 (0, ½, 1: .92 .06 .02)": (THREE, np.array([0.92, 0.06, 0.02])),
    "binary 0.30 (.55 .30 .15)": (THREE, np.array([0.55, 0.30, 0.15])),
    "binary 0.50 (.40 .20 .40)": (THREE, np.array([0.40, 0.20, 0.40])),
    "binary 0.50 (.02 .96 .02) near-constant": (THREE, np.array([0.02, 0.96, 0.02])),
    "binary 0.515 (0 .97 .03)": (THREE, np.array([0.0, 0.97, 0.03])),
    "binary 0.55 (0 .90 .10)": (THREE, np.array([0.0, 0.90, 0.10])),
    "binary 0.60 (0 .80 .20)": (THREE, np.array([0.0, 0.80, 0.20])),
    "binary 0.95 (.02 .06 .92)": (THREE, np.array([0.02, 0.06, 0.92])),
    "binary 0.99 (0 .02 .98)": (THREE, np.array([0.0, 0.02, 0.98])),
    "binary 0.997 (0 .006 .994)": (THREE, np.array([0.0, 0.006, 0.994])),
    "binary 1.0 (all pass)": (THREE, np.array([0.0, 0.0, 1.0])),
    "0/1 p = 0.01": (TWO, np.array([0.99, 0.01])),
    "0/1 p = 0.03": (TWO, np.array([0.97, 0.03])),
    "0/1 p = 0.10": (TWO, np.array([0.90, 0.10])),
    "0/1 p = 0.50": (TWO, np.array([0.50, 0.50])),
    "0/1 p = 0.90": (TWO, np.array([0.10, 0.90])),
    "0/1 p = 0.98": (TWO, np.array([0.02, 0.98])),
    "0/1 p = 0.995": (TWO, np.array([0.005, 0.995])),
    "graded 0.03 (BetaBin(8; .3, 9.7) / 8)": _graded(0.3, 9.7),
    "graded 0.50 (BetaBin(8; 2, 2) / 8)": _graded(2.0, 2.0),
    "graded 0.60 (BetaBin(8; 6, 4) / 8)": _graded(6.0, 4.0),
    "graded 0.97 (BetaBin(8; 9.7, .3) / 8)": _graded(9.7, 0.3),
    "graded 0.995 (BetaBin(8; 19.9, .1) / 8)": _graded(19.9, 0.1),
}


# ----------------------------------------------------------------------------- candidates


def _wilson(m: NDArray, n: NDArray | float) -> tuple[NDArray, NDArray]:
    z2 = Z * Z
    den = 1 + z2 / n
    centre = (m + z2 / (2 * n)) / den
    half = Z * np.sqrt(m * (1 - m) / n + z2 / (4 * n * n)) / den
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def _neff(x: NDArray, c: float) -> tuple[NDArray, NDArray]:
    n = x.shape[1]
    m = x.mean(axis=1)
    bound = m * (1 - m)
    v = np.minimum(x.var(axis=1), bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(bound > 0, n * bound * (n + c) / (n * v + c * bound), n)
    return m, n_eff


def _clopper_pearson(m: NDArray, n: NDArray) -> tuple[NDArray, NDArray]:
    x = m * n
    with np.errstate(all="ignore"):
        low = np.where(x > 0, special.betaincinv(x, n - x + 1, 0.025), 0.0)
        high = np.where(x < n, special.betaincinv(x + 1, n - x, 0.975), 1.0)
    return low, high


def wilson_n(x: NDArray, _v: NDArray) -> tuple[NDArray, NDArray]:
    return _wilson(x.mean(axis=1), x.shape[1])


def wilson_neff(x: NDArray, _v: NDArray) -> tuple[NDArray, NDArray]:
    return _wilson(*_neff(x, Z * Z))


def cp_neff_c1(x: NDArray, _v: NDArray) -> tuple[NDArray, NDArray]:
    return _clopper_pearson(*_neff(x, 1.0))


def student_t(x: NDArray, _v: NDArray) -> tuple[NDArray, NDArray]:
    n = x.shape[1]
    m = x.mean(axis=1)
    half = stats.t.ppf(0.975, n - 1) * x.std(axis=1, ddof=1) / np.sqrt(n)
    return np.clip(m - half, 0, 1), np.clip(m + half, 0, 1)


def chosen(x: NDArray, _v: NDArray) -> tuple[NDArray, NDArray]:
    out = np.array([[(iv := mean_interval(row)).low, iv.high] for row in x])
    return out[:, 0], out[:, 1]


def bootstrap(
    x: NDArray, values: NDArray, rng: np.random.Generator, *, resamples: int, bca: bool
) -> tuple[NDArray, NDArray]:
    """Percentile or BCa bootstrap of the mean of each row of ``x`` (values from ``values``)."""
    sims, n = x.shape
    counts = np.stack([(x == v).sum(axis=1) for v in values], axis=1)  # sims × K
    m = x.mean(axis=1)
    low, high = np.empty(sims), np.empty(sims)
    for start in range(0, sims, 100):
        rows = slice(start, min(sims, start + 100))
        draws = rng.multinomial(n, counts[rows] / n, size=(resamples, counts[rows].shape[0]))
        theta = np.sort((draws @ values) / n, axis=0)  # resamples × block
        if not bca:
            low[rows], high[rows] = np.percentile(theta, [2.5, 97.5], axis=0)
            continue
        mb = m[rows]
        share = ((theta < mb).sum(axis=0) + (theta <= mb).sum(axis=0)) / (2 * resamples)
        z0 = special.ndtri(share)
        jack = (mb[:, None] * n - values[None, :]) / (n - 1)  # leave one out of value k
        w = counts[rows]
        jbar = (w * jack).sum(axis=1, keepdims=True) / n
        num = (w * (jbar - jack) ** 3).sum(axis=1)
        den = 6 * (w * (jbar - jack) ** 2).sum(axis=1) ** 1.5
        with np.errstate(divide="ignore", invalid="ignore"):
            a = num / den
            za = special.ndtri(np.array([0.025, 0.975]))[:, None]
            levels = special.ndtr(z0 + (z0 + za) / (1 - a * (z0 + za)))
        for j, col in enumerate(range(rows.start, rows.stop)):
            if not np.all(np.isfinite(levels[:, j])):
                low[col] = high[col] = m[col]  # constant sample: scipy's degenerate interval
            else:
                low[col], high[col] = np.percentile(theta[:, j], 100 * levels[:, j])
    return low, high


CLOSED = {
    "t": student_t,
    "wilson-n": wilson_n,
    "wilson-neff": wilson_neff,
    "cp-neff-c1": cp_neff_c1,
    "mean_interval": chosen,
}
CANDIDATES = ("percentile", "bca", *CLOSED)


def measure(sims: int, boot_sims: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for truth, (values, p) in TRUTHS.items():
        mu = float(values @ p)
        for n in NS:
            x = values[rng.choice(values.size, size=(sims, n), p=p)]
            row: dict[str, Any] = {"truth": truth, "mean": mu, "n": n}
            for name in CANDIDATES:
                if name in CLOSED:
                    low, high = CLOSED[name](x, values)
                else:
                    low, high = bootstrap(x[:boot_sims], values, rng, resamples=1000, bca=name == "bca")
                hit = (low <= mu + 1e-12) & (mu - 1e-12 <= high)
                row[name] = {
                    "coverage": float(hit.mean()),
                    "width": float((high - low).mean()),
                    "zero": float((high - low <= 1e-12).mean()),
                    "sims": int(hit.size),
                }
            rows.append(row)
            print(f"  {truth}, n = {n}", file=sys.stderr, flush=True)
    return rows


def tables(rows: list[dict[str, Any]]) -> str:
    out = ["Lowest coverage over the true distributions, mean width, share of zero-width intervals:", ""]
    out.append("| candidate | " + " | ".join(f"n = {n}" for n in NS) + " | lowest anywhere | zero-width |")
    out.append("|---|" + "---|" * (len(NS) + 2))
    for name in CANDIDATES:
        cells = []
        for n in NS:
            at = [r for r in rows if r["n"] == n]
            worst = min(at, key=lambda r: r[name]["coverage"])
            width = np.mean([r[name]["width"] for r in at])
            cells.append(f"{worst[name]['coverage']:.1%} (width {width:.3f})")
        lowest = min(rows, key=lambda r: r[name]["coverage"])
        zero = max(r[name]["zero"] for r in rows)
        out.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {lowest[name]['coverage']:.1%} ({lowest['truth']}, n = {lowest['n']}) | up to {zero:.0%} |"
        )
    out += ["", "Coverage per true distribution (percentile bootstrap → mean_interval, its mean width):", ""]
    out.append("| true distribution | " + " | ".join(f"n = {n}" for n in NS) + " |")
    out.append("|---|" + "---|" * len(NS))
    for truth in TRUTHS:
        cells = []
        for n in NS:
            (r,) = [r for r in rows if r["truth"] == truth and r["n"] == n]
            old, new = r["percentile"], r["mean_interval"]
            cells.append(f"{old['coverage']:.1%} → **{new['coverage']:.1%}** ({new['width']:.3f})")
        out.append(f"| {truth} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=4000, help="samples per truth and n (closed forms)")
    parser.add_argument("--boot-sims", type=int, default=1000, help="of those, bootstrapped")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = measure(args.sims, args.boot_sims, args.seed)
    print(tables(rows))
    print(
        f"\n{args.sims} samples per cell ({args.boot_sims} bootstrapped), seed {args.seed}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
