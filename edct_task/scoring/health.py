"""Judge health: how many judgements could not be read, and why (per run, per judge, per kind).

A judgement is the binary verdict (AC, EF) or the graded score of one verified step, from one
judge of the panel. It is unscored for one of four reasons, as the protocol recorded it
(``unscored``; records written before that field are read from their error text):

``truncated``  the reply was cut short (``finish_reason == "length"`` or no complete verdict block)
``refused``    the judge declined to judge
``malformed``  the reply holds no readable verdict
``transport``  the call itself failed (rate limit, timeout, server error) after the retries

An unscored judgement is never a zero (it leaves the denominator and is counted); a rate above
``WARN_RATE`` is worth a look, and a kind with no readable judgement at all makes the run fail (exit
code 3).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edct_task.core.records import BinaryScore, ChainStep, GradedScore, SampleRecord

REASONS = ("truncated", "refused", "malformed", "transport")
KINDS = ("binary", "graded")
WARN_RATE = 0.05
"""Unscored share above which the summary warns."""


def unscored_reason(error: str | None) -> str:
    """The reason class of an unscored judgement's error text (see the module docstring)."""
    text = (error or "").lower()
    if "truncated" in text:
        return "truncated"
    if "refus" in text:
        return "refused"
    if "unparseable" in text or "no majority" in text or "no judge of the panel" in text:
        return "malformed"
    return "transport"


def _judgements(step: ChainStep) -> Iterable[tuple[str, str, BinaryScore | GradedScore]]:
    """``(judge, kind, output)`` of every judgement of a step: per panel member when there are votes."""
    if step.votes:
        for vote in step.votes:
            yield f"judge{vote.member}", "binary", vote.binary
            if vote.graded is not None:
                yield f"judge{vote.member}", "graded", vote.graded
        return
    if step.binary is not None:
        yield "judge", "binary", step.binary
    if step.graded is not None:
        yield "judge", "graded", step.graded


def _value(output: BinaryScore | GradedScore) -> object:
    return output.ccs if isinstance(output, BinaryScore) else output.score


def judge_health(records: Iterable[SampleRecord]) -> dict[str, dict[str, dict[str, Any]]]:
    """``judge → kind → {n, unscored, rate, by_reason}`` over every judged step of every record."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        for step in record.steps:
            for judge, kind, output in _judgements(step):
                cell = out.setdefault(judge, {}).setdefault(
                    kind, {"n": 0, "unscored": 0, "rate": 0.0, "by_reason": {}}
                )
                cell["n"] += 1
                if _value(output) is None:
                    cell["unscored"] += 1
                    reason = output.unscored or unscored_reason(output.error)
                    cell["by_reason"][reason] = cell["by_reason"].get(reason, 0) + 1
    for kinds in out.values():
        for cell in kinds.values():
            cell["rate"] = round(cell["unscored"] / cell["n"], 6) if cell["n"] else 0.0
            cell["by_reason"] = {r: cell["by_reason"][r] for r in REASONS if r in cell["by_reason"]}
    return out


def health_line(health: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One summary line: the unscored share of each judge's binary and graded judgements."""
    parts = []
    for judge, kinds in health.items():
        cells = ", ".join(f"{kind} {c['unscored']}/{c['n']} unscored" for kind, c in kinds.items())
        parts.append(f"{judge}: {cells}")
    return "judge health: " + ("; ".join(parts) if parts else "no step was judged")


def health_warnings(health: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One line per judge and kind whose unscored rate exceeds ``WARN_RATE``."""
    lines = []
    for judge, kinds in health.items():
        for kind, cell in kinds.items():
            if cell["rate"] > WARN_RATE:
                reasons = ", ".join(f"{r} {n}" for r, n in cell["by_reason"].items())
                lines.append(
                    f"edct: warning: {judge}: {cell['unscored']} of {cell['n']} {kind} judgements unscored "
                    f"({cell['rate']:.1%}: {reasons})"
                )
    return lines


def unreadable_kinds(records: Iterable[SampleRecord]) -> list[str]:
    """The judgement kinds (binary, graded) that were asked for at least once and never read."""
    asked: dict[str, int] = {}
    read: dict[str, int] = {}
    for record in records:
        for step in record.steps:
            for kind, output in (("binary", step.binary), ("graded", step.graded)):
                if output is None:
                    continue
                asked[kind] = asked.get(kind, 0) + 1
                read[kind] = read.get(kind, 0) + (_value(output) is not None)
    return [k for k in KINDS if asked.get(k) and not read.get(k)]
