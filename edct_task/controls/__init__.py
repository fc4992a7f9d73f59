"""The shipped bank of known-answer controls and the draw of a run's share
(``docs/concepts/judge-reliability.md``).

Two sources, both in our own words:

- ``bank.yaml``: controls written by hand for the EDCT-Bench domains (``okvqa``, ``drivelm``,
  ``3dsr``): judged steps whose AC, EF and graded level follow from the protocol's rules (edits
  that should and should not change the answer), explanations of ordinary photos whose cited
  concepts are known, edit instructions of known type and target;
- ``controls.calibration``: the same kinds made from the calibration world's rule table.

A run draws ``protocol.controls`` items per role from the domains of its own samples (a
calibration run from the calibration world), balanced over the items' kinds and domains, with
the run's seed; ``protocol.controls: 0`` draws none.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

import yaml

from edct_task.core.errors import ConfigError
from edct_task.core.records import EditInstruction
from edct_task.engine.controls import (
    ConceptsControl,
    ControlItem,
    EditParseControl,
    JudgeControl,
)

CALIBRATION = "calibration"
KINDS = ("judge", "concepts", "edit_parse")


def bank_domains() -> tuple[str, ...]:
    """The domains a control may be written for: every registered EDCT-Bench domain, and the
    calibration world's."""
    from edct_task.bench_data.domains import names

    return (*names(), CALIBRATION)


def _text(raw: object, name: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{name} must be a non-empty string (quote YAML's yes/no and numbers)")
    return raw.strip()


def _instruction(raw: object) -> EditInstruction:
    if not isinstance(raw, dict):
        raise ValueError("an edit is a mapping of concept, keep, change, how, constraints")
    fields = set(EditInstruction.model_fields)
    if set(raw) != fields:
        raise ValueError(
            f"an edit has exactly the keys {', '.join(sorted(fields))}; got {', '.join(map(str, raw))}"
        )
    return EditInstruction(**{k: _text(raw[k], k) for k in fields})


def _words(raw: object) -> tuple[str, ...]:
    """A concept or target: a phrase, or a list of the words it must name."""
    if isinstance(raw, str):
        return (_text(raw, "a concept"),)
    if not isinstance(raw, list) or not raw:
        raise ValueError("a concept is a phrase or a non-empty list of words")
    return tuple(_text(w, "a word") for w in raw)


def parse_item(raw: dict[str, Any]) -> ControlItem:
    """One bank entry (``bank.yaml``'s schema) as a ``ControlItem``; ``ConfigError`` names the id."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a control is a mapping with id, domain and one body; got {type(raw).__name__}")
    ident = str(raw.get("id", "?"))
    try:
        domain = _text(raw["domain"], "domain")
        if domain not in bank_domains():
            raise ValueError(f"domain {domain!r} is none of {', '.join(bank_domains())}")
        if "judge" in raw:
            j = raw["judge"]
            body: Any = JudgeControl(
                question=_text(j["question"], "question"),
                answer=_text(j["answer"], "answer"),
                explanation=_text(j["explanation"], "explanation"),
                edits=tuple(_instruction(e) for e in j["edits"]),
                new_answer=_text(j["new_answer"], "new_answer"),
                new_explanation=_text(j["new_explanation"], "new_explanation"),
                ac=int(j["ac"]),
                ef=int(j["ef"]),
                level=int(j["level"]),
            )
            if body.ac not in (0, 1) or body.ef not in (0, 1) or not 1 <= body.level <= 5:
                raise ValueError("ac and ef are 0 or 1, level 1 to 5")
        elif "concepts" in raw:
            c = raw["concepts"]
            body = ConceptsControl(
                question=_text(c["question"], "question"),
                answer=_text(c["answer"], "answer"),
                explanation=_text(c["explanation"], "explanation"),
                concepts=tuple(_words(w) for w in c["expected"]),
            )
        elif "edit_parse" in raw:
            e = raw["edit_parse"]
            body = EditParseControl(
                instruction=_instruction(e["instruction"]),
                edit_type=str(e["type"]),
                target=_words(e["target"]),
            )
            if body.edit_type not in ("ADD", "MODIFY", "REMOVE"):
                raise ValueError("type is ADD, MODIFY or REMOVE")
        else:
            raise ValueError("an entry holds judge, concepts or edit_parse")
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"control {ident}: {exc}") from None
    return ControlItem(id=ident, domain=domain, body=body)


@functools.cache
def shipped() -> tuple[ControlItem, ...]:
    """Every shipped control: ``bank.yaml`` and the calibration world's."""
    from edct_task.controls import calibration

    text = resources.files(__package__).joinpath("bank.yaml").read_text(encoding="utf-8")
    entries = yaml.safe_load(text) or []
    if not isinstance(entries, list):
        raise ConfigError("bank.yaml: a list of controls")
    items = [parse_item(raw) for raw in entries]
    items += calibration.judge_controls() + calibration.concept_controls() + calibration.edit_parse_controls()
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise ConfigError(f"control {item.id}: the id is used twice")
        seen.add(item.id)
    return tuple(items)


def kind_of(item: ControlItem) -> str:
    """``judge``, ``concepts`` or ``edit_parse``."""
    if isinstance(item.body, JudgeControl):
        return "judge"
    return "concepts" if isinstance(item.body, ConceptsControl) else "edit_parse"


def _stratum(item: ControlItem) -> tuple[object, ...]:
    """What a draw balances within a kind: the verdict class of a judge step (so a judge that
    always answers the same scores at most the share of one class), the edit type, the domain."""
    body = item.body
    if isinstance(body, JudgeControl):
        return (item.domain, body.ac, body.ef, body.level)
    if isinstance(body, EditParseControl):
        return (item.domain, body.edit_type)
    return (item.domain,)


def draw(domains: Iterable[str], per_kind: int, *, seed: int, k: int) -> list[ControlItem]:
    """``per_kind`` controls of each kind from ``domains`` (fewer when the bank holds fewer), taken
    round-robin over strata (domain, and a judge step's verdict class and level) in a seeded
    order; concept controls cite at most ``k`` concepts."""
    wanted = set(domains)
    if per_kind <= 0 or not wanted:
        return []
    pool = [i for i in shipped() if i.domain in wanted]
    pool = [i for i in pool if not isinstance(i.body, ConceptsControl) or len(i.body.concepts) <= k]
    rng = random.Random(f"edct-controls:{seed}")
    out: list[ControlItem] = []
    for kind in KINDS:
        strata: dict[tuple[object, ...], list[ControlItem]] = {}
        for item in pool:
            if kind_of(item) == kind:
                strata.setdefault(_stratum(item), []).append(item)
        for rows in strata.values():
            rng.shuffle(rows)
        queues = [strata[s] for s in sorted(strata, key=repr)]
        rng.shuffle(queues)  # which strata get the places an even share leaves over: seeded too
        taken: list[ControlItem] = []
        while len(taken) < per_kind and any(queues):
            for q in queues:
                if q and len(taken) < per_kind:
                    taken.append(q.pop())
        out += taken
    return out


def control_domains(sample_domains: Sequence[str], calibration: bool) -> list[str]:
    """The bank domains a run draws from: the calibration world's for a calibration run, else the
    EDCT-Bench domains its samples come from (``okvqa``, ``drivelm``, ``3dsr``)."""
    if calibration:
        return [CALIBRATION]
    return sorted(set(sample_domains))
