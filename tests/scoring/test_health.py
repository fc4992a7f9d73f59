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
    unscored_by_metric,
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


OK_B = BinaryScore(
    raw="AC: 1 EF: 1", ac=1, ef=1, ac_reason="the answer follows the edit", ef_reason="cites the new light"
)
OK_G = GradedScore(raw="SCORE: 5", score=5, reason="names the green light")
NO_SIGNALS = {"without_reason": 0, "rubric_copied": 0, "contradicted": 0, "identical": False}


def _varied(i: int) -> tuple[BinaryScore, GradedScore]:
    """Verdicts with reasons of their own (sample i's), so that none is identical to another."""
    return (
        OK_B.model_copy(update={"ef_reason": f"cites the new light of scene {i}"}),
        OK_G.model_copy(update={"reason": f"names the green light of scene {i}"}),
    )


def test_reasons_are_classified_from_the_error_text():
    assert unscored_reason("unparseable judgement: truncated (finish_reason length)") == "truncated"
    assert unscored_reason("unparseable judgement: the judge refused") == "refused"
    assert unscored_reason("unparseable judgement: no verdict block") == "malformed"
    assert unscored_reason("rate_limited: 429 after 5 retries") == "transport"
    assert unscored_reason("timeout: read timed out") == "transport"


def test_rates_by_judge_kind_and_reason_and_a_warning_above_five_percent():
    bad_b = BinaryScore(raw="AC: 1 EF:", error="unparseable judgement: truncated")
    bad_g = GradedScore(error="timeout: read timed out")
    recs = [_record(i, [_step(*_varied(i))]) for i in range(18)]
    recs += [_record(18, [_step(bad_b, OK_G)]), _record(19, [_step(OK_B, bad_g)])]
    health = judge_health(recs)
    assert health == {
        "judge": {
            "binary": {
                "n": 20,
                "unscored": 1,
                "rate": 0.05,
                "by_reason": {"truncated": 1},
                "signals": NO_SIGNALS,
            },
            "graded": {
                "n": 20,
                "unscored": 1,
                "rate": 0.05,
                "by_reason": {"transport": 1},
                "signals": NO_SIGNALS,
            },
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
    assert health["judge1"]["binary"] == {
        "n": 1,
        "unscored": 1,
        "rate": 1.0,
        "by_reason": {"refused": 1},
        "signals": NO_SIGNALS,
    }


def test_a_kind_never_read_is_reported_and_one_read_kind_is_not():
    bad_b = BinaryScore(raw="hmm", error="unparseable judgement: no verdict")
    assert unreadable_kinds([_record(i, [_step(bad_b, OK_G)]) for i in range(3)]) == ["binary"]
    assert unreadable_kinds([_record(0, [_step(bad_b, OK_G)]), _record(1, [_step(OK_B, OK_G)])]) == []
    assert unreadable_kinds([]) == []


def test_a_sample_without_a_score_counts_for_that_metric_whatever_its_status():
    from edct_task.engine.protocol import score_sample

    bad_b = BinaryScore(raw="no idea", error="unparseable binary verdict")
    bad_g = GradedScore(raw="no idea", error="unparseable graded score")
    samples = {
        "all read": [_step(OK_B, OK_G), _step(OK_B, OK_G)],
        "step 2 binary unread": [_step(OK_B, OK_G), _step(bad_b, OK_G)],
        "step 1 graded unread": [_step(OK_B, bad_g), _step(OK_B, OK_G)],
    }
    records = []
    for i, (name, steps) in enumerate(samples.items()):
        scores = score_sample(steps)
        records.append(_record(i, steps).model_copy(update={"scores": scores}))
        if name != "all read":  # a score needs every step judged: the other steps' mean is not it
            assert (scores.ccs_binary is None) == (name == "step 2 binary unread")
            assert (scores.ccs_graded is None) == (name == "step 1 graded unread")
    error = SampleRecord(sample=records[0].sample, status="error", reason="x")
    excluded = SampleRecord(sample=records[0].sample, status="excluded", reason="edit failed")
    assert unscored_by_metric([*records, error, excluded]) == {"ccs_binary": 2, "ccs_graded": 2}
    # graded judging off: only the binary metric is asked for, and counted
    binary_only = [_record(0, [_step(OK_B)]).model_copy(update={"scores": score_sample([_step(OK_B)])})]
    assert unscored_by_metric(binary_only) == {"ccs_binary": 0}


def test_the_report_recomputes_judge_health_from_the_records(tmp_path):
    from support.edct_runs import write_edct_run

    from edct_task.reporting.report import build_report

    bad = BinaryScore(raw="AC: 1 EF", error="unparseable judgement: truncated")
    recs = [_record(i, [_step(bad if i < 2 else _varied(i)[0], _varied(i)[1])]) for i in range(10)]
    write_edct_run(tmp_path / "run", recs)
    report = build_report([tmp_path / "run"], tmp_path / "report")
    (run,) = report["models"][0]["runs"]
    assert run["judge_health"]["judge"]["binary"]["by_reason"] == {"truncated": 2}
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Judge health" in md and "| judge | binary | 10 | 2 (20.0%) (!) | truncated 2 | – |" in md


# ------------------------------------------------------------- issue 44: signals of a degenerate judge

BINARY_TEMPLATE_AC = "1 if the new answer is logically consistent with the edited scene, otherwise 0."
RUBRIC_4 = (
    "the answer is right and the explanation no longer cites the removed or altered feature, "
    "but it is generic."
)


def test_verdicts_without_reasons_identical_ones_copied_and_contradicted_are_counted():
    """SmolLM2's ``AC: 1 EF: 1 CCS: 1`` on every sample, without reasons: each verdict lacks its
    reasons and all are identical; a reason copied from the template and one that says the
    opposite of its score are counted too. Unscored judgements show no signal."""
    bare = BinaryScore(raw="AC: 1\nEF: 1\nCCS: 1", ac=1, ef=1)
    health = judge_health([_record(i, [_step(bare, OK_G)]) for i in range(6)])
    assert health["judge"]["binary"]["signals"] == {
        "without_reason": 6,
        "rubric_copied": 0,
        "contradicted": 0,
        "identical": True,
    }
    assert health["judge"]["graded"]["signals"]["identical"] is True  # the same reason six times
    warnings = health_warnings(health)
    assert any("6 of 6 binary verdicts read give no reason" in w for w in warnings)
    assert any("all 6 binary verdicts read are identical" in w for w in warnings)

    label_only = BinaryScore(raw="{}", ac=1, ef=1, ac_reason="AC", ef_reason="EF")
    copied = BinaryScore(raw="x", ac=1, ef=1, ac_reason=BINARY_TEMPLATE_AC, ef_reason="cites the new light")
    stale_but_one = BinaryScore(
        raw="x",
        ac=1,
        ef=1,
        ac_reason="the answer follows the edit",
        ef_reason="The explanation still relies on the pedestrian that the edit removed.",
    )
    graded_copy = GradedScore(raw="x", score=4, reason=RUBRIC_4)
    graded_contra = GradedScore(raw="x", score=5, reason="It still cites the red light the edit altered.")
    recs = [
        _record(0, [_step(label_only, graded_copy)]),
        _record(1, [_step(copied, graded_contra)]),
        _record(2, [_step(stale_but_one, OK_G)]),
        _record(3, [_step(BinaryScore(raw="AC: 1 EF", error="unparseable judgement: truncated"), OK_G)]),
    ]
    cells = judge_health(recs)["judge"]
    assert cells["binary"]["signals"] == {
        "without_reason": 1,
        "rubric_copied": 1,
        "contradicted": 1,
        "identical": False,
    }
    assert cells["graded"]["signals"] == {
        "without_reason": 0,
        "rubric_copied": 1,
        "contradicted": 1,
        "identical": False,
    }


def test_honest_reasons_show_no_signal():
    """Reasons in the judge's own words, a negated failure ("no drift", "no longer relies") and
    the calibration judge's reasons are no signal; fewer than five identical verdicts are none."""
    from edct_task.calibration.judge import assess

    good = [
        BinaryScore(
            raw="x",
            ac=1,
            ef=1,
            ac_reason="No drift: the answer changed because the light is now green.",
            ef_reason="The explanation no longer relies on the removed pedestrian.",
        ),
        BinaryScore(
            raw="x",
            ac=0,
            ef=0,
            ac_reason="The answer is inconsistent with the green light.",
            ef_reason="It still cites the red light, which the edit altered.",
        ),
    ]
    calibration = assess(
        "Which action should the ego vehicle take now: stop, slow down or go?",
        "Stop.",
        "1. The traffic light is red.\n2. The crosswalk is empty.",
        "1. Keep: x\nChange: recolour the traffic light from red to green\nHow: x\nConstraints: x",
        "Go.",
        "1. The traffic light is green.\n2. The crosswalk is empty.",
    )
    good.append(
        BinaryScore(
            raw="x",
            ac=calibration.ac,
            ef=calibration.ef,
            ac_reason=calibration.ac_reason,
            ef_reason=calibration.ef_reason,
        )
    )
    graded = GradedScore(
        raw="x", score=calibration.grade, reason=f"{calibration.ac_reason} {calibration.ef_reason}"
    )
    cells = judge_health([_record(i, [_step(b, graded)]) for i, b in enumerate(good)])["judge"]
    assert cells["binary"]["signals"] == NO_SIGNALS
    assert cells["graded"]["signals"] == NO_SIGNALS  # three identical verdicts: too few to tell
    assert health_warnings({"judge": cells}) == []


def test_a_panel_vote_is_judged_on_its_own_reasons():
    votes = (
        JudgeVote(member=0, binary=OK_B, graded=OK_G),
        JudgeVote(member=1, binary=BinaryScore(raw="AC: 1 EF: 1", ac=1, ef=1), graded=OK_G),
    )
    health = judge_health([_record(0, [_step(OK_B, OK_G, votes)])])
    assert health["judge0"]["binary"]["signals"]["without_reason"] == 0
    assert health["judge1"]["binary"]["signals"]["without_reason"] == 1


def test_the_report_and_the_run_log_carry_the_signals(tmp_path):
    from support.edct_runs import write_edct_run

    from edct_task.reporting.report import build_report

    bare = BinaryScore(raw="AC: 1\nEF: 1", ac=1, ef=1)
    recs = [_record(i, [_step(bare, _varied(i)[1])]) for i in range(6)]
    write_edct_run(tmp_path / "run", recs)
    import json

    log = json.loads((tmp_path / "run" / "results.json").read_text())
    assert log["judge_health"]["judge"]["binary"]["signals"]["without_reason"] == 6
    report = build_report([tmp_path / "run"], tmp_path / "report")
    (run,) = report["models"][0]["runs"]
    assert run["judge_health"]["judge"]["binary"]["signals"]["identical"] is True
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| judge | binary | 6 | 0 (0.0%) | – | no reason 6, all identical |" in md
