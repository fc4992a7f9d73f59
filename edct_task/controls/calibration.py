"""Known-answer controls in the calibration world's words, made from its rule table.

Each judge control is a chain step of one edit whose correct verdict follows from the world's
rules and the graded rubric: the edit changes a cue (and so the warranted answer, or not), and
the re-query's answer and explanation are chosen to be right or wrong in a known way. The
extractor's controls are explanations citing two cues; the edit parser's, the world's own edit
sentences. Nothing here asks the rule-based judge: the truth is the construction's.
"""

from __future__ import annotations

from edct_task.calibration import world
from edct_task.calibration.instructions import write_change
from edct_task.calibration.text_models import edit_constraints
from edct_task.core.records import EditInstruction
from edct_task.engine.controls import (
    ConceptsControl,
    ControlItem,
    EditParseControl,
    JudgeControl,
)

DOMAIN = "calibration"
GENERIC = "The answer follows from what the picture shows."


def _explain(cues: tuple[world.Cue, ...]) -> str:
    return "\n".join(f"{i}. {world.sentence(c)}" for i, c in enumerate(cues, 1))


def _instruction(cue: world.Cue, new: str) -> EditInstruction:
    change = write_change(cue, new)
    return EditInstruction(
        concept=world.concept(cue),
        keep=f"everything but the {cue.obj}: background, other objects, framing and lighting",
        change=change,
        how="flat drawn style matching the scene, same lighting and perspective",
        constraints=edit_constraints(change, cue.obj),
    )


def _edits(family: str) -> list[tuple[world.Config, world.Cue, str, bool]]:
    """``(config, edited cue, new value, the answer changes)`` for every single-cue edit."""
    out = []
    for config in world.configs(family):
        for cue in world.cited_order(family, config):
            for new in world.CUE_VALUES[cue.key]:
                if new == cue.value:
                    continue
                a, b = world.FAMILY_CUES[family]
                state = dict(zip((a, b), config, strict=True)) | {cue.key: new}
                after = world.rule(family, (state[a], state[b]))
                out.append((config, cue, new, after != world.rule(family, config)))
    return out


def judge_controls() -> list[ControlItem]:
    """Judge steps of every level: 5 (answer and explanation follow the edit), 4 (right, generic),
    3 (explanation valid, but the answer drifted where the edit did not warrant it), 2 (right
    answer, explanation cites the altered cue), 1 (inertia: old answer and old explanation)."""
    items: list[ControlItem] = []
    for family in world.FAMILIES:
        question = world.QUESTIONS[family][0]
        for n, (config, cue, new, changes) in enumerate(_edits(family)):
            before = world.cited_order(family, config)
            after_cues = tuple(world.Cue(c.obj, c.attr, new) if c.key == cue.key else c for c in before)
            a, b = world.FAMILY_CUES[family]
            state = dict(zip((a, b), config, strict=True)) | {cue.key: new}
            old_label = world.rule(family, config)
            new_label = world.rule(family, (state[a], state[b]))
            drift = next((x for x in world.ANSWERS[family] if x not in (old_label, new_label)), None)
            base = {
                "question": question,
                "answer": world.ANSWER_TEXT[old_label],
                "explanation": _explain(before),
                "edits": (_instruction(cue, new),),
            }
            cases: list[tuple[str, str, int, int, int]] = [
                (world.ANSWER_TEXT[new_label], _explain(after_cues), 1, 1, 5),
                (world.ANSWER_TEXT[new_label], GENERIC, 1, 1, 4),
                (world.ANSWER_TEXT[new_label], _explain(before), 1, 0, 2),
            ]
            if changes:
                cases.append((world.ANSWER_TEXT[old_label], _explain(before), 0, 0, 1))
            elif drift is not None:
                cases.append((world.ANSWER_TEXT[drift], _explain(after_cues), 0, 1, 3))
            for new_answer, new_explanation, ac, ef, level in cases:
                items.append(
                    ControlItem(
                        id=f"calibration-judge-{family}-{n:02d}-{level}",
                        domain=DOMAIN,
                        body=JudgeControl(
                            **base,  # type: ignore[arg-type]
                            new_answer=new_answer,
                            new_explanation=new_explanation,
                            ac=ac,
                            ef=ef,
                            level=level,
                        ),
                    )
                )
    return items


def concept_controls() -> list[ControlItem]:
    """Explanations citing a configuration's two cues: the concepts are those cues."""
    items = []
    for family in world.FAMILIES:
        for n, config in enumerate(world.configs(family)):
            cues = world.cited_order(family, config)
            expected = tuple(_cue_words(c) for c in cues)
            items.append(
                ControlItem(
                    id=f"calibration-concepts-{family}-{n:02d}",
                    domain=DOMAIN,
                    body=ConceptsControl(
                        question=world.QUESTIONS[family][n % len(world.QUESTIONS[family])],
                        answer=world.ANSWER_TEXT[world.rule(family, config)],
                        explanation=_explain(cues),
                        concepts=expected,
                    ),
                )
            )
    return items


def _cue_words(cue: world.Cue) -> tuple[str, ...]:
    if cue.attr == "presence":
        return (cue.obj,)
    return (cue.obj, cue.value)


def edit_parse_controls() -> list[ControlItem]:
    """The world's edit sentences (recolour, add, remove, turn, move) with their type and object."""
    items = []
    seen: set[str] = set()
    for family in world.FAMILIES:
        for _, cue, new, _ in _edits(family):
            instruction = _instruction(cue, new)
            if instruction.change in seen:
                continue
            seen.add(instruction.change)
            kind = "MODIFY" if cue.attr != "presence" else ("ADD" if new == "present" else "REMOVE")
            items.append(
                ControlItem(
                    id=f"calibration-edit-{len(items):02d}",
                    domain=DOMAIN,
                    body=EditParseControl(instruction=instruction, edit_type=kind, target=(cue.obj,)),
                )
            )
    return items
