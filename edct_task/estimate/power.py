"""``edct estimate --detect DELTA``: how many items a paired claim "A differs from B by DELTA" needs.

The paired difference of two runs (``scoring.compare``) has the SD of its per-item differences;
from it, the items needed for 80 % power at α = 0.05 (two-sided) and the smallest difference the
current size detects with that power. The SD is a pilot's (two runs of one setup, ``--pilot``) or,
without one, :data:`~edct_task.scoring.compare.DEFAULT_PAIRED_SD` (binary CCS of two models that
disagree on a quarter of the items), stated as such in the output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from edct_task.scoring.compare import (
    ALPHA,
    DEFAULT_PAIRED_SD,
    POWER,
    detectable_difference,
    paired_sample_size,
)


@dataclass(frozen=True)
class PowerPlan:
    """Items needed to detect ``delta``, and what ``n_current`` items detect."""

    delta: float
    sd: float
    sd_source: str
    """Where the SD comes from: the pilot runs (metric, items) or the default."""
    alpha: float
    power: float
    n_needed: int
    n_current: int | None
    detectable: float | None
    """The smallest difference ``n_current`` items detect with ``power`` (None without a size)."""
    pilot_difference: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_power(
    delta: float,
    *,
    sd: float | None = None,
    sd_source: str | None = None,
    n_current: int | None = None,
    pilot_difference: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> PowerPlan:
    """The plan for ``delta`` with a pilot's ``sd`` (or the default) at ``n_current`` items."""
    use_sd = DEFAULT_PAIRED_SD if sd is None else sd
    source = sd_source or (
        f"default {DEFAULT_PAIRED_SD} (binary CCS, two models disagreeing on 25% of the items); "
        "pass --pilot RUN_A RUN_B for a measured one"
    )
    return PowerPlan(
        delta=abs(delta),
        sd=use_sd,
        sd_source=source,
        alpha=alpha,
        power=power,
        n_needed=paired_sample_size(delta, use_sd, alpha=alpha, power=power),
        n_current=n_current,
        detectable=None
        if n_current is None or n_current < 2
        else detectable_difference(n_current, use_sd, alpha=alpha, power=power),
        pilot_difference=pilot_difference,
    )


def render_power(plan: PowerPlan) -> str:
    """The text ``edct estimate --detect`` prints."""
    lines = [
        f"edct estimate --detect {plan.delta:g}: a paired difference of {plan.delta:g} at α = {plan.alpha:g} "
        f"(two-sided), {plan.power:.0%} power",
        f"  paired SD of the per-item differences: {plan.sd:.4f} ({plan.sd_source})",
    ]
    if plan.pilot_difference is not None:
        lines.append(f"  the pilot's own difference A − B: {plan.pilot_difference:+.4f}")
    lines += [
        "",
        f"items needed: {plan.n_needed} (the paired t-test's power, statsmodels TTestPower; "
        "the sign-flip test's power at this size is measured in benchmarks/compare_calibration.py)",
    ]
    if plan.detectable is not None:
        lines.append(f"detectable at the current {plan.n_current} items: {plan.detectable:.4f}")
    else:
        lines.append("detectable at the current size: give --n N (or --pilot, or --config) for a size")
    return "\n".join(lines)
