"""The rule-based judge of the calibration world: AC, EF and the graded score from texts alone.

Part of the calibration instrument, not the product. Like the real judge it never sees images. It
reconstructs the original evidence from the cues the original explanation cites, applies the
edits (Change sentences of the calibration grammar) in order, derives the answer the edited scene
warrants with the world's rule table (its "world knowledge"), then scores:

- AC = 1 when the new answer equals that expected answer (an unchanged answer is fine when it is
  still the expected one). When the expected answer cannot be reconstructed — texts from outside
  the world, or an edit outside the grammar — AC = 0: the judge gives no credit it cannot check.
- EF = 1 when the new explanation cites nothing the edited scene contradicts: no altered
  (object, old value) and no removed object as present. Lines it cannot read as a cue are checked
  textually for the altered object together with its old value.
- graded (the holistic 1..5 rubric): 5 AC and EF with a cue still true; 4 AC and EF but generic;
  3 answer wrong but valid explanation and the answer moved; 2 right answer for the wrong reason,
  or a wrong unchanged answer with a valid explanation; 1 inertia (wrong answer, stale explanation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edct_task.calibration import world
from edct_task.calibration.instructions import SceneEdit, parse_change


@dataclass(frozen=True)
class Judgement:
    """The scores and one-line reasons of one judgement."""

    ac: int
    ef: int
    grade: int
    ac_reason: str
    ef_reason: str

    def binary_text(self) -> str:
        """The reply in the judge_binary format."""
        return (
            f"AC_REASON: {self.ac_reason}\nEF_REASON: {self.ef_reason}\nFINAL SCORES\n"
            f"AC: {self.ac}\nEF: {self.ef}\nCCS: {self.ac * self.ef}"
        )

    def graded_text(self) -> str:
        """The reply in the judge_graded format."""
        return f"REASON: {self.ac_reason} {self.ef_reason}\nSCORE: {self.grade}"


def split_edits(block: str) -> list[str]:
    """The Change sentences of an <edits> block: its ``Change:`` lines, else its numbered items."""
    changes = re.findall(r"^\s*(?:\d+[.)]\s*)?Change:\s*(.*)$", block, flags=re.M | re.I)
    if changes:
        return [c.strip() for c in changes]
    return world.split_items(block)


def _mentions_old(line: str, obj: str, attr: str, old: str) -> bool:
    t = line.lower()
    if obj.split()[-1] not in t:
        return False
    if attr == "presence":
        return old == "present" and not re.search(r"\b(no|not|empty|removed|absent|without)\b", t)
    return re.search(rf"\b{old}\b", t) is not None


def assess(
    question: str, answer: str, explanation: str, edits: str, new_answer: str, new_explanation: str
) -> Judgement:
    """Judge one chain step from the prompt's texts."""
    family = world.family_of_question(question)
    state = {c.key: c.value for c in world.parse_cues(explanation)}
    parsed: list[SceneEdit | None] = [parse_change(text) for text in split_edits(edits)]
    altered: list[tuple[str, str, str]] = []
    for edit in parsed:
        if edit is None:
            continue
        old = state.get((edit.obj, edit.attr), edit.old)
        if old is not None and old != edit.new:
            altered.append((edit.obj, edit.attr, old))
        state[(edit.obj, edit.attr)] = edit.new

    expected: str | None = None
    if family is not None and parsed and None not in parsed:
        keys = world.FAMILY_CUES[family]
        if all(k in state for k in keys):
            expected = world.rule(family, (state[keys[0]], state[keys[1]]))
    new_label = world.parse_answer(family, new_answer) if family else None
    old_label = world.parse_answer(family, answer) if family else None

    if expected is None:
        ac, ac_reason = 0, "The edited scene's answer cannot be reconstructed, so AC is unconfirmed."
    elif new_label == expected:
        ac, ac_reason = 1, f"The edited scene warrants '{expected}' and the new answer gives it."
    else:
        ac, ac_reason = 0, f"The edited scene warrants '{expected}', not {new_answer.strip()!r}."

    flags: list[str] = []
    grounded = False
    for item in world.split_items(new_explanation):
        cue = world.parse_cue(item)
        if cue is not None:
            if cue.key in state and state[cue.key] != cue.value:
                flags.append(item)
            else:
                grounded = grounded or cue.key in state
        elif any(_mentions_old(item, *a) for a in altered):
            flags.append(item)
    ef = 0 if flags else 1
    ef_reason = (
        f"The new explanation still relies on evidence the edits changed: {flags[0]!r}."
        if flags
        else "The new explanation cites only evidence that is still true after the edits."
    )

    if ac and ef:
        grade = 5 if grounded else 4
    elif ac:
        grade = 2
    elif ef:
        grade = 3 if new_label is not None and new_label != old_label else 2
    else:
        grade = 1
    return Judgement(ac, ef, grade, ac_reason, ef_reason)
