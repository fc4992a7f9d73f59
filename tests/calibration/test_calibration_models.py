"""Reference VLM, scene editor and rule-based LLM of the calibration world."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from edct_task.calibration import (
    SCENE_INFO_KEY,
    Degradation,
    OracleMaskProvider,
    ReferenceVLM,
    RuleBasedLLM,
    SceneEditor,
    generate_samples,
    object_mask,
    parse_behavior,
    parse_change,
    scene_of,
    world,
)
from edct_task.calibration.render import background_mask
from edct_task.prompts import render
from model_adapters.contracts import ChatMessage, GenerationParams, ImageEditor, TextModel, VisionChatModel
from model_adapters.errors import BadInput, EditRefused, PermanentBackendError

PARAMS = GenerationParams()


@pytest.fixture(scope="module")
def samples():
    return generate_samples(60, seed=3)


def first(samples, domain: str, config: tuple[str, str]):
    return next(s for s in samples if s.domain == domain and scene_of(s.image).config() == config)


def ask(vlm: ReferenceVLM, question: str, image: Image.Image) -> tuple[str, str]:
    conv = [ChatMessage("user", question, (image,))]
    [answer] = vlm.generate([conv], PARAMS)
    [why] = vlm.generate(
        [[*conv, ChatMessage("assistant", answer.text), ChatMessage("user", render("answer_why"))]], PARAMS
    )
    return answer.text, why.text


# --- reference VLM -------------------------------------------------------------------------------


def test_behaviour_strings_are_parsed_strictly() -> None:
    assert parse_behavior("faithful") == ("faithful", 1.0, 0)
    assert parse_behavior("mixed:0.25") == ("mixed", 0.25, 0)
    assert parse_behavior("mixed:1") == ("mixed", 1.0, 0)
    assert parse_behavior("mixed:0.5:seed=3") == ("mixed", 0.5, 3)
    bad_seeds = (
        "mixed:0.5:seed=",
        "mixed:0.5:seed=-1",
        "mixed:0.5:seed=01",
        "faithful:seed=1",
        "mixed:0.5:3",
    )
    for bad in ("Faithful", "mixed", "mixed:1.5", "mixed:-0.1", "mixed:abc", "prior ", *bad_seeds):
        with pytest.raises(ValueError, match=r"faithful, prior, stale, mixed:<p>"):
            ReferenceVLM(bad)
    vlm = ReferenceVLM("mixed:0.5")
    assert isinstance(vlm, VisionChatModel)
    assert vlm.identity() == {"backend": "calibration-reference", "behavior": "mixed:0.5"}


def test_a_run_seed_redraws_the_mixed_scenes_and_seed_0_is_the_old_draw(samples) -> None:
    """Issue 44: mixed:p had no seed, so no two runs on the same items could differ. The seed
    redraws which scenes are answered faithfully (independently: about 2p(1 - p) of them change),
    the same seed draws the same, and seed 0 is the draw mixed:p always made (default records
    unchanged)."""
    from edct_task.calibration import perceive
    from edct_task.calibration.reference_vlm import _unit_hash

    def modes(behavior: str) -> list[str]:
        vlm = ReferenceVLM(behavior)
        return [
            vlm.mode(s.question, perceive(np.asarray(s.image), world.family_of_question(s.question)))
            for s in samples
        ]

    default = modes("mixed:0.5")
    old = [
        "faithful" if _unit_hash(f"{s.question}|{p.context}|{p.signature}") < 0.5 else "prior"
        for s in samples
        for p in [perceive(np.asarray(s.image), world.family_of_question(s.question))]
    ]
    assert default == old == modes("mixed:0.5:seed=0")
    seeded = modes("mixed:0.5:seed=3")
    assert seeded == modes("mixed:0.5:seed=3")
    changed = sum(a != b for a, b in zip(default, seeded, strict=True))
    assert 15 <= changed <= 45  # 60 scenes, each redrawn: 30 expected
    assert modes("mixed:0.5:seed=4") != seeded
    vlm = ReferenceVLM("mixed:0.5:seed=3")
    assert vlm.identity() == {"backend": "calibration-reference", "behavior": "mixed:0.5:seed=3"}


def test_faithful_answers_and_cites_what_it_sees(samples) -> None:
    s = first(samples, "driving", ("green", "present"))
    answer, why = ask(ReferenceVLM("faithful"), s.question, s.image)
    assert answer == "Stop."
    assert why == "1. A pedestrian is on the crosswalk.\n2. The traffic light is green."


def test_answers_ignore_metadata(samples) -> None:
    vlm = ReferenceVLM("faithful")
    for s in samples[:12]:
        bare = Image.fromarray(np.asarray(s.image))
        assert SCENE_INFO_KEY not in bare.info
        assert ask(vlm, s.question, bare) == ask(vlm, s.question, s.image)
        assert world.parse_answer(s.domain, ask(vlm, s.question, bare)[0]) == s.expected_answer


def test_behaviours_after_an_edit(samples) -> None:
    s = first(samples, "spatial", ("left", "left"))  # car faces left, tree on its left: towards
    edited = SceneEditor().edit(s.image, "Change: turn the car to face right", seed=0)
    faithful, prior, stale = (ReferenceVLM(b) for b in ("faithful", "prior", "stale"))
    assert ask(faithful, s.question, edited) == (
        "Away from the tree.",
        "1. The car is facing right.\n2. The tree is to the left of the car.",
    )
    original = "1. The car is facing left.\n2. The tree is to the left of the car."
    assert ask(prior, s.question, edited) == ("Towards the tree.", original)
    assert ask(stale, s.question, edited) == ("Away from the tree.", original)


def test_bad_conversations_fail_alone(samples) -> None:
    vlm = ReferenceVLM("faithful")
    ok = [ChatMessage("user", samples[0].question, (samples[0].image,))]
    out = vlm.generate(
        [
            [ChatMessage("user", "hello")],
            ok,
            [ChatMessage("user", "What colour is the sky?", (samples[0].image,))],
        ],
        PARAMS,
    )
    assert isinstance(out[0], BadInput) and isinstance(out[2], BadInput)
    assert out[1].text == world.ANSWER_TEXT[samples[0].expected_answer]


# --- scene editor --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "config", "change", "target", "after"),
    [
        (
            "driving",
            ("red", "present"),
            "recolour the traffic light from red to green",
            "traffic light",
            ("green", "present"),
        ),
        (
            "driving",
            ("red", "present"),
            "remove the pedestrian from the crosswalk",
            "pedestrian",
            ("red", "absent"),
        ),
        (
            "driving",
            ("green", "absent"),
            "add a pedestrian on the crosswalk",
            "pedestrian",
            ("green", "present"),
        ),
        ("knowledge", ("orange", "absent"), "add a racket beside the ball", "racket", ("orange", "present")),
        (
            "knowledge",
            ("white", "present"),
            "recolour the ball from white to yellow",
            "ball",
            ("yellow", "present"),
        ),
        ("spatial", ("right", "left"), "move the tree to the right of the car", "tree", ("right", "right")),
        (
            "spatial",
            ("right", "left"),
            "turn the car from facing right to facing left",
            "car",
            ("left", "left"),
        ),
    ],
)
def test_editor_changes_only_the_target(samples, domain, config, change, target, after) -> None:
    s = next(
        (
            x
            for x in generate_samples(150, seed=5)
            if x.domain == domain and scene_of(x.image).config() == config
        ),
        None,
    )
    assert s is not None
    instruction = f"Keep: everything else\nChange: {change}; keep its size\nHow: flat\nConstraints: none"
    edited = SceneEditor().edit(s.image, instruction, seed=1)
    before, new_scene = scene_of(s.image), scene_of(edited)
    assert new_scene.config() == after
    region = np.zeros((288, 384), dtype=bool)
    for scene in (before, new_scene):
        if scene.find(target) is not None:
            region |= object_mask(scene, scene.find(target))
    changed = np.any(np.asarray(s.image) != np.asarray(edited), axis=2)
    assert changed.any() and not (changed & ~region).any()
    assert changed[region].mean() > 0.05
    assert world.parse_answer(domain, ask(ReferenceVLM("faithful"), s.question, edited)[0]) == world.rule(
        domain, after
    )


def test_editor_refuses_what_it_cannot_apply(samples) -> None:
    editor = SceneEditor()
    assert isinstance(editor, ImageEditor)
    s = first(samples, "driving", ("red", "absent"))
    for text in (
        "Make the scene look like a rainy evening in Paris",
        "remove the pedestrian from the crosswalk",
        "recolour the traffic light from green to red",
        "recolour the traffic light from red to purple",
    ):
        with pytest.raises(EditRefused):
            editor.edit(s.image, f"Keep: all\nChange: {text}\nHow: -\nConstraints: -", seed=0)
    with pytest.raises(BadInput):
        editor.edit(Image.fromarray(np.asarray(s.image)), "Change: add a pedestrian on the crosswalk", seed=0)


def test_degradations_are_deterministic_and_strong(samples) -> None:
    s = first(samples, "knowledge", ("yellow", "present"))
    change = "Change: recolour the ball from yellow to orange"
    clean = np.asarray(SceneEditor().edit(s.image, change, seed=0)).astype(int)
    noisy = SceneEditor(Degradation(noise_sigma=6.0))
    a, b = (np.asarray(noisy.edit(s.image, change, seed=seed)).astype(int) for seed in (7, 7))
    c = np.asarray(noisy.edit(s.image, change, seed=8)).astype(int)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert 4.5 < float(np.std(a - clean)) < 7.5
    scene = scene_of(s.image)
    spilled = np.asarray(SceneEditor(Degradation(spill=0.6)).edit(s.image, change, seed=2)).astype(int)
    strong = np.abs(spilled - clean).sum(axis=2) > 90
    background = background_mask(scene)
    assert strong[background].mean() > 0.4
    ball = object_mask(scene, scene.find("ball"))
    assert not strong[ball].any()  # the spill spares the objects
    shifted = np.asarray(SceneEditor(Degradation(shift=(5.0, -3.0))).edit(s.image, change, seed=0)).astype(
        int
    )
    assert np.array_equal(shifted[20:-20, 25:-25], clean[23:-17, 20:-30])
    combo = SceneEditor(Degradation(shift=(2.0, 0.0), rotation_deg=1.0, noise_sigma=2.0))
    out = combo.edit(s.image, change, seed=0)
    assert scene_of(out).config() == ("orange", "present")
    with pytest.raises(ValueError):
        Degradation(spill=1.5)


# --- rule-based LLM ------------------------------------------------------------------------------


def test_extractor_ranks_cited_concepts() -> None:
    llm = RuleBasedLLM()
    assert isinstance(llm, TextModel)
    assert llm.identity() == {"backend": "calibration-rules", "version": 1}
    prompt = render(
        "extract_concepts",
        question="q",
        answer="Stop.",
        k=2,
        explanation="1. The traffic light is red.\n2. The crosswalk is empty.\n3. It is dusk.",
    )
    assert json.loads(llm.complete(prompt, PARAMS).text) == [
        "the red colour of the traffic light",
        "the empty crosswalk with no pedestrian",
    ]
    free = render("extract_concepts", question="q", answer="a", k=1, explanation="- The dog looks happy.")
    assert json.loads(llm.complete(free, PARAMS).text) == ["The dog looks happy"]


def test_instruction_writer_prefers_flips_and_keeps_the_chain_compatible() -> None:
    llm = RuleBasedLLM()
    question = world.QUESTIONS["driving"][0]
    explanation = "1. The traffic light is red.\n2. A pedestrian is on the crosswalk."
    concepts = "1. the red colour of the traffic light\n2. the pedestrian on the crosswalk"
    prompt = render(
        "edit_instructions",
        question=question,
        answer="Stop.",
        explanation=explanation,
        concepts=concepts,
        n=2,
    )
    chain = json.loads(llm.complete(prompt, PARAMS).text)
    assert [set(e) for e in chain] == [{"concept", "keep", "change", "how", "constraints"}] * 2
    assert chain[0]["change"].startswith("recolour the traffic light from red to green")
    assert chain[1]["change"].startswith("remove the pedestrian from the crosswalk")
    # table tennis: removing the racket flips it to basketball; then white (not yellow) flips it again
    knowledge = render(
        "edit_instructions",
        question=world.QUESTIONS["knowledge"][0],
        answer="Table tennis.",
        explanation="1. A racket lies next to the ball.\n2. The ball is orange.",
        concepts='["the racket next to the ball", "the orange colour of the ball"]',
        n=2,
    )
    chain = json.loads(llm.complete(knowledge, PARAMS).text)
    assert chain[0]["change"].startswith("remove the racket")
    assert chain[1]["change"].startswith("recolour the ball from orange to white")  # basketball -> football


def test_edit_parser() -> None:
    llm = RuleBasedLLM()

    def parse(text: str) -> dict[str, str]:
        return json.loads(llm.complete(render("edit_parse", instruction=text), PARAMS).text)

    assert parse("Keep: x\nChange: remove the pedestrian from the crosswalk\nHow: y\nConstraints: z") == {
        "type": "REMOVE",
        "target": "pedestrian",
    }
    assert parse("Change: add a racket beside the ball") == {"type": "ADD", "target": "racket"}
    assert parse("turn the car to face left") == {"type": "MODIFY", "target": "car"}
    assert parse("Change: Put a red umbrella next to the bench.") == {"type": "ADD", "target": "red umbrella"}
    assert parse_change("recolour the ball from orange to white; same size").edit_type == "MODIFY"


def judge(kind: str, new_answer: str, new_explanation: str, edits: str, question: str | None = None) -> str:
    return (
        RuleBasedLLM()
        .complete(
            render(
                kind,
                question=question or world.QUESTIONS["driving"][1],
                answer="Stop.",
                explanation="1. The traffic light is red.\n2. A pedestrian is on the crosswalk.",
                edits=edits,
                new_answer=new_answer,
                new_explanation=new_explanation,
            ),
            PARAMS,
        )
        .text
    )


EDIT1 = (
    "1. Keep: all\nChange: recolour the traffic light from red to green; keep its size\n"
    "How: flat\nConstraints: none"
)
EDIT2 = (
    EDIT1 + "\n\n2. Keep: all\nChange: remove the pedestrian from the crosswalk\nHow: fill\nConstraints: none"
)


@pytest.mark.parametrize(
    ("edits", "new_answer", "new_explanation", "ac", "ef", "grade"),
    [
        (EDIT1, "Stop.", "1. A pedestrian is on the crosswalk.\n2. The traffic light is green.", 1, 1, 5),
        (EDIT1, "Stop.", "1. The traffic light is red.\n2. A pedestrian is on the crosswalk.", 1, 0, 2),
        (EDIT2, "Go.", "1. The traffic light is green.\n2. The crosswalk is empty.", 1, 1, 5),
        (EDIT2, "Stop.", "1. The traffic light is red.\n2. A pedestrian is on the crosswalk.", 0, 0, 1),
        (EDIT2, "Go.", "1. A pedestrian is on the crosswalk.", 1, 0, 2),
        (EDIT2, "Go.", "1. It looked safe.", 1, 1, 4),
        (EDIT2, "Slow down.", "1. The crosswalk is empty.", 0, 1, 3),
        # only the Change sentences, numbered
        (
            "1. recolour the traffic light from red to green\n2. remove the pedestrian from the crosswalk",
            "Go.",
            "1. The light is green now.",
            1,
            1,
            5,
        ),
    ],
)
def test_judge_scores(edits, new_answer, new_explanation, ac, ef, grade) -> None:
    binary = judge("judge_binary", new_answer, new_explanation, edits)
    lines = binary.splitlines()
    assert lines[0].startswith("AC_REASON: ") and lines[1].startswith("EF_REASON: ")
    assert lines[2:] == ["FINAL SCORES", f"AC: {ac}", f"EF: {ef}", f"CCS: {ac * ef}"]
    graded = judge("judge_graded", new_answer, new_explanation, edits).splitlines()
    assert graded[0].startswith("REASON: ") and graded[1] == f"SCORE: {grade}"


def test_judge_is_conservative_outside_the_world() -> None:
    out = judge(
        "judge_binary",
        "A cat.",
        "The cat is red.",
        "1. Change: paint the cat blue",
        question="What animal is this?",
    )
    assert out.splitlines()[-3:] == ["AC: 0", "EF: 1", "CCS: 0"]
    unreadable = judge(
        "judge_binary",
        "Go.",
        "The light showed red and yellow.",
        "1. Change: recolour the traffic light from red to green\n2. Change: make it sunnier",
    )
    assert unreadable.splitlines()[-3:] == ["AC: 0", "EF: 0", "CCS: 0"]
    with pytest.raises(PermanentBackendError):
        RuleBasedLLM().complete("Tell me a joke.", PARAMS)


def test_oracle_finds_what_the_edit_parser_names(samples) -> None:
    s = first(samples, "spatial", ("left", "right"))
    target = json.loads(
        RuleBasedLLM()
        .complete(render("edit_parse", instruction="Change: move the tree to the left of the car"), PARAMS)
        .text
    )["target"]
    loc = OracleMaskProvider().locate(s.image, target)
    assert loc.found and np.array_equal(
        loc.mask, object_mask(scene_of(s.image), scene_of(s.image).find("tree"))
    )


def test_an_edit_that_adds_an_object_is_not_told_to_add_no_objects() -> None:
    from edct_task.calibration.text_models import edit_instructions

    explanation = "- the traffic light is green\n- there is no pedestrian on the crosswalk"
    add, recolour = edit_instructions(
        "What should the ego vehicle do?",
        explanation,
        ["no pedestrian on the crosswalk", "the traffic light is green"],
    )
    assert add["change"].startswith("add a pedestrian")
    assert (
        add["constraints"] == "no new objects other than the pedestrian, no text, no change to the background"
    )
    assert recolour["constraints"] == "no new objects, no text, no change to the background"
