"""Judge health: unscored judgements counted per judge and kind, by reason, from the records."""

from __future__ import annotations

from edct_task.core.records import (
    BinaryScore,
    ChainStep,
    EditInstruction,
    GradedScore,
    JudgeVote,
    SampleInput,
    SampleRecord,
)
from edct_task.scoring.health import (
    health_line,
    health_warnings,
    judge_health,
    unreadable_kinds,
    unscored_reason,
)

INSTRUCTION = EditInstruction(concept="c", keep="k", change="x", how="h", constraints="n")


def _record(i: int, steps: list[ChainStep]) -> SampleRecord:
    sample = SampleInput(id=f"s{i}", domain="d", question="q?", image="0" * 64)
    return SampleRecord(sample=sample, status="scored", steps=tuple(steps))


def _step(
    binary: BinaryScore, graded: GradedScore | None = None, votes: tuple[JudgeVote, ...] = ()
) -> ChainStep:
    return ChainStep(
        index=1, instruction=INSTRUCTION, verified=True, binary=binary, graded=graded, votes=votes
    )


OK_B, OK_G = BinaryScore(raw="AC: 1 EF: 1", ac=1, ef=1), GradedScore(raw="SCORE: 5", score=5)


def test_reasons_are_classified_from_the_error_text():
    assert unscored_reason("unparseable judgement: truncated (finish_reason length)") == "truncated"
    assert unscored_reason("unparseable judgement: the judge refused") == "refused"
    assert unscored_reason("unparseable judgement: no verdict block") == "malformed"
    assert unscored_reason("rate_limited: 429 after 5 retries") == "transport"
    assert unscored_reason("timeout: read timed out") == "transport"


def test_rates_by_judge_kind_and_reason_and_a_warning_above_five_percent():
    bad_b = BinaryScore(raw="AC: 1 EF:", error="unparseable judgement: truncated")
    bad_g = GradedScore(error="timeout: read timed out")
    recs = [_record(i, [_step(OK_B, OK_G)]) for i in range(18)]
    recs += [_record(18, [_step(bad_b, OK_G)]), _record(19, [_step(OK_B, bad_g)])]
    health = judge_health(recs)
    assert health == {
        "judge": {
            "binary": {"n": 20, "unscored": 1, "rate": 0.05, "by_reason": {"truncated": 1}},
            "graded": {"n": 20, "unscored": 1, "rate": 0.05, "by_reason": {"transport": 1}},
        }
    }
    assert health_warnings(health) == []  # 5% is not above 5%
    health = judge_health([*recs, _record(20, [_step(bad_b, OK_G)])])
    (warning,) = health_warnings(health)
    assert "judge: 2 of 21 binary judgements unscored (9.5%: truncated 2)" in warning
    assert health_line(health) == "judge health: judge: binary 2/21 unscored, graded 1/21 unscored"
    assert unreadable_kinds(recs) == []


def test_a_panel_is_counted_per_member():
    votes = (
        JudgeVote(member=0, binary=OK_B, graded=OK_G),
        JudgeVote(member=1, binary=BinaryScore(error="unparseable judgement: refused to judge"), graded=OK_G),
    )
    health = judge_health([_record(0, [_step(OK_B, OK_G, votes)])])
    assert health["judge0"]["binary"]["unscored"] == 0
    assert health["judge1"]["binary"] == {"n": 1, "unscored": 1, "rate": 1.0, "by_reason": {"refused": 1}}


def test_a_kind_never_read_is_reported_and_one_read_kind_is_not():
    bad_b = BinaryScore(raw="hmm", error="unparseable judgement: no verdict")
    assert unreadable_kinds([_record(i, [_step(bad_b, OK_G)]) for i in range(3)]) == ["binary"]
    assert unreadable_kinds([_record(0, [_step(bad_b, OK_G)]), _record(1, [_step(OK_B, OK_G)])]) == []
    assert unreadable_kinds([]) == []


def test_the_report_recomputes_judge_health_from_the_records(tmp_path):
    from support.edct_runs import write_edct_run

    from edct_task.reporting.report import build_report

    bad = BinaryScore(raw="AC: 1 EF", error="unparseable judgement: truncated")
    recs = [_record(i, [_step(bad if i < 2 else OK_B, OK_G)]) for i in range(10)]
    write_edct_run(tmp_path / "run", recs)
    report = build_report([tmp_path / "run"], tmp_path / "report")
    (run,) = report["models"][0]["runs"]
    assert run["judge_health"]["judge"]["binary"]["by_reason"] == {"truncated": 2}
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Judge health" in md and "| judge | binary | 10 | 2 (20.0%) (!) | truncated 2 |" in md
