"""The rule-based edit parser (the fallback when no edit-parser LLM is configured) and the
``EditTarget`` record."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.edit_parsing import (
    EDIT_TYPES,
    EditTarget,
    edit_type_from_word,
    rule_based_edit_target,
)


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("recolour the traffic light from red to green", EditTarget("MODIFY", "traffic light")),
        ("Recolor the traffic light from red to green.", EditTarget("MODIFY", "traffic light")),
        ("remove the pedestrian from the crosswalk", EditTarget("REMOVE", "pedestrian")),
        ("add a red umbrella to the left of the man", EditTarget("ADD", "red umbrella")),
        ("Change the colour of the traffic light to green", EditTarget("MODIFY", "traffic light")),
        ("Change the traffic light's colour to green", EditTarget("MODIFY", "traffic light")),
        ("Replace the red car with a blue truck", EditTarget("MODIFY", "red car")),
        ("Make the red car blue", EditTarget("MODIFY", "red car")),
        ("Turn the traffic light green", EditTarget("MODIFY", "traffic light")),
        ("Make the door open", EditTarget("MODIFY", "door")),
        ("Make the truck larger", EditTarget("MODIFY", "truck")),
        ("Paint the front door", EditTarget("MODIFY", "front door")),
        ("Take out the trash can", EditTarget("REMOVE", "trash can")),
        ("Get rid of the bicycle near the wall", EditTarget("REMOVE", "bicycle")),
        ("Erase all the cars, keep the road", EditTarget("REMOVE", "cars")),
        ("Delete the stop sign.", EditTarget("REMOVE", "stop sign")),
        ("Put a dog on the sofa", EditTarget("ADD", "dog")),
        ("Insert a second car behind the bus", EditTarget("ADD", "second car")),
        ("Place a small wooden bench next to the tree", EditTarget("ADD", "small wooden bench")),
        ("Introduce a cyclist into the bike lane", EditTarget("ADD", "cyclist")),
        ("Carefully remove the parked van so the curb is visible", EditTarget("REMOVE", "parked van")),
        ("Rotate the pickup truck so that it faces left", EditTarget("MODIFY", "pickup truck")),
        ("the stop sign", EditTarget("MODIFY", "stop sign")),
    ],
)
def test_rule_based_examples(instruction: str, expected: EditTarget) -> None:
    assert rule_based_edit_target(instruction) == expected


def test_reads_the_change_line_of_a_four_part_instruction() -> None:
    # Keep/Constraints mention other verbs ("remove", "add") that must not decide the type.
    text = (
        "Keep: do not remove or add anything else; the road and the sky stay as they are\n"
        "Change: recolour the traffic light from red to green\n"
        "How: match the lighting and the glow of the lamp\n"
        "Constraints: do not add text or new objects"
    )
    assert rule_based_edit_target(text) == EditTarget("MODIFY", "traffic light")


def test_reads_a_markdown_change_line() -> None:
    text = "- **Keep:** everything\n- **Change:** remove the pedestrian from the crosswalk\n- **How:** fill"
    assert rule_based_edit_target(text) == EditTarget("REMOVE", "pedestrian")


@pytest.mark.parametrize("instruction", ["", "   ", "Change:", "remove the", "add a to the left", "!!!"])
def test_no_target_gives_none(instruction: str) -> None:
    assert rule_based_edit_target(instruction) is None


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("ADD", "ADD"),
        ("add", "ADD"),
        ("Insert", "ADD"),
        ("insertion", "ADD"),
        ("introduce", "ADD"),
        ("MODIFY", "MODIFY"),
        ("modification", "MODIFY"),
        ("change", "MODIFY"),
        ("Replace", "MODIFY"),
        ("recolor", "MODIFY"),
        ("Recolour", "MODIFY"),
        ("alter", "MODIFY"),
        ("REMOVE", "REMOVE"),
        ("removal", "REMOVE"),
        ("delete", "REMOVE"),
        ("Erase", "REMOVE"),
        ('"**REMOVE**"', "REMOVE"),
        ("", None),
        ("keep", None),
        ("42", None),
    ],
)
def test_edit_type_from_word(word: str, expected: str | None) -> None:
    assert edit_type_from_word(word) == expected


def test_edit_target_is_frozen_and_typed() -> None:
    target = EditTarget("ADD", "umbrella")
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.target = "x"  # type: ignore[misc]
    assert EDIT_TYPES == ("ADD", "MODIFY", "REMOVE")


# ---------------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------------

_NOUNS = [
    "umbrella",
    "car",
    "truck",
    "pedestrian",
    "bicycle",
    "bench",
    "dog",
    "lamp",
    "cone",
    "sign",
    "mailbox",
    "hydrant",
    "bus",
    "helmet",
    "backpack",
    "tree",
    "kite",
    "vase",
]
_ADJECTIVES = ["red", "small", "wooden", "striped", "tall", "metal", "yellow", "broken"]
_VERBS = {
    "ADD": ["Add", "add", "Insert", "Place", "Put", "Introduce"],
    "REMOVE": ["Remove", "remove", "Delete", "Erase", "Take out", "Get rid of", "Eliminate"],
    "MODIFY": ["Recolour", "recolor", "Change", "Replace", "Swap", "Convert", "Alter", "Move"],
}
_TAILS = {
    "ADD": [
        "",
        ".",
        " to the left of the man",
        " next to the {n}",
        " on the {n}, matching its scale",
        " behind the {n}",
    ],
    "REMOVE": [
        "",
        ".",
        " from the scene",
        " from the crosswalk",
        ", leaving the road intact",
        " and fill in the background",
    ],
    "MODIFY": [
        "",
        ".",
        " from red to green",
        " to blue",
        " with a {n}",
        " into a {n}",
        " so that it faces the camera",
    ],
}


@st.composite
def _instructions(draw: st.DrawFn) -> tuple[str, EditTarget]:
    edit_type = draw(st.sampled_from(EDIT_TYPES))
    verb = draw(st.sampled_from(_VERBS[edit_type]))
    adjectives = draw(st.lists(st.sampled_from(_ADJECTIVES), max_size=2, unique=True))
    noun = draw(st.sampled_from(_NOUNS))
    target = " ".join([*adjectives, noun])
    article = draw(st.sampled_from(["the ", "a ", "an ", "", "all the "]))
    tail = draw(st.sampled_from(_TAILS[edit_type])).format(n=draw(st.sampled_from(_NOUNS)))
    change = f"{verb} {article}{target}{tail}"
    form = draw(st.sampled_from(["bare", "four_part", "markdown"]))
    if form == "four_part":
        text = (
            "Keep: do not remove, add or replace anything else\n"
            f"Change: {change}\nHow: match the lighting\nConstraints: do not add text"
        )
    elif form == "markdown":
        text = f"**Keep:** the rest of the scene\n**Change:** {change}\n**How:** blend in"
    else:
        text = change
    return text, EditTarget(edit_type, target)


@settings(max_examples=200, deadline=None)
@given(_instructions())
def test_rule_based_round_trip(case: tuple[str, EditTarget]) -> None:
    text, expected = case
    assert rule_based_edit_target(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300) | st.text(alphabet="add remove the a of to Change: **\n'’s,.", max_size=120))
def test_rule_based_never_raises(text: str) -> None:
    result = rule_based_edit_target(text)
    assert result is None or (result.type in EDIT_TYPES and result.target.strip() == result.target != "")
