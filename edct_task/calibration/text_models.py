"""Rule-based text "LLM" of the calibration world: extractor, instruction writer, edit parser, judge.

Part of the calibration instrument, not the product. ``RuleBasedLLM`` takes the same rendered
prompts as a real LLM (``prompts.match_template`` matches the whole prompt against each
template's text and gives its fields, so no dataset text can pass for another template) and
replies in exactly the formats the templates ask for. It is deterministic. Texts from outside the
world still get replies in the right format (free concepts, instructions the scene editor will
refuse, conservative judgements); a prompt from no known template raises
``PermanentBackendError``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from edct_task.calibration import world
from edct_task.calibration.instructions import change_line, parse_change, write_change
from edct_task.calibration.judge import assess
from edct_task.prompts import match_template
from model_adapters.contracts import Completion, GenerationParams
from model_adapters.errors import PermanentBackendError

VERSION = 1


def _list(text: str) -> list[str]:
    """A JSON array of strings, or the items of a numbered/bulleted list."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return world.split_items(text)
    return [str(x) for x in data] if isinstance(data, list) else world.split_items(text)


def extract_concepts(explanation: str, k: int) -> list[str]:
    """At most k concepts, ranked as cited: world cues as concept phrases, other lines verbatim."""
    out: list[str] = []
    for item in world.split_items(explanation):
        cue = world.parse_cue(item)
        phrase = world.concept(cue) if cue is not None else item.rstrip(".").strip()
        if phrase and phrase not in out:
            out.append(phrase)
    return out[:k]


def _choose(family: str | None, state: dict[world.CueKey, str], cue: world.Cue) -> str:
    """The new value for a cue: the first alternative that flips the answer, else the first."""
    options = world.ALTERNATIVES.get(cue.key, {}).get(cue.value)
    if options is None:
        options = tuple(v for v in world.CUE_VALUES[cue.key] if v != cue.value)
    if family is None or not all(k in state for k in world.FAMILY_CUES[family]):
        return options[0]
    keys = world.FAMILY_CUES[family]
    before = world.rule(family, (state[keys[0]], state[keys[1]]))
    for value in options:
        trial = {**state, cue.key: value}
        if world.rule(family, (trial[keys[0]], trial[keys[1]])) != before:
            return value
    return options[0]


def edit_instructions(question: str, explanation: str, concepts: list[str]) -> list[dict[str, str]]:
    """One chain-compatible instruction per concept, in order."""
    family = world.family_of_question(question)
    state = {c.key: c.value for c in world.parse_cues(explanation)}
    out = []
    for text in concepts:
        cue = world.parse_cue(text)
        if cue is None:
            out.append(
                {
                    "concept": text,
                    "keep": "everything else in the picture",
                    "change": f"change {text} so that it looks clearly different",
                    "how": "match the style and lighting of the picture",
                    "constraints": "no other changes",
                }
            )
            continue
        current = world.Cue(cue.obj, cue.attr, state.get(cue.key, cue.value))
        new = _choose(family, state, current)
        state[cue.key] = new
        change = write_change(current, new)
        out.append(
            {
                "concept": text,
                "keep": f"everything but the {cue.obj}: background, other objects, framing and lighting",
                "change": change,
                "how": "flat drawn style matching the scene, same lighting and perspective",
                "constraints": edit_constraints(change, cue.obj),
            }
        )
    return out


def edit_constraints(change: str, obj: str) -> str:
    """The Constraints line: an edit that adds the object may add that one object and nothing else."""
    if change.lower().startswith("add "):
        return f"no new objects other than the {obj}, no text, no change to the background"
    return "no new objects, no text, no change to the background"


def parse_edit(instruction: str) -> dict[str, str]:
    """{"type", "target"} of an instruction; heuristic for text outside the grammar."""
    edit = parse_change(instruction)
    if edit is not None:
        return {"type": edit.edit_type, "target": edit.obj}
    change = change_line(instruction).lower()
    verb = change.split()[0] if change.split() else ""
    kind = {
        "remove": "REMOVE",
        "delete": "REMOVE",
        "erase": "REMOVE",
        "add": "ADD",
        "insert": "ADD",
        "place": "ADD",
        "put": "ADD",
    }.get(verb, "MODIFY")
    m = re.search(
        r"\b(?:the|a|an)\s+([a-z][a-z ]*?)(?=\s+(?:from|to|on|in|with|into|beside|next|at|by|so|"
        r"and|so)\b|[,.;]|$)",
        change,
    )
    return {"type": kind, "target": m.group(1).strip() if m else "object"}


class RuleBasedLLM:
    """A TextModel for the extractor, judge and edit-parser roles in the calibration world."""

    name = "calibration-rules"

    def identity(self) -> dict[str, Any]:
        return {"backend": "calibration-rules", "version": VERSION}

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        return Completion(self._reply(prompt), finish_reason="stop")

    def _reply(self, prompt: str) -> str:
        found = match_template(prompt)
        if found is None:
            raise PermanentBackendError("calibration-rules: the prompt comes from no known template")
        kind, fields = found
        f = {k: v.strip() for k, v in fields.items()}
        if kind == "extract_concepts":
            return json.dumps(extract_concepts(f["explanation"], _int(f["k"], 2)))
        if kind == "edit_instructions":
            concepts = _list(f["concepts"])
            n = _int(f["n"], len(concepts))
            chain = edit_instructions(f["question"], f["explanation"], concepts[:n])
            return json.dumps(chain)
        if kind == "edit_parse":
            return json.dumps(parse_edit(f["instruction"]))
        if kind in ("judge_binary", "judge_graded"):
            judgement = assess(
                f["question"],
                f["answer"],
                f["explanation"],
                f["edits"],
                f["new_answer"],
                f["new_explanation"],
            )
            return judgement.binary_text() if kind == "judge_binary" else judgement.graded_text()
        raise PermanentBackendError(f"calibration-rules: no rules for the {kind} prompt")


def _int(text: str, default: int) -> int:
    return int(text) if text.isdigit() else default
