"""``edct estimate --detect DELTA``: how many items a paired claim "A differs from B by DELTA" needs.

The plan is for the test ``edct compare`` runs: the paired sign-flip test (``scoring.compare``),
whose power at n items is simulated (``sign_flip_power``) from the per-item differences of a pilot
(two runs of one setup, ``--pilot``) reweighted to a mean of DELTA, or, without one, from
:data:`~edct_task.scoring.compare.DEFAULT_DIFFERENCES` (binary CCS of two models that disagree on
a quarter of the items), stated as such in the output. It gives the items needed for 80 % power at
α = 0.05 (two-sided) and the smallest difference the current size detects with that power.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from edct_task.scoring.compare import (
    ALPHA,
    DEFAULT_DIFFERENCES,
    POWER,
    POWER_SIMS,
    Differences,
    detectable_difference,
    paired_sample_size,
)

TEST = "paired sign-flip test (edct compare)"


@dataclass(frozen=True)
class PowerPlan:
    """Items needed to detect ``delta``, and what ``n_current`` items detect."""

    delta: float
    sd: float
    """SD (ddof=1 for a pilot) of the per-item differences planned from."""
    sd_source: str
    """Where the differences come from: the pilot runs (metric, items) or the default."""
    alpha: float
    power: float
    n_needed: int
    power_at_n_needed: float
    """The test's simulated power at ``n_needed`` items (at least ``power``)."""
    n_current: int | None
    detectable: float | None
    """The smallest difference ``n_current`` items detect with ``power`` (None without a size, or
    when no difference the differences can reach is detected at that size)."""
    pilot_difference: float | None = None
    test: str = TEST
    sims: int = POWER_SIMS
    """Simulated comparisons behind each power estimate."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_power(
    delta: float,
    *,
    differences: ArrayLike | None = None,
    sd_source: str | None = None,
    n_current: int | None = None,
    pilot_difference: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> PowerPlan:
    """The plan for ``delta`` from a pilot's per-item ``differences`` (or the default) at
    ``n_current`` items.

    Raises
    ------
    ValueError
        If the differences cannot be reweighted to a mean of ``±delta`` (see
        ``Differences.tilted``) or the size needed is beyond ``paired_sample_size``'s limit.
    """
    if differences is None:
        distribution, sd = DEFAULT_DIFFERENCES, DEFAULT_DIFFERENCES.sd
        source = sd_source or (
            f"default {sd:g}: binary CCS, two models disagreeing on 25% of the items; "
            "pass --pilot RUN_A RUN_B for measured differences"
        )
    else:
        d = np.asarray(differences, dtype=np.float64)
        distribution, sd = Differences.from_sample(d), float(d.std(ddof=1)) if d.size > 1 else 0.0
        source = sd_source or f"{d.size} paired differences"
    size = paired_sample_size(distribution, abs(delta), alpha=alpha, power=power)
    return PowerPlan(
        delta=abs(delta),
        sd=sd,
        sd_source=source,
        alpha=alpha,
        power=power,
        n_needed=size.n,
        power_at_n_needed=size.power,
        n_current=n_current,
        detectable=None
        if n_current is None or n_current < 2
        else detectable_difference(distribution, n_current, alpha=alpha, power=power),
        pilot_difference=pilot_difference,
    )


def render_power(plan: PowerPlan) -> str:
    """The text ``edct estimate --detect`` prints."""
    lines = [
        f"edct estimate --detect {plan.delta:g}: a paired difference of {plan.delta:g} at α = {plan.alpha:g} "
        f"(two-sided), {plan.power:.0%} power",
        f"  per-item differences A − B: SD {plan.sd:.4f} ({plan.sd_source})",
    ]
    if plan.pilot_difference is not None:
        lines.append(f"  the pilot's own difference A − B: {plan.pilot_difference:+.4f}")
    lines += [
        "",
        f"items needed: {plan.n_needed} (the {plan.test}: its power there is {plan.power_at_n_needed:.1%}, "
        f"simulated from {plan.sims} comparisons of items drawn from those differences, reweighted to a "
        f"mean of {plan.delta:g})",
    ]
    if plan.n_current is None:
        lines.append("detectable at the current size: give --n N (or --pilot, or --config) for a size")
    elif plan.detectable is None:
        lines.append(
            f"detectable at the current {plan.n_current} items: none (too few for the test to reject)"
        )
    else:
        lines.append(f"detectable at the current {plan.n_current} items: {plan.detectable:.3f}")
    return "\n".join(lines)
