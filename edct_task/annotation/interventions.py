"""Interventions of a run: one chain step of one sample, the unit people label (paper §4.4).

An intervention's id is ``<sample_id>#<step>`` with steps counted from 1. The interventions a
human can judge are the steps the target model was asked about again: a verified edit with a
re-query answer and explanation (without a re-query there is nothing to check AC/EF against).
``draw`` picks a seeded sample of them; the draw depends only on the run's interventions, ``n``
and ``seed``, never on the annotator, so two annotators given the same arguments label the same
interventions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from edct_task.core.records import ChainStep, SampleRecord

__all__ = [
    "EdctVerdict",
    "Intervention",
    "draw",
    "edct_verdicts",
    "intervention_id",
    "judgeable_interventions",
    "parse_intervention_id",
]


def intervention_id(sample_id: str, step: int) -> str:
    """``<sample_id>#<step>`` (step counted from 1)."""
    return f"{sample_id}#{step}"


def parse_intervention_id(text: str) -> tuple[str, int]:
    """``(sample_id, step)`` of an intervention id.

    Raises
    ------
    ValueError
        If ``text`` is not ``<sample_id>#<step>`` with a step ≥ 1.
    """
    sample_id, sep, step = str(text).rpartition("#")
    if not sep or not sample_id or not step.isdigit() or int(step) < 1:
        raise ValueError(f"{text!r} is not an intervention id '<sample_id>#<step>' (step counted from 1)")
    return sample_id, int(step)


@dataclass(frozen=True)
class Intervention:
    """One chain step of one sample, with what an annotator is shown about it."""

    id: str
    record: SampleRecord
    step: ChainStep

    @property
    def before_image(self) -> str:
        """Image-store ref of the image edit j was applied to (the original for j = 1)."""
        previous = [s for s in self.record.steps if s.index == self.step.index - 1]
        if previous and previous[0].image:
            return previous[0].image
        return self.record.sample.image

    @property
    def after_image(self) -> str:
        """Image-store ref of the verified edited image of step j."""
        assert self.step.image is not None
        return self.step.image


def judgeable_interventions(records: Iterable[SampleRecord]) -> list[Intervention]:
    """Every step with a verified edit and a re-query, in the run's order of samples and steps."""
    out: list[Intervention] = []
    seen: set[str] = set()
    for record in records:
        for step in record.steps:
            if not (step.verified and step.image and step.requery is not None):
                continue
            iid = intervention_id(record.sample.id, step.index)
            if iid in seen:
                raise ValueError(f"intervention {iid!r} appears twice in the run (duplicate sample id)")
            seen.add(iid)
            out.append(Intervention(iid, record, step))
    return out


def draw(population: Sequence[Intervention], n: int, seed: int) -> list[Intervention]:
    """A seeded sample of ``n`` interventions (all of them, shuffled, when there are fewer).

    The population is sorted by id first, so the draw does not depend on the order of the
    run's records.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    ordered = sorted(population, key=lambda i: i.id)
    rng = random.Random(seed)
    return rng.sample(ordered, min(n, len(ordered)))


@dataclass(frozen=True)
class EdctVerdict:
    """What EDCT itself decided about one intervention (hidden from annotators)."""

    ccs: int | None
    """CCS_j = AC_j · EF_j of the judge (or panel); None when unscored."""
    ac: int | None
    ef: int | None
    gate: int | None
    """1 when the edit passed verification, 0 when every attempt failed it, None when no attempt
    was checked (editor failures)."""


def edct_verdicts(records: Iterable[SampleRecord]) -> dict[str, EdctVerdict]:
    """EDCT's verdicts for every step of every sample that has one, by intervention id."""
    out: dict[str, EdctVerdict] = {}
    for record in records:
        for step in record.steps:
            checked = [a for a in step.attempts if a.check is not None]
            gate = 1 if step.verified else (0 if checked else None)
            b = step.binary
            out[intervention_id(record.sample.id, step.index)] = EdctVerdict(
                ccs=None if b is None else b.ccs,
                ac=None if b is None else b.ac,
                ef=None if b is None else b.ef,
                gate=gate,
            )
    return out
