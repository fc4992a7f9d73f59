"""Known-answer controls: what each control asks its role, and whether the reply was right.

A crowdsourcing platform scores every worker on hidden gold questions; EDCT does the same with
the LLMs that play its text roles. A control item (``ControlItem``) is a judge step, an
explanation or an edit instruction whose correct verdict is known by construction
(``edct_task.controls`` holds the shipped bank). ``control_requests`` renders it with **the same
templates, token limits, panel members and self-consistency samples** as a real request of its
role (``protocol.judge_requests`` for the judges): nothing in a control's prompt tells it from a
real one. ``grade_control`` parses the replies with the same parsers as the protocol and compares
them with the known answer; a reply that cannot be read counts as wrong. ``ControlFeed`` sends a
run's controls through its dispatcher (same backends, cache and pools as its samples),
interleaved with the samples.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from edct_task import parsing
from edct_task.core.records import ControlRecord, ControlRole, EditInstruction, Exchange, SampleInput
from edct_task.core.requests import AskLLM, Failure
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.protocol import (
    ProtocolConfig,
    binary_score,
    concepts_request,
    graded_score,
    judge_requests,
    llm_request,
)
from model_adapters.contracts import Completion

GRADED_BANDS: dict[int, frozenset[int]] = {
    5: frozenset({4, 5}),
    4: frozenset({4, 5}),
    3: frozenset({2, 3, 4}),
    2: frozenset({1, 2}),
    1: frozenset({1, 2}),
}
"""The graded scores that answer a graded control of each known level right: the rubric's two
upper levels (the edit taken into account, specifically or generically) and its two lower ones
(the removed feature still cited) are each one verdict; a level-3 control takes its neighbours.
A judge that always gives the same score answers at most two of the five levels right."""


@dataclass(frozen=True)
class JudgeControl:
    """A judged chain step with known AC, EF and graded level."""

    question: str
    answer: str
    explanation: str
    edits: tuple[EditInstruction, ...]
    new_answer: str
    new_explanation: str
    ac: int
    ef: int
    level: int


@dataclass(frozen=True)
class ConceptsControl:
    """An explanation whose cited concepts are known: each concept is the words it must name."""

    question: str
    answer: str
    explanation: str
    concepts: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class EditParseControl:
    """An edit instruction with a known edit type and target (the words the target must name)."""

    instruction: EditInstruction
    edit_type: str
    target: tuple[str, ...]


@dataclass(frozen=True)
class ControlItem:
    """One control of the bank: an id, the domain it is written for, and what it asks."""

    id: str
    domain: str
    body: JudgeControl | ConceptsControl | EditParseControl


def control_roles(item: ControlItem, cfg: ProtocolConfig) -> tuple[str, ...]:
    """The roles a control checks under ``cfg``: both judges for a judge step (the graded one when
    the run grades), the extractor, or the edit parser (when the run has one)."""
    if isinstance(item.body, JudgeControl):
        return ("judge_binary", "judge_graded") if cfg.graded else ("judge_binary",)
    if isinstance(item.body, ConceptsControl):
        return ("extractor",)
    return ("edit_parser",) if cfg.llm_edit_parser else ()


def control_requests(item: ControlItem, cfg: ProtocolConfig) -> tuple[AskLLM, ...]:
    """The requests a control sends: exactly those a real request of its role would be."""
    body = item.body
    if isinstance(body, JudgeControl):
        sample = SampleInput(id=item.id, domain=item.domain, question=body.question, image="")
        return judge_requests(
            cfg,
            sample,
            Exchange(answer=body.answer, explanation=body.explanation),
            body.edits,
            Exchange(answer=body.new_answer, explanation=body.new_explanation),
        )
    if isinstance(body, ConceptsControl):
        return (
            concepts_request(cfg, body.question, Exchange(answer=body.answer, explanation=body.explanation)),
        )
    if not cfg.llm_edit_parser:
        return ()
    return (
        llm_request(
            "edit_parser",
            "edit_parse",
            "step1.edit_parse",
            cfg.max_new_tokens,
            instruction=body.instruction.as_text(),
        ),
    )


def _reply(reply: object) -> tuple[str | None, str | None, str | None]:
    """``(text, finish_reason, error)`` of a reply."""
    if isinstance(reply, Failure):
        return None, None, reply.describe()
    if not isinstance(reply, Completion):
        return None, None, f"expected a Completion, got {type(reply).__name__}"
    return reply.text, reply.finish_reason, None


_WORD = re.compile(r"[a-z0-9]+")


def _forms(word: str) -> set[str]:
    """A word and what it may be without a plural ending (``cones`` → cone, ``boxes`` → box,
    ``berries`` → berry): two spellings of a noun share a form."""
    forms = {word}
    if len(word) > 3 and word.endswith("ies"):
        forms.add(word[:-3] + "y")
    if len(word) > 3 and word.endswith("es"):
        forms.add(word[:-2])
    if len(word) > 2 and word.endswith("s") and not word.endswith("ss"):
        forms.add(word[:-1])
    return forms


def names_all(text: str, words: Sequence[str]) -> bool:
    """``text`` names every one of ``words`` (each a word or phrase), in the singular or plural."""
    have = set().union(*(_forms(w) for w in _WORD.findall(text.lower())))
    return all(_forms(w) & have for phrase in words for w in _WORD.findall(phrase.lower()))


def _concepts_match(got: Sequence[str], expected: Sequence[Sequence[str]]) -> bool:
    """Each expected concept is named by its own extracted concept, and no extracted concept is
    left over (order free: the ranking is the extractor's judgement)."""
    if len(got) != len(expected):
        return False
    free = list(got)
    for words in expected:
        match = next((g for g in free if names_all(g, words)), None)
        if match is None:
            return False
        free.remove(match)
    return True


def grade_control(
    item: ControlItem, requests: Sequence[AskLLM], replies: Sequence[object], cfg: ProtocolConfig
) -> list[ControlRecord]:
    """One ``ControlRecord`` per reply: what it said and whether that is the known answer (parsed
    as the protocol parses a real reply of its role, under ``cfg``)."""
    out: list[ControlRecord] = []
    body = item.body
    for request, reply in zip(requests, replies, strict=True):
        text, finish, error = _reply(reply)
        judge: str = request.role
        if request.role == "judge" and cfg.judges > 1:
            judge = f"judge{request.member}"
        role: ControlRole
        expected: dict[str, object]
        got: dict[str, object] | None
        if isinstance(body, JudgeControl) and request.template.startswith("judge_binary"):
            verdict = binary_score(reply)
            role, kind = "judge_binary", f"ac={body.ac} ef={body.ef}"
            expected = {"ac": body.ac, "ef": body.ef}
            got = None if verdict.ccs is None else {"ac": verdict.ac, "ef": verdict.ef}
            correct = got is not None and got == expected
            error = verdict.error
        elif isinstance(body, JudgeControl):
            graded = graded_score(reply)
            role, kind = "judge_graded", f"level {body.level}"
            expected = {"level": body.level}
            got = None if graded.score is None else {"level": graded.score}
            correct = graded.score in GRADED_BANDS[body.level]
            error = graded.error
        elif isinstance(body, ConceptsControl):
            concepts: list[str] | None = None
            if text is not None:
                parsed = parsing.parse_concepts(text, cfg.k, finish_reason=finish)
                if isinstance(parsed, parsing.Unparsed):
                    error = parsed.reason
                else:
                    concepts = list(parsed.value)
            role, judge, kind = "extractor", "extractor", "concepts"
            expected = {"concepts": [list(c) for c in body.concepts]}
            got = None if concepts is None else {"concepts": concepts}
            correct = concepts is not None and _concepts_match(concepts, body.concepts)
        else:
            target: dict[str, object] | None = None
            if text is not None:
                parsed_target = parsing.parse_edit_target(text, finish_reason=finish)
                if isinstance(parsed_target, parsing.Unparsed):
                    error = parsed_target.reason
                else:
                    target = {"type": parsed_target.value.type, "target": parsed_target.value.target}
            role, judge, kind = "edit_parser", "edit_parser", body.edit_type
            expected = {"type": body.edit_type, "target": list(body.target)}
            got = target
            correct = (
                target is not None
                and target["type"] == body.edit_type
                and names_all(str(target["target"]), body.target)
            )
        out.append(
            ControlRecord(
                id=item.id,
                domain=item.domain,
                role=role,
                judge=judge,
                sample=request.sample,
                kind=kind,
                expected=expected,
                got=got,
                correct=correct,
                unanswered=isinstance(reply, Failure),
                raw=text,
                error=error,
            )
        )
    return out


class ControlFeed:
    """A run's controls, sent through its dispatcher **interleaved with its samples**: after
    ``i`` of ``n`` samples have finished, ``ceil((i + 1) / n · m)`` of the ``m`` controls have gone
    out (the first with the first samples), so they share the pools, batches and cache with the
    real requests from start to end. ``finish()`` sends what is left, waits, and grades.

    ``sample_done`` may be called from the driver's thread (``on_record``); ``finish`` once.
    """

    def __init__(
        self, items: Sequence[ControlItem], cfg: ProtocolConfig, dispatcher: Dispatcher, samples: int
    ) -> None:
        self._items = [(item, control_requests(item, cfg)) for item in items]
        self._items = [(item, requests) for item, requests in self._items if requests]
        self._cfg, self._dispatcher, self._samples = cfg, dispatcher, max(1, samples)
        self._futures: list[list[Future[object]]] = []
        self._done = 0
        self._lock = threading.Lock()
        self._send_due()

    def __len__(self) -> int:
        """Calls the controls cost."""
        return sum(len(requests) for _, requests in self._items)

    def _send_due(self) -> None:
        due = math.ceil(min(self._done + 1, self._samples) / self._samples * len(self._items))
        while len(self._futures) < due:
            _, requests = self._items[len(self._futures)]
            self._futures.append([self._dispatcher.submit(r) for r in requests])

    def sample_done(self, _record: object = None) -> None:
        """One more sample has finished: send the controls now due."""
        with self._lock:
            self._done += 1
            self._send_due()

    def finish(self) -> list[ControlRecord]:
        """Send every control not yet sent, wait for all replies, and grade them in item order."""
        with self._lock:
            self._done = self._samples
            self._send_due()
        out: list[ControlRecord] = []
        for (item, requests), futures in zip(self._items, self._futures, strict=True):
            out.extend(grade_control(item, requests, [f.result() for f in futures], self._cfg))
        return out
