"""Baseline answer accuracy on the calibration world: the "other benchmark" of ``edct demo``.

Every calibration sample knows its expected answer (``metadata.expected_answer``); the target's
baseline answer is read with the world's own answer parser. Accuracy says nothing about whether
the explanation is faithful, which is what Fig. 5 of the demo shows beside CCS.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edct_task.calibration.world import parse_answer
from edct_task.core.records import SampleRecord
from edct_task.reporting.benchmarks import BenchmarkScore

TASK = "calibration_answer_accuracy"
DISPLAY = "Calibration answer accuracy"


def answer_accuracy(records: Sequence[SampleRecord]) -> tuple[int, int]:
    """(correct, answered): baseline answers that state the expected label, over samples with one."""
    correct = answered = 0
    for r in records:
        expected = r.sample.metadata.get("expected_answer")
        if r.baseline is None or not expected:
            continue
        answered += 1
        correct += parse_answer(r.sample.domain, r.baseline.answer) == expected
    return correct, answered


def accuracy_score(records: Sequence[SampleRecord], source: Path) -> BenchmarkScore | None:
    correct, answered = answer_accuracy(records)
    if not answered:
        return None
    value = correct / answered
    return BenchmarkScore(
        task=TASK,
        display=DISPLAY,
        score=value,
        raw=value,
        scale=1.0,
        scale_known=True,
        metric="baseline answer == metadata.expected_answer (edct_task.calibration.world.parse_answer)",
        source=f"{source}: {correct}/{answered} baseline answers",
        judge=None,
    )
