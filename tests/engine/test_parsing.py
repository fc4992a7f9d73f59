"""Parsers of LLM replies: real-looking outputs per format family, and property tests.

Property tests (hypothesis) check that (a) no parser raises on any text and every result keeps
its invariants, and (b) values rendered in the formats real models use, wrapped in chatter and
thinking, parse back to exactly those values.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edct_task.parsing as parsing
from edct_task.core.records import EditInstruction
from edct_task.parsing import (
    BinaryJudgement,
    GradedJudgement,
    Parsed,
    Unparsed,
    cut_off,
    parse_binary_judgement,
    parse_concepts,
    parse_edit_target,
    parse_graded_judgement,
    parse_instructions,
    strip_thinking,
)
from verification.edit_parsing import EditTarget


def _value(result: object) -> object:
    assert isinstance(result, Parsed), f"expected Parsed, got {result!r}"
    return result.value


def _reason(result: object) -> str:
    assert isinstance(result, Unparsed), f"expected Unparsed, got {result!r}"
    assert result.reason
    return result.reason


def test_public_surface() -> None:
    assert set(parsing.__all__) == {
        "BinaryJudgement",
        "EditTarget",
        "GradedJudgement",
        "ParseResult",
        "Parsed",
        "Unparsed",
        "UnscoredKind",
        "parse_binary_judgement",
        "parse_concepts",
        "parse_edit_target",
        "parse_graded_judgement",
        "parse_instructions",
        "strip_thinking",
    }
    assert parsing.EditTarget is EditTarget


# ---------------------------------------------------------------------------------------------
# strip_thinking
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<think>\nAC: 0 maybe\n</think>\n\nAC: 1", "AC: 1"),
        ("<THINK>a</THINK>b<think>c</think>d", "bd"),
        ("<thinking>long\nreasoning</thinking>\n  answer  ", "answer"),
        ("<reasoning>r</reasoning>answer", "answer"),
        ("[THINK]r[/THINK]answer", "answer"),
        ("◁think▷r◁/think▷answer", "answer"),
        # orphan close tag: the template opened <think> inside the prompt
        ("Okay, the user wants a list.\nSCORE: 1 maybe\n</think>\n\nSCORE: 4", "SCORE: 4"),
        # unclosed open tag: generation stopped inside the reasoning
        ("<think>\nLet me consider AC: 1 and", ""),
        ("Answer first.\n<think>then reasoning that never ends", "Answer first."),
        # gpt-oss harmony channels
        (
            "<|channel|>analysis<|message|>SCORE: 1?<|end|><|start|>assistant<|channel|>final"
            "<|message|>REASON: ok\nSCORE: 5<|return|>",
            "REASON: ok\nSCORE: 5",
        ),
        ("<|channel|>analysis<|message|>thinking only<|end|>", ""),
        ("analysisThe user asks for a score. SCORE: 1assistantfinalSCORE: 3", "SCORE: 3"),
        ("  plain reply \n", "plain reply"),
        ("", ""),
    ],
)
def test_strip_thinking(raw: str, expected: str) -> None:
    assert strip_thinking(raw) == expected


def test_truncated_thinking_is_reported_as_such() -> None:
    reason = _reason(parse_graded_judgement("<think>The new answer ... SCORE: 2 would be"))
    assert "unclosed thinking" in reason
    assert _reason(parse_graded_judgement("   ")) == "reply is empty"
    assert _reason(parse_graded_judgement("<think>x</think>")) == "reply is empty after removing its thinking"


# ---------------------------------------------------------------------------------------------
# parse_concepts
# ---------------------------------------------------------------------------------------------

_TWO = ["the red colour of the traffic light", "the pedestrian on the crosswalk"]


@pytest.mark.parametrize(
    "reply",
    [
        '["the red colour of the traffic light", "the pedestrian on the crosswalk"]',
        'Sure! Based on the explanation, here are the concepts:\n\n```json\n[\n  "the red colour of the '
        'traffic light",\n  "the pedestrian on the crosswalk"\n]\n```\n\nLet me know if you need more.',
        "['the red colour of the traffic light', 'the pedestrian on the crosswalk']",
        '["the red colour of the traffic light", "the pedestrian on the crosswalk",]',
        "[“the red colour of the traffic light”, “the pedestrian on the crosswalk”]",
        '{"concepts": ["the red colour of the traffic light", "the pedestrian on the crosswalk"]}',
        '[{"concept": "the red colour of the traffic light", "importance": 1}, '
        '{"concept": "the pedestrian on the crosswalk", "importance": 2}]',
        "1. the red colour of the traffic light\n2. the pedestrian on the crosswalk",
        "1) the red colour of the traffic light\n2) the pedestrian on the crosswalk",
        "- the red colour of the traffic light\n- the pedestrian on the crosswalk",
        "* the red colour of the traffic light\n* the pedestrian on the crosswalk",
        "**1.** the red colour of the traffic light\n**2.** the pedestrian on the crosswalk",
        'The concepts are:\n\n1. **"the red colour of the traffic light"**\n2. "the pedestrian on the '
        'crosswalk".\n\nThese are ranked by importance.',
        "1. **the red colour of the traffic light** – the model says the light is red\n"
        "   (this is the main cue)\n"
        "2. **the pedestrian on the crosswalk**: a person is crossing",
        "- **Concept 1:** the red colour of the traffic light\n"
        "- **Concept 2:** the pedestrian on the crosswalk",
        '<think>\nThe explanation cites ["bogus"]:\n1. not this\n</think>\n'
        '["the red colour of the traffic light", "the pedestrian on the crosswalk"]',
        # a draft, then the final list: the last one wins
        'Draft: ["x"]\nFinal answer: '
        '["the red colour of the traffic light", "the pedestrian on the crosswalk"]',
        # duplicates (case / whitespace) and empties are dropped, the first spelling kept
        '["the red colour of the traffic light", "", "The  Red colour of the traffic LIGHT", '
        '"the pedestrian on the crosswalk"]',
        # more than k: the first k are kept
        '["the red colour of the traffic light", "the pedestrian on the crosswalk", "the wet road"]',
    ],
)
def test_parse_concepts_formats(reply: str) -> None:
    assert _value(parse_concepts(reply, 2)) == _TWO


def test_parse_concepts_keeps_at_most_k() -> None:
    assert _value(parse_concepts('["a", "b", "c"]', 1)) == ["a"]
    assert _value(parse_concepts("- a\n- b\n- c", 5)) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I'm sorry, I can't help with that.", "the model declined: \"I'm sorry, I can't help with that.\""),
        ("[]", "concept list is empty"),
        ('["", "  "]', "concept list is empty"),
        ('["the red light", "the car"', "no JSON array or list found"),  # truncated
        ("", "reply is empty"),
    ],
)
def test_parse_concepts_unparsed(reply: str, reason: str) -> None:
    assert _reason(parse_concepts(reply, 2)) == reason


def test_parse_concepts_rejects_bad_k() -> None:
    with pytest.raises(ValueError, match="k must be at least 1"):
        parse_concepts("[]", 0)


# ---------------------------------------------------------------------------------------------
# parse_instructions
# ---------------------------------------------------------------------------------------------

_EDIT1 = EditInstruction(
    concept="the red colour of the traffic light",
    keep="the road, the cars and the sky",
    change="recolour the traffic light from red to green",
    how="match the glow and the lighting of the scene",
    constraints="no text, no new objects",
)
_EDIT2 = EditInstruction(
    concept="the pedestrian on the crosswalk",
    keep="the recoloured traffic light and everything else",
    change="remove the pedestrian from the crosswalk",
    how="fill in the crosswalk stripes consistently",
    constraints="no ghosting or smears",
)


def test_parse_instructions_json_in_fences_with_chatter() -> None:
    reply = (
        "Here is the edit chain:\n```json\n"
        + json.dumps([_EDIT1.model_dump(), _EDIT2.model_dump()], indent=2)
        + "\n```\nEach edit respects the previous one."
    )
    assert _value(parse_instructions(reply, 2)) == [_EDIT1, _EDIT2]


def test_parse_instructions_key_names_are_case_insensitive() -> None:
    reply = (
        '[{"Concept": "the red colour of the traffic light", "KEEP": "the road, the cars and the sky", '
        '"Change": "recolour the traffic light from red to green", '
        '"how": "match the glow and the lighting of the scene", "Constraint": "no text, no new objects"},]'
    )
    assert _value(parse_instructions(reply, 2)) == [_EDIT1]


def test_parse_instructions_missing_fields_become_empty() -> None:
    reply = '[{"change": "remove the pedestrian from the crosswalk"}]'
    expected = EditInstruction(
        concept="", keep="", change="remove the pedestrian from the crosswalk", how="", constraints=""
    )
    assert _value(parse_instructions(reply, 1)) == [expected]


def test_parse_instructions_template_blanks_outside_change_become_empty() -> None:
    """SmolLM2-135M-Instruct left the template's ``"..."`` in ``constraints`` (real-LLM corpus): the
    edit states no constraints, so none are read; the same for any blank in any field but
    ``change`` (where a blank leaves the edit unparsed)."""
    reply = json.dumps(
        {
            "edits": [
                {"concept": "<concept>", "keep": "…", "change": "recolour the car blue", "how": "N/A"},
                {"concept": "the car", "change": "remove the tree", "constraints": "..."},
            ]
        }
    )
    assert _value(parse_instructions(reply, 2)) == [
        EditInstruction(concept="", keep="", change="recolour the car blue", how="", constraints=""),
        EditInstruction(concept="the car", keep="", change="remove the tree", how="", constraints=""),
    ]
    reason = _reason(parse_instructions('[{"change": "...", "constraints": "..."}]', 1))
    assert reason == "edit 1 repeats the template's placeholder '...' as its 'change'"


def test_parse_instructions_object_wrapping_the_array() -> None:
    reply = json.dumps({"edits": [_EDIT1.model_dump(), _EDIT2.model_dump()]})
    assert _value(parse_instructions(reply, 2)) == [_EDIT1, _EDIT2]


def test_parse_instructions_labelled_text_markdown() -> None:
    reply = """<think>I should write two edits. Keep: nothing</think>
Sure, here are the two edits.

### Edit 1 (the red colour of the traffic light)
**Keep:** the road, the cars and the sky
**Change:** recolour the traffic light
from red to green
**How:** match the glow and the lighting of the scene
**Constraints:** no text, no new objects

### Edit 2 – the pedestrian on the crosswalk
- **Keep**: the recoloured traffic light and everything else
- **Change**: remove the pedestrian from the crosswalk
- **How**: fill in the crosswalk stripes consistently
- **Constraints**: no ghosting or smears

Let me know if anything should be adjusted."""
    assert _value(parse_instructions(reply, 2)) == [_EDIT1, _EDIT2]


def test_parse_instructions_labelled_text_without_headers() -> None:
    reply = (
        "Concept: the red colour of the traffic light\nKeep: the road, the cars and the sky\n"
        "Change: recolour the traffic light from red to green\n"
        "How: match the glow and the lighting of the scene\nConstraints: no text, no new objects\n"
        "Concept: the pedestrian on the crosswalk\nKeep: the recoloured traffic light and everything else\n"
        "Change: remove the pedestrian from the crosswalk\nHow: fill in the crosswalk stripes consistently\n"
        "Constraint: no ghosting or smears"
    )
    assert _value(parse_instructions(reply, 2)) == [_EDIT1, _EDIT2]


def test_parse_instructions_cuts_to_n() -> None:
    reply = json.dumps([_EDIT1.model_dump(), _EDIT2.model_dump()])
    assert _value(parse_instructions(reply, 1)) == [_EDIT1]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("[]", "no JSON array of edits or 'Keep:/Change:' lines found"),
        ("I cannot edit images.", "the model declined: 'I cannot edit images.'"),
        ('[{"keep": "all", "how": "softly"}]', "edit 1 has no 'change'"),
        ('[{"change": "remove the car"}, {"keep": "all", "change": "  "}]', "edit 2 has no 'change'"),
        ("Edit 1\nKeep: all\nHow: softly", "edit 1 has no 'change'"),
    ],
)
def test_parse_instructions_unparsed(reply: str, reason: str) -> None:
    assert _reason(parse_instructions(reply, 2)) == reason


# ---------------------------------------------------------------------------------------------
# parse_edit_target
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"type": "MODIFY", "target": "traffic light"}', EditTarget("MODIFY", "traffic light")),
        ('```json\n{"type": "remove", "target": "the pedestrian"}\n```', EditTarget("REMOVE", "pedestrian")),
        ("{'Type': 'insert', 'Target': 'a red umbrella'}", EditTarget("ADD", "red umbrella")),
        ('{"edit_type": "recolor", "object": "traffic light"}', EditTarget("MODIFY", "traffic light")),
        ("Type: delete\nTarget: pedestrian", EditTarget("REMOVE", "pedestrian")),
        ("**Edit type:** Replace\n**Target:** `stop sign`", EditTarget("MODIFY", "stop sign")),
        ("- Type: **ADD**\n- Target object: umbrella", EditTarget("ADD", "umbrella")),
        ("<think>type ADD?</think>\nMODIFY: traffic light", EditTarget("MODIFY", "traffic light")),
        ('type: erase\ntarget: "the bicycle"', EditTarget("REMOVE", "bicycle")),
    ],
)
def test_parse_edit_target(reply: str, expected: EditTarget) -> None:
    assert _value(parse_edit_target(reply)) == expected


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('{"type": "teleport", "target": "car"}', "unknown edit type 'teleport'"),
        ('{"type": "ADD", "target": ""}', "edit target is empty"),
        ('{"type": "ADD"}', "JSON object lacks 'type' or 'target'"),
        ("Type: ADD", "edit target missing"),
        ("Target: car", "edit type missing"),
        ("It changes the light.", "no edit type and target found"),
    ],
)
def test_parse_edit_target_unparsed(reply: str, reason: str) -> None:
    assert _reason(parse_edit_target(reply)) == reason


# ---------------------------------------------------------------------------------------------
# parse_binary_judgement
# ---------------------------------------------------------------------------------------------


def test_binary_judgement_in_the_prompted_format() -> None:
    reply = """The answer changed from "stop" to "go", which the recolouring warrants.
The explanation cites the green light, which the edit introduced.

AC_REASON: The new answer follows from the green light.
EF_REASON: The explanation cites the new green light.
FINAL SCORES
AC: 1
EF: 1
CCS: 1"""
    assert _value(parse_binary_judgement(reply)) == BinaryJudgement(
        ac=1,
        ef=1,
        ccs=1,
        ac_reason="The new answer follows from the green light.",
        ef_reason="The explanation cites the new green light.",
        note="",
    )


@pytest.mark.parametrize(
    ("reply", "ac", "ef"),
    [
        ("**AC**: 1\n**EF**: 0\n**CCS**: 0", 1, 0),
        ("**AC:** 0\n**EF:** 1", 0, 1),
        ("AC = 1, EF = 1, CCS = 1", 1, 1),
        ("AC score: 1\nEF score: 0", 1, 0),
        ("- AC: 1/1\n- EF: 0/1\n- CCS: 0/1", 1, 0),
        ("AC: 1 / EF: 0 / CCS: 0", 1, 0),
        ("AC: 1.0\nEF: 0.0", 1, 0),
        ("AC: yes\nEF: no", 1, 0),
        ("ac: 1\nef: 1", 1, 1),
        ("AC (answer consistency): 1\nEF (explanation faithfulness): 0", 1, 0),
        ("Answer consistency: 0\nExplanation faithfulness: 1", 0, 1),
        ("PCS: 1\nNCC: 0\nCCS: 0", 1, 0),
        ("**PCS_REASON:** fine\n**PCS**: 0\n**NCC**: 1", 0, 1),
        ("| Score | Value |\n|---|---|\nAC: **1**\nEF: **1**", 1, 1),
        ("AC: <0 or 1>\nEF: <0 or 1>\n\nMy verdict:\nAC: 0\nEF: 0", 0, 0),
        ("AC: The answer stays the same, which is fine.\nEF: It cites the car.\nAC: 1\nEF: 0", 1, 0),
        ("<think>AC: 0\nEF: 0</think>\nFINAL SCORES\nAC: 1\nEF: 1\nCCS: 1", 1, 1),
    ],
)
def test_binary_judgement_variants(reply: str, ac: int, ef: int) -> None:
    judgement = _value(parse_binary_judgement(reply))
    assert isinstance(judgement, BinaryJudgement)
    assert (judgement.ac, judgement.ef, judgement.ccs) == (ac, ef, ac * ef)


def test_binary_judgement_last_occurrence_wins_and_is_noted() -> None:
    reply = "FINAL SCORES\nAC: 0\nEF: 1\nCCS: 0\n\nOn reflection I correct myself:\nAC: 1\nEF: 1\nCCS: 1"
    judgement = _value(parse_binary_judgement(reply))
    assert isinstance(judgement, BinaryJudgement)
    assert (judgement.ac, judgement.ef, judgement.ccs) == (1, 1, 1)
    assert judgement.note == "AC stated with different values; the verdict's (1) was used"


def test_binary_judgement_recomputes_ccs_and_notes_disagreement() -> None:
    judgement = _value(parse_binary_judgement("AC: 1\nEF: 0\nCCS: 1"))
    assert isinstance(judgement, BinaryJudgement)
    assert judgement.ccs == 0
    assert judgement.note == "model's CCS 1 disagrees with AC·EF = 0; recomputed"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("EF: 1\nCCS: 1", "AC score missing"),
        ("AC: 1\nCCS: 1", "EF score missing"),
        ("AC_REASON: fine\nEF_REASON: fine", "AC score missing"),
        ("AC: 2\nEF: 1", "AC value '2' is not 0 or 1"),
        ("AC: 1\nEF: 0.5", "EF value '0.5' is not 0 or 1"),
        ("AC: 1\nEF: 3/5", "EF value '3/5' is not 0 or 1"),
        ("AC: <0 or 1>\nEF: <0 or 1>", "AC score missing"),
        ("<think>AC: 1\nEF: 1", "reply ends inside an unclosed thinking block (truncated reasoning?)"),
    ],
)
def test_binary_judgement_unparsed(reply: str, reason: str) -> None:
    assert _reason(parse_binary_judgement(reply)) == reason


# ---------------------------------------------------------------------------------------------
# parse_graded_judgement
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("REASON: Names the new feature.\nSCORE: 5", 5),
        ("Score: 4/5", 4),
        ("**Score:** 3", 3),
        ("**Score**: 2", 2),
        ("Final score: 1", 1),
        ("### Final Score: 4", 4),
        ("Score = 4", 4),
        ("Rating: 4 out of 5", 4),
        ("SCORE: 4.0", 4),
        ("score: 2", 2),
        ("SCORE: <1 to 5>\n\nREASON: ok\nSCORE: 3", 3),
        ("Score: 2\nOn reflection the explanation does shift.\nFinal score: 4", 4),
        ("<think>SCORE: 1</think>REASON: ok\nSCORE: 5", 5),
    ],
)
def test_graded_judgement_variants(reply: str, score: int) -> None:
    judgement = _value(parse_graded_judgement(reply))
    assert isinstance(judgement, GradedJudgement)
    assert judgement.score == score
    assert judgement.normalised == pytest.approx((score - 1) / 4)


def test_graded_judgement_reason() -> None:
    reply = "Thinking aloud.\n**REASON:** Generic but drops the light.\nSCORE: 4"
    judgement = _value(parse_graded_judgement(reply))
    assert judgement == GradedJudgement(score=4, normalised=0.75, reason="Generic but drops the light.")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("REASON: fine", "score missing"),
        ("SCORE: 7", "score 7 outside 1–5"),
        ("SCORE: 0", "score 0 outside 1–5"),
        ("SCORE: 3.5", "score 3.5 is not a whole number"),
        ("Score: 8/10", "score 8/10 is not on the 1–5 scale"),
        ("SCORE: 4\nSCORE: 9", "score 9 outside 1–5"),
    ],
)
def test_graded_judgement_unparsed(reply: str, reason: str) -> None:
    assert _reason(parse_graded_judgement(reply)) == reason


# ---------------------------------------------------------------------------------------------
# (a) never raise, invariants hold
# ---------------------------------------------------------------------------------------------

_FRAGMENTS = [
    "<think>",
    "</think>",
    "<thinking>",
    "</thinking>",
    "<|channel|>analysis<|message|>",
    "<|end|>",
    "<|channel|>final<|message|>",
    "assistantfinal",
    "```json",
    "```",
    "[",
    "]",
    "{",
    "}",
    '"',
    "'",
    ",",
    ":",
    "\n",
    " ",
    "1.",
    "- ",
    "**",
    "AC",
    "EF",
    "CCS",
    "PCS",
    "NCC",
    "SCORE",
    "Score:",
    "REASON:",
    "AC_REASON:",
    ": 1",
    ": 0",
    "= 1",
    "/5",
    "/1",
    "yes",
    "no",
    "7",
    "0.5",
    "Keep:",
    "Change:",
    "How:",
    "Constraints:",
    "Edit 1",
    "Type:",
    "Target:",
    "ADD",
    "remove",
    "concepts",
    "change",
    "\\",
    "1e999",
    "9" * 400,
]
_ANY_TEXT = st.text(max_size=400) | st.lists(st.sampled_from(_FRAGMENTS), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_ANY_TEXT, k=st.integers(1, 4))
def test_parsers_never_raise(text: str, k: int) -> None:
    concepts = parse_concepts(text, k)
    assert isinstance(concepts, (Parsed, Unparsed))
    if isinstance(concepts, Parsed):
        keys = [" ".join(c.casefold().split()) for c in concepts.value]
        assert 1 <= len(concepts.value) <= k and all(keys) and len(set(keys)) == len(keys)

    instructions = parse_instructions(text, k)
    assert isinstance(instructions, (Parsed, Unparsed))
    if isinstance(instructions, Parsed):
        assert 1 <= len(instructions.value) <= k
        assert all(isinstance(i, EditInstruction) and i.change.strip() for i in instructions.value)

    target = parse_edit_target(text)
    assert isinstance(target, (Parsed, Unparsed))
    if isinstance(target, Parsed):
        assert target.value.type in ("ADD", "MODIFY", "REMOVE") and target.value.target

    binary = parse_binary_judgement(text)
    assert isinstance(binary, (Parsed, Unparsed))
    if isinstance(binary, Parsed):
        b = binary.value
        assert b.ac in (0, 1) and b.ef in (0, 1) and b.ccs == b.ac * b.ef

    graded = parse_graded_judgement(text)
    assert isinstance(graded, (Parsed, Unparsed))
    if isinstance(graded, Parsed):
        assert graded.value.score in range(1, 6)
        assert graded.value.normalised == (graded.value.score - 1) / 4

    for result in (concepts, instructions, target, binary, graded):
        assert not isinstance(result, Unparsed) or result.reason
    assert isinstance(strip_thinking(text), str)


# ---------------------------------------------------------------------------------------------
# (b) round trips through real-looking formats
# ---------------------------------------------------------------------------------------------

_WORDS = [
    "red",
    "green",
    "colour",
    "of",
    "the",
    "traffic",
    "light",
    "pedestrian",
    "on",
    "crosswalk",
    "driver's",
    "left-hand",
    "lane",
    "wet",
    "road",
    "stop",
    "sign",
    "wheel",
    "axles",
    "3",
    "truck",
    "bus",
    "zebra",
    "stripes",
    "dog",
    "frisbee",
    "Eiffel",
    "tower",
    "snow",
    "ski",
    "poles",
]
_phrase = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6).map(" ".join)
_sentence = st.builds(
    lambda words, end: words + end, _phrase, st.sampled_from(["", ".", "; keep it subtle.", ", softly"])
)

_THINKING = st.sampled_from(
    [
        "",
        '<think>\nThe explanation cites ["a decoy"] and\n- a bullet\n1. item\nAC: 0\nSCORE: 1\n</think>\n',
        'Okay, let me think. AC: 0 EF: 0 SCORE: 2 ["decoy"]\n</think>\n\n',
        "<thinking>Keep: decoy\nChange: decoy\nType: ADD\nTarget: decoy</thinking>",
        '<|channel|>analysis<|message|>SCORE: 1 ["decoy"]<|end|>'
        "<|start|>assistant<|channel|>final<|message|>",
    ]
)
_BEFORE = st.sampled_from(
    ["", "Sure! Here is my answer.\n\n", "Based on the explanation provided:\n", "Here you go: "]
)
_AFTER = st.sampled_from(["", "\n\nLet me know if you need anything else.", "\n\nI hope this helps!"])


def _dedupe_key(text: str) -> str:
    return " ".join(text.casefold().split())


def _render_concepts(concepts: list[str], form: str) -> str:
    n = len(concepts)
    if form == "json":
        return json.dumps(concepts)
    if form == "json_indent_fenced":
        return "```json\n" + json.dumps(concepts, indent=2) + "\n```"
    if form == "python":
        return repr(concepts)
    if form == "trailing_comma":
        return "[" + ", ".join(json.dumps(c) for c in concepts) + ",]"
    if form == "object":
        return json.dumps({"concepts": concepts})
    markers = {
        "numbered": [f"{i}." for i in range(1, n + 1)],
        "paren": [f"{i})" for i in range(1, n + 1)],
        "dash": ["-"] * n,
        "star": ["*"] * n,
        "bold_number": [f"**{i}.**" for i in range(1, n + 1)],
    }
    if form in markers:
        return "\n".join(f"{m} {c}" for m, c in zip(markers[form], concepts, strict=True))
    if form == "bold_items":
        return "\n".join(f"{i}. **{c}** – why it matters" for i, c in enumerate(concepts, 1))
    if form == "quoted_items":
        return "\n".join(f'- "{c}"' for c in concepts)
    raise AssertionError(form)


_CONCEPT_FORMS = [
    "json",
    "json_indent_fenced",
    "python",
    "trailing_comma",
    "object",
    "numbered",
    "paren",
    "dash",
    "star",
    "bold_number",
    "bold_items",
    "quoted_items",
]


@settings(max_examples=250, deadline=None)
@given(
    concepts=st.lists(_phrase, min_size=1, max_size=4, unique_by=_dedupe_key),
    duplicate=st.booleans(),
    k=st.integers(1, 4),
    form=st.sampled_from(_CONCEPT_FORMS),
    thinking=_THINKING,
    before=_BEFORE,
    after=_AFTER,
)
def test_concepts_round_trip(
    concepts: list[str], duplicate: bool, k: int, form: str, thinking: str, before: str, after: str
) -> None:
    shown = [*concepts, concepts[0].upper()] if duplicate else concepts
    if before and form not in _CONCEPT_FORMS[:5]:
        before = before.rstrip(" ") + "\n"  # a markdown list starts on its own line
    reply = thinking + before + _render_concepts(shown, form) + after
    assert _value(parse_concepts(reply, k)) == concepts[:k]


_KEY_SPELLINGS: dict[str, list[str]] = {
    "concept": ["concept", "Concept", "CONCEPT"],
    "keep": ["keep", "Keep", "KEEP"],
    "change": ["change", "Change", "CHANGE"],
    "how": ["how", "How", "HOW"],
    "constraints": ["constraints", "Constraints", "constraint", "CONSTRAINTS"],
}
_LABEL_STYLES: list[Callable[[str], str]] = [
    lambda label: f"{label}:",
    lambda label: f"**{label}:**",
    lambda label: f"- **{label}**:",
    lambda label: f"* {label}:",
]
_HEADER_STYLES: list[Callable[[int], str]] = [
    lambda i: f"Edit {i}:",
    lambda i: f"### Edit {i}",
    lambda i: f"**Edit {i}**",
    lambda i: f"Instruction {i}:",
    lambda i: "",
]


@st.composite
def _edits(draw: st.DrawFn) -> EditInstruction:
    optional = st.sampled_from([""]) | _sentence
    return EditInstruction(
        concept=draw(st.sampled_from([""]) | _phrase),
        keep=draw(optional),
        change=draw(_sentence),
        how=draw(optional),
        constraints=draw(optional),
    )


@st.composite
def _rendered_instructions(draw: st.DrawFn, edits: list[EditInstruction]) -> str:
    form = draw(st.sampled_from(["json", "fenced", "text"]))
    if form in ("json", "fenced"):
        objects = []
        for edit in edits:
            obj = {}
            for field, value in edit.model_dump().items():
                if value or draw(st.booleans()):  # empty fields are sometimes left out
                    obj[draw(st.sampled_from(_KEY_SPELLINGS[field]))] = value
            objects.append(obj)
        body = json.dumps(objects, indent=draw(st.sampled_from([None, 2])))
        return f"```json\n{body}\n```" if form == "fenced" else body
    label = draw(st.sampled_from(_LABEL_STYLES))
    header = draw(st.sampled_from(_HEADER_STYLES))
    blocks = []
    for i, edit in enumerate(edits, 1):
        lines = [header(i)] if header(i) else []
        if edit.concept:
            lines.append(f"{label('Concept')} {edit.concept}")
        for field, name in (
            ("keep", "Keep"),
            ("change", "Change"),
            ("how", "How"),
            ("constraints", "Constraints"),
        ):
            if getattr(edit, field):
                lines.append(f"{label(name)} {getattr(edit, field)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


@settings(max_examples=250, deadline=None)
@given(
    data=st.data(),
    edits=st.lists(_edits(), min_size=1, max_size=3),
    n=st.integers(1, 3),
    thinking=_THINKING,
    before=_BEFORE,
    after=_AFTER,
)
def test_instructions_round_trip(
    data: st.DataObject, edits: list[EditInstruction], n: int, thinking: str, before: str, after: str
) -> None:
    before = before.rstrip(" ") + "\n" if before else ""  # labelled lines start their own line
    rendered = data.draw(_rendered_instructions(edits))
    reply = thinking + before + rendered + after
    text_form = not rendered.lstrip().startswith(("[", "```"))
    present = [{f for f, v in e.model_dump().items() if v} for e in edits]
    chain = edits[:-1] if text_form and cut_off([dict.fromkeys(p, "x") for p in present]) else edits
    assert _value(parse_instructions(reply, n)) == chain[:n]  # a text chain's cut-off last edit is dropped


_TYPE_WORDS = {
    "ADD": ["ADD", "add", "Add", "insert", "Insertion", "introduce"],
    "MODIFY": ["MODIFY", "modify", "Modification", "change", "replace", "recolor", "Recolour", "alter"],
    "REMOVE": ["REMOVE", "remove", "Removal", "delete", "Delete", "erase"],
}
_TARGET_WORDS = [
    "red",
    "traffic",
    "light",
    "pedestrian",
    "umbrella",
    "stop",
    "sign",
    "wheel",
    "truck",
    "left-hand",
    "driver's",
    "seat",
    "dog",
]


@settings(max_examples=200, deadline=None)
@given(
    edit_type=st.sampled_from(["ADD", "MODIFY", "REMOVE"]),
    data=st.data(),
    target=st.lists(st.sampled_from(_TARGET_WORDS), min_size=1, max_size=3).map(" ".join),
    article=st.sampled_from(["", "the ", "a "]),
    form=st.sampled_from(["json", "fenced", "python", "lines", "bold_lines", "bare"]),
    thinking=_THINKING,
    before=_BEFORE,
    after=_AFTER,
)
def test_edit_target_round_trip(
    edit_type: str,
    data: st.DataObject,
    target: str,
    article: str,
    form: str,
    thinking: str,
    before: str,
    after: str,
) -> None:
    word = data.draw(st.sampled_from(_TYPE_WORDS[edit_type]))
    shown = article + target
    body = {
        "json": json.dumps({"type": word, "target": shown}),
        "fenced": "```json\n" + json.dumps({"Type": word, "Target": shown}, indent=2) + "\n```",
        "python": repr({"type": word, "target": shown}),
        "lines": f"Type: {word}\nTarget: {shown}",
        "bold_lines": f"**Edit type:** {word}\n**Target:** {shown}",
        "bare": f"{edit_type}: {shown}",
    }[form]
    if before and form in ("lines", "bold_lines", "bare"):
        before = before.rstrip(" ") + "\n"  # labelled lines start their own line
    reply = thinking + before + body + after
    assert _value(parse_edit_target(reply)) == EditTarget(edit_type, target)  # type: ignore[arg-type]


_SCORE_FORMS: dict[str, Callable[[str, str], str]] = {
    "plain": lambda name, v: f"{name}: {v}",
    "bold_name": lambda name, v: f"**{name}**: {v}",
    "bold_colon": lambda name, v: f"**{name}:** {v}",
    "equals": lambda name, v: f"{name} = {v}",
    "score_word": lambda name, v: f"{name} score: {v}",
    "bullet_fraction": lambda name, v: f"- {name}: {v}/1",
    "bold_value": lambda name, v: f"{name}: **{v}**",
}
_BINARY_VALUES = {
    "digit": lambda v: str(v),
    "float": lambda v: f"{v}.0",
    "word": lambda v: "yes" if v else "no",
}


@settings(max_examples=300, deadline=None)
@given(
    ac=st.integers(0, 1),
    ef=st.integers(0, 1),
    ac_reason=_sentence,
    ef_reason=_sentence,
    old_names=st.booleans(),
    style=st.sampled_from(sorted(_SCORE_FORMS)),
    value_style=st.sampled_from(sorted(_BINARY_VALUES)),
    one_line=st.booleans(),
    ccs_kind=st.sampled_from(["right", "wrong", "absent"]),
    restated=st.booleans(),
    thinking=_THINKING,
    before=_BEFORE,
)
def test_binary_judgement_round_trip(
    ac: int,
    ef: int,
    ac_reason: str,
    ef_reason: str,
    old_names: bool,
    style: str,
    value_style: str,
    one_line: bool,
    ccs_kind: str,
    restated: bool,
    thinking: str,
    before: str,
) -> None:
    a_name, e_name = ("PCS", "NCC") if old_names else ("AC", "EF")
    fmt, val = _SCORE_FORMS[style], _BINARY_VALUES[value_style]
    if style == "bullet_fraction":
        val = _BINARY_VALUES["digit"]
    scores = [fmt(a_name, val(ac)), fmt(e_name, val(ef))]
    model_ccs = {"right": ac * ef, "wrong": 1 - ac * ef, "absent": None}[ccs_kind]
    if model_ccs is not None:
        scores.append(fmt("CCS", val(model_ccs)))
    block = " / ".join(scores) if one_line else "\n".join(scores)
    draft = f"First impression: {a_name}: {1 - ac}\n\n" if restated else ""
    reply = (
        f"{thinking}{before}{draft}{a_name}_REASON: {ac_reason}\n{e_name}_REASON: {ef_reason}\n"
        f"FINAL SCORES\n{block}"
    )
    judgement = _value(parse_binary_judgement(reply))
    assert isinstance(judgement, BinaryJudgement)
    assert (judgement.ac, judgement.ef, judgement.ccs) == (ac, ef, ac * ef)
    assert (judgement.ac_reason, judgement.ef_reason) == (ac_reason, ef_reason)
    assert ("disagrees" in judgement.note) == (ccs_kind == "wrong")
    assert (f"AC stated with different values; the verdict's ({ac}) was used" in judgement.note) == restated


_GRADED_FORMS: list[Callable[[int], str]] = [
    lambda s: f"SCORE: {s}",
    lambda s: f"Score: {s}/5",
    lambda s: f"**Score:** {s}",
    lambda s: f"**Score**: {s}",
    lambda s: f"Final score: {s}",
    lambda s: f"Score = {s}",
    lambda s: f"Rating: {s} out of 5",
    lambda s: f"SCORE: {s}.0",
]


@settings(max_examples=200, deadline=None)
@given(
    score=st.integers(1, 5),
    draft=st.none() | st.integers(1, 5),
    form=st.sampled_from(range(len(_GRADED_FORMS))),
    reason=_sentence,
    thinking=_THINKING,
    before=_BEFORE,
)
def test_graded_judgement_round_trip(
    score: int, draft: int | None, form: int, reason: str, thinking: str, before: str
) -> None:
    render = _GRADED_FORMS[form]
    prefix = f"My first guess was {render(draft)}, but let me reconsider.\n\n" if draft else ""
    reply = f"{thinking}{before}{prefix}REASON: {reason}\n{render(score)}"
    assert _value(parse_graded_judgement(reply)) == GradedJudgement(
        score=score, normalised=(score - 1) / 4, reason=reason
    )


@settings(max_examples=100, deadline=None)
@given(score=st.integers(-20, 20).filter(lambda s: not 1 <= s <= 5), form=st.sampled_from([0, 2, 4, 5]))
def test_graded_judgement_out_of_range(score: int, form: int) -> None:
    assert _reason(parse_graded_judgement(_GRADED_FORMS[form](score))) == f"score {score} outside 1–5"


# ---------------------------------------------------------------------------------------------
# (c) the verdict is the last complete block: commentary, quotes, scales and echoes never count
# ---------------------------------------------------------------------------------------------

_BINARY_COMMENTARY: list[Callable[[int, int], str]] = [
    lambda a, e: f"(had the explanation cited the old feature I would have given EF: {e})",
    lambda a, e: f'An earlier judge wrote "PCS: {a} NCC: {e}", which I disagree with.',
    lambda a, e: f"(For comparison, AC: {a}, EF: {e} would mean full consistency.)",
    lambda a, e: f"I was tempted to say AC: {a}.",
    lambda a, e: "Confidence score: 0.9",
    lambda a, e: f"“AC: {a} EF: {e}” is what the rubric's example shows.",
]
_SCALES = [
    "I must give AC: 0 or 1 and EF: 0 or 1.",
    "The format is AC: <0 or 1>, EF: <0 or 1>, CCS: <AC times EF>.",
    "Scores are AC: [0 or 1] and EF: [0 or 1].",
    "Each of AC: 0-1 and EF: 0–1 is binary.",
]


@settings(max_examples=200, deadline=None)
@given(
    ac=st.integers(0, 1),
    ef=st.integers(0, 1),
    wrong=st.tuples(st.integers(0, 1), st.integers(0, 1)),
    commentary=st.lists(st.sampled_from(range(len(_BINARY_COMMENTARY))), max_size=3),
    scale=st.none() | st.sampled_from(_SCALES),
    style=st.sampled_from(sorted(_SCORE_FORMS)),
    thinking=_THINKING,
)
def test_commentary_quotes_and_scales_never_override_the_binary_verdict(
    ac: int,
    ef: int,
    wrong: tuple[int, int],
    commentary: list[int],
    scale: str | None,
    style: str,
    thinking: str,
) -> None:
    fmt = _SCORE_FORMS[style]
    block = "\n".join([fmt("AC", str(ac)), fmt("EF", str(ef)), fmt("CCS", str(ac * ef))])
    after = "\n".join(_BINARY_COMMENTARY[i](*wrong) for i in commentary)
    reply = f"{thinking}{scale or ''}\nAC_REASON: r\nEF_REASON: r\nFINAL SCORES\n{block}\n\n{after}"
    judgement = _value(parse_binary_judgement(reply, finish_reason="stop"))
    assert (judgement.ac, judgement.ef) == (ac, ef)
    if scale is not None:  # a scale alone is no verdict
        assert isinstance(parse_binary_judgement(scale, finish_reason="stop"), Unparsed)


_GRADED_COMMENTARY: list[Callable[[int], str]] = [
    lambda s: f"(If the explanation had named the new feature, this would have been score: {s}.)",
    lambda s: f'For reference, the rubric says "SCORE: {s}" is for another case.',
    lambda s: "Confidence score: 0.9",
    lambda s: f"Similarity score: 0.{s}",
]


@settings(max_examples=200, deadline=None)
@given(
    score=st.integers(1, 5),
    wrong=st.integers(1, 5),
    commentary=st.lists(st.sampled_from(range(len(_GRADED_COMMENTARY))), max_size=3),
    scale=st.sampled_from(["", "I have to give a score: 1 to 5.\n", "SCORE: <1 to 5>\n", "Score (1-5):\n"]),
    form=st.sampled_from(range(len(_GRADED_FORMS))),
)
def test_commentary_and_scales_never_override_the_graded_verdict(
    score: int, wrong: int, commentary: list[int], scale: str, form: int
) -> None:
    after = "\n".join(_GRADED_COMMENTARY[i](wrong) for i in commentary)
    reply = f"{scale}REASON: r\n{_GRADED_FORMS[form](score)}\n{after}"
    assert _value(parse_graded_judgement(reply, finish_reason="stop")).score == score


@pytest.mark.parametrize(
    "parse",
    [
        lambda t, f: parse_concepts(t, 2, finish_reason=f),
        lambda t, f: parse_instructions(t, 2, finish_reason=f),
        lambda t, f: parse_edit_target(t, finish_reason=f),
        lambda t, f: parse_binary_judgement(t, finish_reason=f),
        lambda t, f: parse_graded_judgement(t, finish_reason=f),
    ],
)
def test_a_reply_cut_at_the_token_limit_is_truncated_whatever_it_holds(parse: Callable) -> None:
    complete = (
        '["a red light"]\n[{"change": "remove the car"}]\n{"type": "ADD", "target": "dog"}\n'
        "AC: 1\nEF: 1\nSCORE: 5"
    )
    assert isinstance(parse(complete, "stop"), Parsed)
    cut = parse(complete, "length")
    assert isinstance(cut, Unparsed) and cut.kind == "truncated" and "token limit" in cut.reason
    refused = parse("", "content_filter")
    assert isinstance(refused, Unparsed) and refused.kind == "refused"
    no_verdict = parse("The picture shows a street.", None), parse("The picture shows a street.", "stop")
    assert [r.kind for r in no_verdict] == ["truncated", "malformed"]  # type: ignore[union-attr]
