"""The sans-IO protocol driven by hand: no backends, no driver, scripted replies."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.core.requests import AskLLM, AskTarget, EditedImage, EditImage, Failure, Request, VerifyEdit
from edct_task.engine.protocol import ProtocolConfig, render_edits, sample_protocol, why_prompt
from model_adapters.contracts import Completion
from verification.check import EditCheck, GateParams

SAMPLE = SampleInput(
    id="s1",
    domain="driving",
    question="What should the ego car do?",
    image="img-0",
    system_prompt="You drive the ego vehicle.",
)

INSTRUCTIONS = json.dumps(
    [
        {
            "concept": "red colour of the traffic light",
            "keep": "everything else",
            "change": "recolour the traffic light from red to green",
            "how": "same lighting",
            "constraints": "no new objects",
        },
        {
            "concept": "pedestrian on the crosswalk",
            "keep": "everything else",
            "change": "remove the pedestrian from the crosswalk",
            "how": "fill with road",
            "constraints": "no new objects",
        },
    ]
)

BINARY_OK = "AC_REASON: fine\nEF_REASON: fine\nFINAL SCORES\nAC: 1\nEF: 1\nCCS: 1"
BINARY_EF0 = "AC_REASON: fine\nEF_REASON: cites the red light\nFINAL SCORES\nAC: 1\nEF: 0\nCCS: 0"
GRADED_5 = "REASON: reflects the edit\nSCORE: 5"


def check(passed: bool) -> EditCheck:
    return EditCheck.model_validate(
        {
            "passed": passed,
            "verdict": "pass" if passed else "change_outside_target",
            "r_in": 0.8,
            "r_out": 0.01 if passed else 0.6,
            "tau_in": 0.1,
            "tau_out": 0.3,
            "edit_type": "MODIFY",
            "target": "traffic light",
            "searched": "original",
            "mask_fraction": 0.05,
            "n_boxes": 1,
            "alignment": None,
            "detail": "",
            "artefacts": {},
            "params": GateParams().model_dump(),
        }
    )


Responder = Callable[[Request], object]


def default_responder(
    overrides: dict[str, object] | None = None, verify: Callable[[VerifyEdit], bool] = lambda r: True
) -> Responder:
    overrides = overrides or {}

    def respond(req: Request) -> object:
        if isinstance(req, AskTarget):
            if req.purpose in overrides:
                return overrides[req.purpose]
            return {"answer": "Stop.", "why": "1. The traffic light is red.\n2. A pedestrian is crossing."}[
                req.purpose.split(".")[1]
            ]
        if isinstance(req, AskLLM):
            if req.purpose in overrides:
                return overrides[req.purpose]
            return {
                "concepts": '["red colour of the traffic light", "pedestrian on the crosswalk"]',
                "instructions": INSTRUCTIONS,
                "step2.edit_parse": '{"type": "REMOVE", "target": "pedestrian"}',  # edit 2's own object
            }.get(req.purpose) or {
                "edit_parse": '{"type": "MODIFY", "target": "traffic light"}',
                "judge_binary": BINARY_OK,
                "judge_graded": GRADED_5,
            }[req.purpose.split(".")[1]]
        if isinstance(req, EditImage):
            return EditedImage(f"img-{req.step}-{req.attempt}")
        assert isinstance(req, VerifyEdit)
        return check(verify(req))

    return respond


def as_reply(value: object) -> object:
    """Responders write model text as ``str``; the protocol is sent ``Completion``s."""
    return Completion(value) if isinstance(value, str) else value


def drive(cfg: ProtocolConfig, respond: Responder) -> tuple[SampleRecord, list[tuple[Request, ...]]]:
    gen = sample_protocol(SAMPLE, cfg)
    batches = []
    batch = next(gen)
    while True:
        batches.append(batch)
        try:
            batch = gen.send(tuple(as_reply(respond(r)) for r in batch))
        except StopIteration as stop:
            return stop.value, batches


def test_happy_path_records_every_stage_and_scores_one() -> None:
    record, batches = drive(ProtocolConfig(), default_responder())
    assert record.status == "scored"
    assert record.scores is not None
    assert record.scores.ccs_binary == 1.0 and record.scores.ccs_graded == 1.0
    assert record.scores.ac == (1, 1) and record.scores.ef == (1, 1)
    assert record.concepts.concepts == ("red colour of the traffic light", "pedestrian on the crosswalk")
    assert [s.image for s in record.steps] == ["img-1-0", "img-2-0"]
    # baseline: answer, then why in the SAME conversation
    why = batches[1][0]
    assert isinstance(why, AskTarget) and why.purpose == "baseline.why"
    assert [m.role for m in why.conversation] == ["system", "user", "assistant", "user"]
    assert why.conversation[2].text == "Stop." and why.conversation[3].text == why_prompt()
    # re-query after edit 1: a FRESH conversation on the edited image
    requery = next(r for b in batches for r in b if isinstance(r, AskTarget) and r.purpose == "step1.answer")
    assert [m.role for m in requery.conversation] == ["system", "user"]
    assert requery.conversation[1].images == ("img-1-0",)
    # edit 2 is applied to the verified output of edit 1 (a chain), and the judges of step 1
    # travel in the same batch as edit 2
    edit2_batch = next(b for b in batches if any(isinstance(r, EditImage) and r.step == 2 for r in b))
    edit2 = next(r for r in edit2_batch if isinstance(r, EditImage))
    assert edit2.image == "img-1-0"
    assert {r.purpose for r in edit2_batch if isinstance(r, AskLLM)} == {
        "step1.judge_binary",
        "step1.judge_graded",
        "step2.edit_parse",
    }
    # the judge of step 2 sees the cumulative edits 1..2
    judge2 = next(
        r for b in batches for r in b if isinstance(r, AskLLM) and r.purpose == "step2.judge_binary"
    )
    assert render_edits(record.instructions.instructions) in judge2.prompt
    graded = next(
        r for b in batches for r in b if isinstance(r, AskLLM) and r.purpose == "step2.judge_graded"
    )
    assert graded.max_new_tokens == 8192 and judge2.max_new_tokens == 4096


def test_failed_verification_is_retried_once_with_a_new_seed() -> None:
    respond = default_responder(verify=lambda r: not (r.step == 2 and r.attempt == 0))
    record, _ = drive(ProtocolConfig(), respond)
    step2 = record.steps[1]
    assert record.status == "scored" and step2.verified
    assert [a.attempt for a in step2.attempts] == [0, 1]
    assert step2.attempts[0].seed != step2.attempts[1].seed
    assert step2.attempts[0].failure == "verification: change_outside_target"
    assert step2.image == "img-2-1"


@pytest.mark.parametrize("policy", ["exclude_sample", "truncate_chain"])
def test_exclusion_policy_after_failed_retry(policy: str) -> None:
    respond = default_responder(verify=lambda r: r.step != 2)
    record, _ = drive(ProtocolConfig(exclusion_policy=policy), respond)
    assert len(record.steps[1].attempts) == 2 and not record.steps[1].verified
    if policy == "exclude_sample":
        assert record.status == "excluded" and record.scores is None
        assert "edit 2 failed verification after 2 attempt(s)" in record.reason
    else:
        assert record.status == "scored"
        assert record.scores.ccs_binary == 1.0 and record.scores.ac == (1,)


def test_first_edit_failing_excludes_under_both_policies() -> None:
    respond = default_responder(verify=lambda r: False)
    for policy in ("exclude_sample", "truncate_chain"):
        record, _ = drive(ProtocolConfig(exclusion_policy=policy), respond)
        assert record.status == "excluded"


def test_unparseable_judge_is_unscored_not_zero() -> None:
    respond = default_responder(
        {"step1.judge_binary": "I think it is fine overall.", "step2.judge_binary": BINARY_EF0}
    )
    record, _ = drive(ProtocolConfig(), respond)
    assert record.steps[0].binary.ac is None and "unparseable" in record.steps[0].binary.error
    assert record.steps[0].binary.raw == "I think it is fine overall."
    # CCS_binary needs every step judged: unscored (None), neither a fake 0 for step 1 nor step 2's
    # 0 alone; the graded scores of both steps were read, so the sample stays scored on CCS_graded
    assert record.status == "scored"
    assert record.scores.ccs_binary is None and record.scores.ccs_graded is not None
    assert record.scores.ac == (None, 1) and record.scores.ef == (None, 0)


def test_nothing_judgeable_makes_the_sample_unscored() -> None:
    garbage = {f"step{j}.judge_{kind}": "no idea" for j in (1, 2) for kind in ("binary", "graded")}
    record, _ = drive(ProtocolConfig(), default_responder(garbage))
    assert record.status == "unscored"
    assert record.scores.ccs_binary is None and record.scores.ccs_graded is None
    assert "no step could be judged" in record.reason


def test_target_failure_at_baseline_is_an_error_record() -> None:
    record, batches = drive(
        ProtocolConfig(), default_responder({"baseline.answer": Failure("timeout", "30 s")})
    )
    assert record.status == "error" and record.reason == "target failed at baseline: timeout: 30 s"
    assert len(batches) == 1


def test_k1_and_thinking_text_is_stripped() -> None:
    respond = default_responder({"baseline.answer": "<think>red means stop</think>Stop."})
    record, batches = drive(ProtocolConfig(k=1), respond)
    assert record.baseline.answer == "Stop."
    assert len(record.steps) == 1 and record.scores.ac == (1,)
    instr = next(r for b in batches for r in b if isinstance(r, AskLLM) and r.purpose == "instructions")
    assert "1. red colour of the traffic light" in instr.prompt
    assert "pedestrian" not in instr.prompt.split("<concepts>")[1].split("</concepts>")[0]


def test_unparseable_edit_parse_falls_back_to_rules() -> None:
    respond = default_responder({"step1.edit_parse": "Sure! Happy to help."})
    record, _ = drive(ProtocolConfig(), respond)
    target = record.steps[0].edit_target
    assert target.source == "rules" and target.edit_type == "MODIFY" and target.target == "traffic light"
    assert "unparseable" in target.note
    assert record.steps[1].edit_target.source == "llm"


def test_editor_refusal_then_success_on_retry() -> None:
    base = default_responder()

    def respond(req: Request) -> object:
        if isinstance(req, EditImage) and req.step == 1 and req.attempt == 0:
            return Failure("edit_refused", "moderated")
        return base(req)

    record, _ = drive(ProtocolConfig(), respond)
    assert record.steps[0].attempts[0].failure == "edit failed: edit_refused: moderated"
    assert record.steps[0].verified and record.status == "scored"


def test_unparseable_concepts_make_the_sample_unscored() -> None:
    record, _ = drive(ProtocolConfig(), default_responder({"concepts": "   "}))
    assert record.status == "unscored" and record.reason.startswith("concept extraction unparseable")


def test_a_protocol_bug_costs_one_sample_not_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from edct_task.engine import drive as driving
    from edct_task.engine import lockstep

    class Scripted:
        def resolve(self, requests):
            return [as_reply(default_responder()(r)) for r in requests]

    original = driving.sample_protocol

    def flaky(sample, cfg):
        if sample.id == "boom":
            raise_on = yield (AskTarget((), "baseline.answer"),)
            raise RuntimeError(f"unexpected reply {raise_on!r}")
        return (yield from original(sample, cfg))

    monkeypatch.setattr(driving, "sample_protocol", flaky)
    samples = [SAMPLE, SAMPLE.model_copy(update={"id": "boom"})]
    records = lockstep.run_lockstep(samples, ProtocolConfig(), Scripted())
    assert [r.status for r in records] == ["scored", "error"]
    assert records[1].reason.startswith("internal error: RuntimeError: unexpected reply")


def _panel_responder(ac_votes: dict[int, int], graded: dict[int, str]) -> Responder:
    base = default_responder()

    def respond(req: Request) -> object:
        if isinstance(req, AskLLM) and req.purpose.endswith("judge_binary"):
            ac = ac_votes[req.member]
            return f"AC_REASON: r\nEF_REASON: r\nFINAL SCORES\nAC: {ac}\nEF: 1\nCCS: {ac}"
        if isinstance(req, AskLLM) and req.purpose.endswith("judge_graded"):
            return graded[req.member]
        return base(req)

    return respond


def test_judge_panel_votes_by_majority_and_averages_graded_scores() -> None:
    respond = _panel_responder({0: 1, 1: 0, 2: 1}, {0: "SCORE: 5", 1: "SCORE: 2", 2: "no score at all"})
    record, batches = drive(ProtocolConfig(judges=3), respond)
    judge_reqs = [
        r for b in batches for r in b if isinstance(r, AskLLM) and r.purpose == "step1.judge_binary"
    ]
    assert sorted(r.member for r in judge_reqs) == [0, 1, 2]
    step = record.steps[0]
    assert (step.binary.ac, step.binary.ef) == (1, 1)  # AC votes 1, 0, 1
    assert step.graded.score == 3.5  # mean of 5 and 2; the unparseable third is unscored, not 0
    assert len(step.votes) == 3 and step.votes[2].graded.error.startswith("unparseable")
    assert "AC votes {'judge0': 1, 'judge1': 0, 'judge2': 1}" in step.binary.note
    assert record.scores.ccs_graded == pytest.approx(2.5 / 4)


def test_tied_panel_is_unscored_unless_told_to_break_ties() -> None:
    respond = _panel_responder({0: 1, 1: 0}, {0: "SCORE: 5", 1: "SCORE: 1"})
    record, _ = drive(ProtocolConfig(judges=2), respond)
    assert record.steps[0].binary.ac is None and "no majority" in record.steps[0].binary.error
    assert record.scores.ccs_binary is None and record.scores.ccs_graded == 0.5
    record, _ = drive(ProtocolConfig(judges=2, panel_tie="first"), respond)
    assert record.steps[0].binary.ac == 1


def test_self_consistency_samples_get_their_own_seeds() -> None:
    record, batches = drive(ProtocolConfig(judge_samples=3, judge_temperature=0.7), default_responder())
    reqs = [r for b in batches for r in b if isinstance(r, AskLLM) and r.purpose == "step2.judge_graded"]
    assert [(r.member, r.sample, r.temperature) for r in reqs] == [(0, 0, 0.7), (0, 1, 0.7), (0, 2, 0.7)]
    assert len(record.steps[1].votes) == 3 and record.steps[1].binary.ac == 1


def test_finish_reason_reaches_the_parsers_and_the_unscored_category_is_recorded() -> None:
    """A verdict the server cut at the token limit is truncated, however complete it looks; a
    failed call is transport; a refusal is refused (issue 18)."""
    respond = default_responder(
        {
            "step1.judge_binary": Completion(BINARY_OK, finish_reason="length"),
            "step1.judge_graded": Completion(GRADED_5, finish_reason="stop"),
            "step2.judge_binary": Failure("backend_error", "connection reset"),
            "step2.judge_graded": Completion("I'm sorry, but I can't rate this.", finish_reason="stop"),
        }
    )
    record, _ = drive(ProtocolConfig(), respond)
    first, second = record.steps
    assert first.binary.ac is None and first.binary.unscored == "truncated"
    assert "token limit" in first.binary.error and first.binary.raw == BINARY_OK
    assert first.graded.score == 5 and first.graded.unscored is None
    assert second.binary.unscored == "transport" and second.graded.unscored == "refused"
    # no binary verdict and step 2's graded score unread: neither score has every step judged
    assert (
        record.status == "unscored" and record.scores.ccs_graded is None and record.scores.ccs_binary is None
    )


def test_concepts_cut_at_the_token_limit_make_the_sample_unscored_as_truncated() -> None:
    cut = Completion(
        '["red colour of the traffic light", "pedestrian on the crosswalk"]', finish_reason="length"
    )
    record, _ = drive(ProtocolConfig(), default_responder({"concepts": cut}))
    assert record.status == "unscored" and record.concepts.unscored == "truncated"
    assert "token limit" in record.reason
