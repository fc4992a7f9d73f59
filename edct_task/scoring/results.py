"""The typed scores of a run: what ``scoring.metrics.summarise`` returns and ``results.json`` holds
as ``results`` (inspect_ai's ``EvalResults`` / ``EvalScore`` / ``EvalMetric`` shape).

:class:`Results` has the ``overall`` block and one per domain; a :class:`ScoreBlock` has each
metric's :class:`MetricValue` (keyed by the metric table's names, in table order) and the
:class:`Counts` of its samples. The JSON is the layout ``results.json`` has always had; the models
are strict (unknown keys, strings for numbers and booleans for counts are refused), so a claim
read from a bundle is either these types or refused by name (``run.checks.check_summary``).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from edct_task.scoring.statistics import Interval

STATUSES = ("scored", "excluded", "unscored", "error")
"""How a sample can end (``SampleRecord.status``), in the order the tables show them."""


class _Typed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class MetricValue(_Typed):
    """One metric over a block's samples: the estimate and its 95% CI (``EvalMetric``)."""

    estimate: float | None = Field(description="The point estimate; None when no sample counts (n = 0).")
    low: float | None = Field(None, description="Lower bound of the 95% CI; None when n = 0 or unknown.")
    high: float | None = Field(None, description="Upper bound of the 95% CI; None when n = 0 or unknown.")
    n: int | None = Field(
        None,
        ge=0,
        description="Samples (or trials) the interval rests on; None where it is not known (a value "
        "read from lmms-eval's results table without its logged samples, a mean over runs).",
    )
    method: str | None = Field(
        None, description="How the interval was computed (``statistics.Interval.method``); None without one."
    )

    @classmethod
    def of(cls, interval: Interval) -> MetricValue:
        """The JSON-ready value of ``interval`` (NaN bounds become None)."""

        def finite(x: float) -> float | None:
            return None if math.isnan(x) else x

        return cls(
            estimate=finite(interval.estimate),
            low=finite(interval.low),
            high=finite(interval.high),
            n=interval.n,
            method=interval.method,
        )


class Counts(_Typed):
    """How a block's samples ended, and how many have each score. A run's counts are all known;
    None is a count not known (lmms-eval's results table read without its logged samples has the
    four statuses only)."""

    total: int | None = Field(None, ge=0, description="Samples in the block.")
    scored: int | None = Field(None, ge=0, description="Samples with status scored.")
    excluded: int | None = Field(None, ge=0, description="Samples excluded (an edit failed verification).")
    unscored: int | None = Field(
        None, ge=0, description="Samples without a score (a judgement could not be read)."
    )
    error: int | None = Field(None, ge=0, description="Samples that ended in an error.")
    binary_scored: int | None = Field(None, ge=0, description="Samples with a CCS from the binary judge.")
    graded_scored: int | None = Field(None, ge=0, description="Samples with a CCS from the graded judge.")
    steps_unscored: int | None = Field(None, ge=0, description="Verified chain steps without a binary CCS_j.")

    def known(self) -> dict[str, int]:
        """The counts that are known, by name (in field order)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def of_status(self, status: str) -> int | None:
        """The count of samples that ended with ``status`` (scored, excluded, unscored, error)."""
        if status not in STATUSES:
            raise KeyError(f"no status {status!r}; a sample ends {', '.join(STATUSES)}")
        value = getattr(self, status)
        return None if value is None else int(value)


class ScoreBlock(_Typed):
    """The scores of one block of samples (overall, or one domain): ``EvalScore``."""

    metrics: dict[str, MetricValue] = Field(description="Metric name → value, in the metric table's order.")
    counts: Counts = Field(default_factory=Counts, description="How the block's samples ended.")

    def metric(self, name: str) -> MetricValue | None:
        """The value of metric ``name``; None when the block has no such metric (an older run)."""
        return self.metrics.get(name)

    def estimate(self, name: str) -> float | None:
        """The estimate of metric ``name``; None when absent or when no sample counts for it."""
        value = self.metrics.get(name)
        return None if value is None else value.estimate


class Results(_Typed):
    """A run's scores, overall and per domain: ``EvalResults``."""

    overall: ScoreBlock = Field(description="Every sample of the run.")
    per_domain: dict[str, ScoreBlock] = Field(
        default_factory=dict, description="Domain → the scores of its samples (sorted); none without records."
    )

    def blocks(self) -> list[tuple[str, ScoreBlock]]:
        """``("overall", …)`` then each domain's block, by domain name."""
        return [("overall", self.overall), *sorted(self.per_domain.items())]


def as_json(results: Results) -> dict[str, Any]:
    """``results`` as the JSON object ``results.json`` holds."""
    return results.model_dump(mode="json")
