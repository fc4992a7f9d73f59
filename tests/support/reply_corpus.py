"""The reply corpus (tests/engine/data/reply_corpus.yaml) run through a parsing module.

``evaluate(parsing_module)`` gives one ``Outcome`` per reply, classified as *correct*, *wrong value*
(scored, but not the expected value), *wrongly unscored* (a readable reply left unscored) or
*wrongly scored* (a reply that must be unscored was given a value). It works with the current
``edct_task.parsing`` and with an older one that takes no ``finish_reason`` (which then never
sees it, as the old engine never did).

A parsed value then goes through the rules of ``edct_task.evidence``, as the engine sends it
(``evidence=False``: the engine before those rules), with the texts the entry's ``context`` gives:
``question``/``answer``/``explanation`` for concepts, ``concepts`` (the listed concepts, in order)
for instructions, ``instruction`` for an edit target; a graded verdict needs none (its rubric is
the template's). An entry without the context a rule needs is not checked by that rule.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

CORPUS = Path(__file__).resolve().parents[1] / "engine" / "data" / "reply_corpus.yaml"
KINDS = ("concepts", "instructions", "edit_target", "binary", "graded")
CATEGORIES = ("correct", "wrong value", "wrongly unscored", "wrongly scored")


@dataclass(frozen=True)
class Outcome:
    id: str
    kind: str
    style: str
    category: str
    expected: Any
    got: Any
    """The parsed value in the corpus's terms, or ``{"unscored": kind, "reason": ...}``."""


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _call(parser: Callable[..., Any], reply: str, finish_reason: str | None, *args: Any) -> Any:
    if "finish_reason" in inspect.signature(parser).parameters:
        return parser(reply, *args, finish_reason=finish_reason)
    return parser(reply, *args)


def _value(kind: str, value: Any) -> Any:
    """A parsed value in the corpus's terms."""
    if kind == "concepts":
        return list(value)
    if kind == "instructions":
        return [edit.model_dump() for edit in value]
    if kind == "edit_target":
        return {"type": value.type, "target": value.target}
    if kind == "binary":
        return {"ac": value.ac, "ef": value.ef}
    return {"score": value.score}


def _matches(kind: str, expected: Any, got: Any) -> bool:
    if kind == "instructions":  # the fields the corpus gives, per edit
        return len(expected) == len(got) and all(
            all(edit[name] == value for name, value in want.items())
            for want, edit in zip(expected, got, strict=True)
        )
    return expected == got


def not_evidence(entry: dict[str, Any], value: Any) -> Any:
    """The ``edct_task.evidence`` rule that a parsed value breaks, given the entry's context, or None."""
    from edct_task import evidence

    kind, context = entry["kind"], entry.get("context") or {}
    if kind == "concepts" and "explanation" in context:
        return evidence.check_concepts(
            list(value),
            question=context.get("question", ""),
            answer=context.get("answer", ""),
            explanation=context["explanation"],
        )
    if kind == "instructions" and "concepts" in context:
        pairs = zip([edit.change for edit in value], context["concepts"], strict=False)
        return evidence.check_instructions(list(pairs))
    if kind == "edit_target" and "instruction" in context:
        return evidence.check_edit_target(value.target, context["instruction"])
    if kind == "graded":
        return evidence.check_graded(value.score, getattr(value, "reason", ""))
    return None


def parse(parsing: ModuleType, entry: dict[str, Any], *, evidence: bool = True) -> Any:
    """One corpus entry through ``parsing`` (and the evidence rules): the value, or
    ``{"unscored": kind, "reason": ...}``."""
    kind, reply, finish = entry["kind"], entry["reply"], entry.get("finish_reason")
    if kind == "concepts":
        result = _call(parsing.parse_concepts, reply, finish, entry["k"])
    elif kind == "instructions":
        result = _call(parsing.parse_instructions, reply, finish, entry["n"])
    elif kind == "edit_target":
        result = _call(parsing.parse_edit_target, reply, finish)
    elif kind == "binary":
        result = _call(parsing.parse_binary_judgement, reply, finish)
    else:
        result = _call(parsing.parse_graded_judgement, reply, finish)
    if isinstance(result, parsing.Unparsed):
        return {"unscored": getattr(result, "kind", "unscored"), "reason": result.reason}
    found = not_evidence(entry, result.value) if evidence else None
    if found is not None:
        return {"unscored": found.kind, "reason": found.reason}
    return _value(kind, result.value)


def evaluate(
    parsing: ModuleType, entries: list[dict[str, Any]] | None = None, *, evidence: bool = True
) -> list[Outcome]:
    out = []
    for entry in entries if entries is not None else load():
        got = parse(parsing, entry, evidence=evidence)
        expected = entry["expect"]
        want_unscored = isinstance(expected, dict) and "unscored" in expected
        got_unscored = isinstance(got, dict) and "unscored" in got
        if want_unscored and got_unscored:
            category = "correct"
        elif want_unscored:
            category = "wrongly scored"
        elif got_unscored:
            category = "wrongly unscored"
        else:
            category = "correct" if _matches(entry["kind"], expected, got) else "wrong value"
        out.append(Outcome(entry["id"], entry["kind"], entry["style"], category, expected, got))
    return out


def table(outcomes: list[Outcome]) -> str:
    """A markdown table: replies per kind and category, and the totals."""
    counts = Counter((o.kind, o.category) for o in outcomes)
    lines = [
        "| reply kind | replies | " + " | ".join(CATEGORIES) + " |",
        "|---|---:|" + "---:|" * len(CATEGORIES),
    ]
    for kind in (*KINDS, "all"):
        rows = [o for o in outcomes if kind in ("all", o.kind)]
        cells = [str(sum(1 for o in rows if o.category == c)) for c in CATEGORIES]
        if kind != "all":
            cells = [str(counts[(kind, c)]) for c in CATEGORIES]
        name = "**all**" if kind == "all" else kind
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def style_table(outcomes: list[Outcome]) -> str:
    """A markdown table: replies per style (model and ``structured`` mode) and category, and the
    totals (the real-LLM corpus's table, docs/guides/real-models.md)."""
    styles = list(dict.fromkeys(o.style for o in outcomes))
    lines = [
        "| model | structured | replies | " + " | ".join(CATEGORIES) + " |",
        "|---|---|---:|" + "---:|" * len(CATEGORIES),
    ]
    for style in (*styles, "all"):
        rows = [o for o in outcomes if style in ("all", o.style)]
        cells = [str(sum(1 for o in rows if o.category == c)) for c in CATEGORIES]
        model, _, mode = style.partition(" structured:")
        name = ("**all**", "") if style == "all" else (f"`{model}`", f"`{mode}`")
        lines.append(f"| {name[0]} | {name[1]} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
