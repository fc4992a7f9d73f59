"""The Inspect scorer's per-sample values: a sample that does not count for a metric is Inspect's
unscored sentinel (NaN), never 0; the status is one 0/1 count."""

from __future__ import annotations

import math

from support.edct_runs import excluded_record, ref, scored_record

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.inspect.scorer import COUNTS, explanation, quoted, score_value
from edct_task.scoring.metrics import metric_names


def sample(i: int) -> SampleInput:
    return SampleInput(id=f"s{i}", domain="okvqa", question="What sport?", image=ref(f"img{i}"))


def test_a_scored_sample_has_every_value_and_one_count() -> None:
    value = score_value(scored_record(sample(0), (1, 0), (1, 1), (5, 3)))
    assert value["ccs_binary"] == 0.5 and value["ac_k1"] == 1.0 and value["ac_k2"] == 0.0
    assert [value[c] for c in COUNTS] == [1.0, 0.0, 0.0, 0.0]  # n_scored, n_excluded, n_unscored, n_error


def test_samples_that_do_not_count_are_nan_not_zero() -> None:
    for record, status in (
        (excluded_record(sample(1)), "excluded"),
        (SampleRecord(sample=sample(2), status="unscored", reason="judge unreadable"), "unscored"),
        (SampleRecord(sample=sample(3), status="error", reason="target failed"), "error"),
    ):
        value = score_value(record)
        assert all(math.isnan(value[name]) for name in metric_names()), status
        assert value[f"n_{status}"] == 1.0 and sum(value[c] for c in COUNTS) == 1.0


def test_the_explanation_names_each_verdict_and_its_reason() -> None:
    record = scored_record(sample(4), (1, 0), (0, 1), (5, 2))
    text = explanation(record)
    for step in record.steps:
        assert f"### Edit {step.index}\n\n{quoted(step.instruction.as_text())}" in text
        b = step.binary
        assert f"**Judge** AC={b.ac}, EF={b.ef}\n\n{quoted(f'AC: {b.ac_reason}')}" in text
        assert f"\n\n{quoted(f'EF: {b.ef_reason}')}" in text
        assert f"**Graded judge** {step.graded.score}\n\n{quoted(step.graded.reason)}" in text


def test_model_text_is_fenced_and_never_markup() -> None:
    assert quoted("1. red light\n<img src=x>") == "```text\n1. red light\n<img src=x>\n```"
    # a reply holding a fence cannot close it: the fence is longer than any run of backticks
    assert quoted("a ```` b") == "`````text\na ```` b\n`````"
