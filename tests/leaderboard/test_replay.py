"""Re-derivation is a replay of the protocol on a record's own evidence (``leaderboard.rederive``).

Records here are made by the protocol itself (``SampleRun`` driven by scripted replies), written
as an ``edct run`` folder, submitted and verified: what the protocol writes verifies whatever its
rules are (a record whose concepts were read but not evidence, a protocol whose scoring changed),
and a record edited anywhere below its numbers is rejected at its first difference.
"""

from __future__ import annotations

import json

import pytest
from support.edct_runs import CHAIN, GATE, ref, write_edct_run

from edct_task.cli.main import main
from edct_task.core.records import SampleInput, SampleRecord, SampleScores
from edct_task.core.requests import AskLLM, AskTarget, EditedImage, EditImage, VerifyEdit
from edct_task.engine import protocol
from edct_task.engine.drive import SampleRun
from edct_task.leaderboard.verify import Verified, verify_bundle
from model_adapters.contracts import Completion
from verification.records import EditCheck

TARGET = {"backend": "openai-chat", "model": "org/replayed-vl"}


def _reply(request: object, concepts: str, ef2: int) -> object:
    """What a working set of backends answers, scripted: two verified edits, judged AC = EF = 1
    (EF = ``ef2`` at the second)."""
    if isinstance(request, AskTarget):
        return Completion("yes" if request.purpose.endswith("answer") else "cue 1 and cue 2")
    if isinstance(request, EditImage):
        return EditedImage(image=ref(f"{request.image}-{request.step}-{request.attempt}"))
    if isinstance(request, VerifyEdit):
        return EditCheck(
            passed=True,
            verdict="pass",
            r_in=0.62,
            r_out=0.03,
            tau_in=GATE.tau_in,
            tau_out=GATE.tau_out,
            edit_type=request.edit_type,
            target=request.target,
            searched="original",
            params=GATE,
        )
    assert isinstance(request, AskLLM)
    if request.purpose == "concepts":
        return Completion(concepts, finish_reason="stop")
    if request.purpose == "instructions":
        return Completion(json.dumps([c.model_dump() for c in CHAIN]), finish_reason="stop")
    if request.role == "edit_parser":
        return Completion('{"type": "MODIFY", "target": "cue"}', finish_reason="stop")
    if request.purpose.endswith("judge_binary"):
        ef = ef2 if request.purpose.startswith("step2") else 1
        return Completion(
            f"AC_REASON: same\nEF_REASON: cited\nAC: 1\nEF: {ef}\nCCS: {ef}", finish_reason="stop"
        )
    return Completion("REASON: kept\nSCORE: 4", finish_reason="stop")


def _made(n: int = 3, concepts: str = '["cue 1", "cue 2"]', ef2: int = 1) -> list[SampleRecord]:
    """``n`` records as the protocol makes them from the scripted replies."""
    cfg = protocol.ProtocolConfig()
    out = []
    for i in range(n):
        sample = SampleInput(id=f"okvqa-{i:03d}", domain="okvqa", question=f"Is it {i}?", image=ref(str(i)))
        run = SampleRun(sample, cfg)
        requests = run.start()
        while requests is not None:
            requests = run.send(tuple(_reply(q, concepts, ef2) for q in requests))
        assert run.record is not None
        out.append(run.record)
    return out


def _verified(tmp_path, recs: list[SampleRecord], name: str = "run") -> Verified | object:
    write_edct_run(tmp_path / name, recs, target=TARGET, resamples=200)
    out = tmp_path / f"{name}.edct.zip"
    assert main(["submit", str(tmp_path / name), "--out", str(out)]) == 0
    return verify_bundle(out)


def _rejected(result: object, code: str, text: str) -> None:
    assert not isinstance(result, Verified), "accepted"
    assert result.code == code, result.reason  # type: ignore[attr-defined]
    assert text in result.reason, result.reason  # type: ignore[attr-defined]


def test_what_the_protocol_writes_verifies(tmp_path):
    recs = _made()
    assert [r.status for r in recs] == ["scored"] * 3
    assert recs[0].steps[0].edit_target.raw == '{"type": "MODIFY", "target": "cue"}'  # kept for the replay
    result = _verified(tmp_path, recs)
    assert isinstance(result, Verified), result.reason
    assert result.summary.overall.estimate("ccs_binary") == 1.0


def test_concepts_read_but_not_evidence_verify(tmp_path):
    """The extractor's reply parses, but names nothing the explanation cites: the protocol leaves the
    sample unscored with the reply kept. (The restated rules rejected every such honest record.)"""
    recs = _made(concepts='["zebra stripes", "moon"]')
    assert {r.status for r in recs} == {"unscored"}
    assert recs[0].concepts.unscored == "unsupported" and recs[0].concepts.raw
    result = _verified(tmp_path, recs)
    assert isinstance(result, Verified), result.reason


def test_a_changed_protocol_needs_no_mirror(tmp_path, monkeypatch):
    """Scoring changed in the protocol (a sample's CCS the worst step's, not the mean): records
    written under it verify under it, with nothing restated to update."""
    real = protocol.score_sample

    def worst_step(steps):
        s = real(steps)
        worst = min((x.binary.ccs for x in steps if x.binary and x.binary.ccs is not None), default=None)
        return SampleScores(ccs_binary=worst, ccs_graded=s.ccs_graded, ac=s.ac, ef=s.ef)

    monkeypatch.setattr(protocol, "score_sample", worst_step)
    recs = _made(ef2=0)
    assert [r.scores.ccs_binary for r in recs] == [0.0] * 3  # the mean would be 0.5
    result = _verified(tmp_path, recs)
    assert isinstance(result, Verified), result.reason


def test_an_edit_target_not_from_the_parsers_reply_is_rejected(tmp_path):
    recs = _made()
    step = recs[1].steps[0]
    forged_target = step.edit_target.model_copy(update={"target": "sky"})
    recs[1] = recs[1].model_copy(
        update={"steps": (step.model_copy(update={"edit_target": forged_target}), *recs[1].steps[1:])}
    )
    _rejected(
        _verified(tmp_path, recs),
        "gate_mismatch",
        'sample okvqa-001: step 1 edit_target.target recorded as "sky", its evidence gives "cue"',
    )


def test_a_schema_1_record_verifies_with_its_edit_targets_as_recorded(tmp_path):
    """Records written before edit targets kept the parser's reply (schema 1) still verify; a
    schema-2 record without that reply does not."""

    def strip(r: SampleRecord, version: int) -> SampleRecord:
        steps = tuple(
            s.model_copy(
                update={"edit_target": s.edit_target.model_copy(update={"raw": None, "finish_reason": None})}
            )
            for s in r.steps
        )
        return r.model_copy(update={"steps": steps, "schema_version": version})

    old = [strip(r, 1) for r in _made()]
    assert '"raw"' not in old[0].steps[0].edit_target.model_dump_json()
    result = _verified(tmp_path, old, "old")
    assert isinstance(result, Verified), result.reason
    stripped = [strip(r, 2) for r in _made()]
    _rejected(
        _verified(tmp_path, stripped, "stripped"),
        "gate_mismatch",
        'step 1 edit_target.target recorded as "cue", its evidence gives "cue 1"',
    )


@pytest.mark.parametrize(
    ("edit", "code", "text"),
    [
        (
            lambda r: r.model_copy(update={"reason": "the judge was slow"}),
            "status_mismatch",
            'reason recorded as "the judge was slow", its evidence gives null',
        ),
        (
            lambda r: r.model_copy(update={"steps": r.steps[:1]}),
            "status_mismatch",
            "sample okvqa-000: recorded scored, but its steps make it excluded",  # step 2 has no evidence
        ),
        (
            lambda r: r.model_copy(
                update={
                    "steps": (
                        r.steps[0].model_copy(
                            update={"attempts": (r.steps[0].attempts[0].model_copy(update={"seed": 7}),)}
                        ),
                        r.steps[1],
                    )
                }
            ),
            "gate_mismatch",
            "sample okvqa-000: step 1 attempt 0 seed recorded as 7, its evidence gives 1000",
        ),
    ],
)
def test_the_first_difference_is_the_reported_mismatch(tmp_path, edit, code, text):
    recs = _made(1)
    _rejected(_verified(tmp_path, [edit(recs[0])]), code, text)
