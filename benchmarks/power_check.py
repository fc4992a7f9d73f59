"""``edct estimate --detect`` against realised power: the size it plans, and how often ``edct
compare``'s test then finds the difference.

    python benchmarks/power_check.py [--sims 2000] [--mc-sims 500] [--seed 0] [--json FILE]

Each scenario is a distribution of per-item differences A − B with mean DELTA, the population a
pilot would be drawn from. For each, two plans:

- **before** (the plan up to issue 44): the paired t-test's 80 % size at effect size
  DELTA / SD (statsmodels ``TTestPower``);
- **now**: ``paired_sample_size`` (what ``edct estimate --detect`` prints): the simulated power of
  the sign-flip test, confirmed with one Monte Carlo SE to spare.

The **realised** power at each size is the share of ``--sims`` simulated comparisons (items drawn
from the scenario, in random order) that ``scoring.compare.sign_flip_test`` — the test ``edct
compare`` runs, with its defaults — calls significant at 0.05 (``--mc-sims`` of them where the test
is Monte Carlo, which is slower). Scenarios: the calibration world's nested pairs (``mixed:p`` vs
``mixed:q`` of the reference target: differences 0 or ±1), two independent models (−1, 0, +1),
CCS_binary differences in steps of ½, and CCS_graded-like ones in steps of ⅛.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from compare_calibration import t_test_size  # the plan before issue 44, one copy (benchmarks/)
from scipy import stats

from edct_task.scoring.compare import ALPHA, Differences, paired_sample_size, sign_flip_test


def _graded(mean: float) -> Differences:
    """Differences of two CCS_graded-like scores in steps of 1/8, centred on ``mean``."""
    k = np.arange(-8, 9)
    weights = stats.norm.pdf(k / 8, loc=mean, scale=0.3)
    values = k / 8.0
    return Differences(values, weights / weights.sum()).tilted(mean)


SCENARIOS: dict[str, Differences] = {
    "nested pair, 20 % of items differ (δ 0.2)": Differences(np.array([0.0, 1.0]), np.array([0.8, 0.2])),
    "nested pair, 10 % of items differ (δ 0.1)": Differences(np.array([0.0, 1.0]), np.array([0.9, 0.1])),
    "independent models 0.7 vs 0.5 (δ 0.2)": Differences(
        np.array([-1.0, 0.0, 1.0]), np.array([0.5 * 0.3, 1 - 0.15 - 0.35, 0.7 * 0.5])
    ),
    "independent models 0.6 vs 0.5 (δ 0.1)": Differences(
        np.array([-1.0, 0.0, 1.0]), np.array([0.5 * 0.4, 1 - 0.2 - 0.3, 0.6 * 0.5])
    ),
    "CCS_binary steps of ½ (δ 0.075)": Differences(
        np.array([-1.0, -0.5, 0.0, 0.5, 1.0]), np.array([0.05, 0.1, 0.6, 0.15, 0.1])
    ),
    "CCS_graded steps of ⅛ (δ 0.1)": _graded(0.1),
}


def exact_power(dist: Differences, n: int) -> float | None:
    """The test's power computed, not simulated, where the differences take one non-zero value v:
    with m items at v the sign-flip p is 2 / 2**m (exact while the test is: m + 1 patterns by group
    times n - m + 1), so the power is P(Binomial(n, P(v)) = m with 2**(1 - m) < 0.05)."""
    nonzero = dist.values != 0
    if np.count_nonzero(nonzero) != 1:
        return None
    q = float(dist.weights[nonzero][0])
    m = np.arange(n + 1)
    exact = (m + 1) * (n - m + 1) <= 2**16
    if not exact.all():
        return None
    return float(stats.binom.pmf(m, n, q)[2.0 ** (1 - m) < ALPHA].sum())


def realised(dist: Differences, n: int, sims: int, seed: int) -> tuple[float, str]:
    rng = np.random.default_rng(seed)
    draws = rng.choice(dist.values, p=dist.weights, size=(sims, n))
    tests = [sign_flip_test(d) for d in draws]
    methods = sorted({t.method for t in tests})
    return float(np.mean([t.p < ALPHA for t in tests])), "/".join(methods)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000, help="comparisons per realised power (exact test)")
    parser.add_argument("--mc-sims", type=int, default=500, help="… where the test is Monte Carlo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for name, dist in SCENARIOS.items():
        delta = abs(dist.mean)
        plan = paired_sample_size(dist, delta)
        sd = dist.sd
        plans = (("before: paired t-test", t_test_size(delta, sd), None), ("now", plan.n, plan.power))
        for planner, n, estimate in plans:
            one = np.random.default_rng(args.seed + 1).choice(dist.values, p=dist.weights, size=n)
            sims = args.sims if sign_flip_test(one).method == "exact" else args.mc_sims
            got, methods = realised(dist, n, sims, args.seed + 2)
            se = math.sqrt(got * (1 - got) / sims)
            rows.append(
                {
                    "exact": exact_power(dist, n),
                    "scenario": name,
                    "delta": delta,
                    "sd": sd,
                    "planner": planner,
                    "n": n,
                    "promised": 0.8,
                    "planner_estimate": estimate,
                    "realised": got,
                    "se": se,
                    "sims": sims,
                    "test": methods,
                }
            )
            print(f"  {name}, {planner}: n = {n}, realised {got:.1%}", file=sys.stderr, flush=True)
    print("| scenario | SD | plan | n | promised (plan's own estimate) | realised (± SE) | exact | test |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        own = f" ({r['planner_estimate']:.1%})" if r["planner_estimate"] is not None else ""
        exact = f"{r['exact']:.1%}" if r["exact"] is not None else "–"
        print(
            f"| {r['scenario']} | {r['sd']:.3f} | {r['planner']} | {r['n']} | {r['promised']:.0%}{own} | "
            f"**{r['realised']:.1%}** (± {r['se']:.1%}, {r['sims']} comparisons) | {exact} | {r['test']} |"
        )
    print(f"\n{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
