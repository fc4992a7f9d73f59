"""Replies that are read but are not evidence (issue 44): the rules of ``edct_task.evidence`` and
where the protocol applies them.

On the main before issue 44 every case below was scored: the extractor's example concept list for
a kitchen, the edit parser's example target for a recoloured ball, a chain whose change restates
its concept, a graded reason that is the rubric's line for another score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_protocol import INSTRUCTIONS, default_responder, drive

from edct_task import evidence, prompts
from edct_task.engine.protocol import ProtocolConfig

KITCHEN = "1. The stove and oven along the back wall.\n2. The kettle on the counter next to the sink."
EXAMPLE = json.dumps(["the red colour of the traffic light", "the pedestrian on the crosswalk"])
RUBRIC_3 = (
    "The answer is right but the explanation is not grounded in the picture; or the answer is vague "
    "but at least drops the earlier answer that the edits made wrong."
)


def _kitchen(overrides: dict[str, object]) -> object:
    """A sample about a kitchen photograph: the target answers and explains as a real VLM would."""
    return default_responder(
        {"baseline.answer": "A kitchen.", "baseline.why": KITCHEN, "step1.why": KITCHEN, "step2.why": KITCHEN}
        | overrides
    )


# ------------------------------------------------------------------------------------ the rules


def test_the_examples_are_read_from_the_templates() -> None:
    concepts = evidence.template_text("extract_concepts")
    assert {e.text for e in concepts.examples} >= {
        "the red colour of the traffic light",
        "the pedestrian on the crosswalk",
        "the red colour of the car",
    }
    target = evidence.template_text("edit_parse")
    assert {(e.text, e.negative) for e in target.examples} == {
        ("traffic light", False),
        ("the colour of the light", True),
    }
    assert "object" in target.placeholders
    assert set(evidence.template_text("judge_graded").rubric) == {"1", "2", "3", "4", "5"}


def test_another_templates_examples_are_the_ones_that_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """No list of today's examples: a template with other examples makes those the echoes."""
    original = prompts.get_template("extract_concepts")
    text = original.text.replace(
        '["the red colour of the traffic light", "the pedestrian on the crosswalk"]',
        '["the striped awning above the shop", "the dog asleep on the sofa"]',
    )
    patched = prompts.PromptTemplate(original.name, original.version, text)
    monkeypatch.setattr(
        prompts, "get_template", lambda name: patched if name == "extract_concepts" else original
    )
    texts = {"question": "Which room is this?", "answer": "A kitchen.", "explanation": KITCHEN}
    found = evidence.check_concepts(["the striped awning above the shop", "the stove"], **texts)
    assert found is not None and found.kind == "echoed"
    # today's example is no echo under that template, only a concept the kitchen does not support
    found = evidence.check_concepts(["the red colour of the traffic light"], **texts)
    assert found is not None and found.kind == "unsupported"


@pytest.mark.parametrize(
    ("concepts", "explanation", "kind"),
    [
        (json.loads(EXAMPLE), KITCHEN, "echoed"),
        (json.loads(EXAMPLE), "1. The red kettle on the stove.\n2. Light from the window.", "echoed"),
        (["the snow-covered mountains"], "1. Waves on the sandy shore.\n2. Umbrellas.", "unsupported"),
        (json.loads(EXAMPLE), "1. The traffic light is red.\n2. A pedestrian is crossing.", None),
        (["the red colour of the traffic light"], "The light shows red.", None),
        (["the airliners at the gates", "the control tower"], "Planes at the gates; a control tower.", None),
        (["the surfboard", "the waves"], "He rides a board on a large wave.", None),
    ],
)
def test_concepts(concepts: list[str], explanation: str, kind: str | None) -> None:
    found = evidence.check_concepts(
        concepts, question="Where is this?", answer="Here.", explanation=explanation
    )
    assert (found.kind if found else None) == kind


@pytest.mark.parametrize(
    ("target", "change", "kind"),
    [
        ("colour of the light", "recolour the ball from yellow to orange", "echoed"),
        ("colour of the light", "recolour the traffic light from red to green", "echoed"),  # counter-example
        ("traffic light", "remove the beach umbrellas", "echoed"),
        ("object", "remove the baggage cart", "echoed"),  # the template's blank
        ("giraffe", "remove the plane parked at gate 3", "unsupported"),
        ("traffic light", "recolour the traffic light from red to green", None),
        ("airplane", "remove the jet parked at gate 3", None),
        ("umbrellas", "remove the beach umbrella", None),
    ],
)
def test_edit_targets(target: str, change: str, kind: str | None) -> None:
    instruction = f"Keep: the rest\nChange: {change}\nHow: same light\nConstraints: no new objects"
    found = evidence.check_edit_target(target, instruction)
    assert (found.kind if found else None) == kind


@pytest.mark.parametrize(
    ("change", "concept", "restated"),
    [
        ("The car is facing right.", "the car facing right", True),
        ("the colour of the kettle", "the red colour of the kettle", True),
        ("the control tower", "the control tower", True),
        ("turn the car to face left", "the car facing right", False),
        ("the traffic light green", "the red colour of the traffic light", False),
        ("remove the beach umbrellas", "the beach umbrellas", False),
    ],
)
def test_changes(change: str, concept: str, restated: bool) -> None:
    assert evidence.restates(change, concept) is restated


def test_graded_reasons() -> None:
    assert evidence.check_graded(1, RUBRIC_3).kind == "echoed"
    assert evidence.check_graded(3, RUBRIC_3) is None  # the rubric's line, and its own score
    assert evidence.check_graded(5, "The new answer follows the green light and names it.") is None


# ------------------------------------------------------------------------- in the protocol


def test_the_extractors_example_for_a_kitchen_makes_the_sample_unscored_as_echoed() -> None:
    record, _ = drive(ProtocolConfig(), _kitchen({"concepts": EXAMPLE}))
    assert record.status == "unscored" and record.concepts.unscored == "echoed"
    assert record.concepts.raw == EXAMPLE and record.concepts.concepts == ()
    assert record.reason.startswith("concept extraction not evidence (echoed)")
    # the same list for a street scene that cites both is evidence
    record, _ = drive(ProtocolConfig(), default_responder({"concepts": EXAMPLE}))
    assert record.status == "scored"


def test_a_concept_the_explanation_does_not_support_makes_the_sample_unscored() -> None:
    reply = json.dumps(["the kettle on the counter", "the tennis racket"])
    record, _ = drive(ProtocolConfig(), _kitchen({"concepts": reply}))
    assert record.status == "unscored" and record.concepts.unscored == "unsupported"
    assert "'the tennis racket'" in record.concepts.error


def test_a_chain_whose_change_restates_its_concept_makes_the_sample_unscored() -> None:
    chain = json.loads(INSTRUCTIONS)
    chain[1]["change"] = "The pedestrian is on the crosswalk."
    record, _ = drive(ProtocolConfig(), default_responder({"instructions": json.dumps(chain)}))
    assert record.status == "unscored" and record.instructions.unscored == "restated"
    assert record.instructions.instructions == () and "edit 2's change" in record.instructions.error
    assert not record.steps


def test_the_edit_parsers_example_falls_back_to_the_rules() -> None:
    reply = '{"type": "ADD", "target": "the colour of the light"}'
    record, _ = drive(ProtocolConfig(), default_responder({"step1.edit_parse": reply}))
    target = record.steps[0].edit_target
    assert target.source == "rules" and target.edit_type == "MODIFY" and target.target == "traffic light"
    assert "not evidence (echoed" in target.note and "counter-example" in target.note
    assert record.status == "scored"


def test_a_graded_reason_that_is_another_scores_rubric_line_is_unscored() -> None:
    reply = json.dumps({"reason": RUBRIC_3, "score": 1})
    record, _ = drive(ProtocolConfig(), default_responder({"step1.judge_graded": reply}))
    first, second = record.steps
    assert first.graded.score is None and first.graded.unscored == "echoed"
    assert "rubric's text for score 3" in first.graded.error and first.graded.raw == reply
    assert first.binary.ccs == 1 and second.graded.score == 5
    # a score needs every step judged: the sample keeps CCS_binary, and has no CCS_graded
    assert record.status == "scored" and record.scores.ccs_binary == 1.0 and record.scores.ccs_graded is None


def test_the_calibration_world_never_trips_a_rule(tmp_path: Path) -> None:
    """Every reply of the calibration world's rule-based text models is evidence: no record of a
    mixed run is unscored by a rule, no edit target falls back, no judge signal is raised."""
    from edct_task.config import calibration_config
    from edct_task.run.runner import run
    from edct_task.scoring.health import judge_health

    config = calibration_config("mixed:0.5", n=24, output_dir=tmp_path / "run")
    config.progress = False
    records = run(config).records
    assert len(records) == 24 and sum(r.status == "scored" for r in records) >= 12
    outputs = [r.concepts for r in records] + [r.instructions for r in records]
    assert not [o for o in outputs if o is not None and o.unscored in evidence.KINDS]
    steps = [s for r in records for s in r.steps]
    assert all(s.edit_target is None or s.edit_target.source == "llm" for s in steps)
    assert all(s.graded is None or s.graded.unscored is None for s in steps)
    for kinds in judge_health(records).values():
        for cell in kinds.values():
            assert cell["signals"] == {
                "without_reason": 0,
                "rubric_copied": 0,
                "contradicted": 0,
                "identical": False,
            }
