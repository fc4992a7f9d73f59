"""Judge health: how many judgements could not be read, and why (per run, per judge, per kind);
and how many that were read look degenerate.

A judgement is the binary verdict (AC, EF) or the graded score of one verified step, from one
judge of the panel. It is unscored for one of these reasons, as the protocol recorded it
(``unscored``; records written before that field are read from their error text):

``truncated``  the reply was cut short (``finish_reason == "length"`` or no complete verdict block)
``refused``    the judge declined to judge
``malformed``  the reply holds no readable verdict
``transport``  the call itself failed (rate limit, timeout, server error) after the retries
``echoed``     the reply is the prompt's own text sent back (a graded reason that is the rubric's
               line of another score: ``edct_task.evidence``)

An unscored judgement is never a zero: a sample's score needs every verified step judged, so one
unreadable verdict leaves that sample without that score (out of the denominator, counted:
:func:`unscored_by_metric`, which ``--fail-on-unscored`` compares); a rate above ``WARN_RATE`` is
worth a look, and a kind with no readable judgement at all makes the run fail (exit code 3).

The judgements that were read carry *signals* of a judge that is not judging (``SIGNALS``; counted,
never a change of score): ``without_reason`` (the verdict lacks the one-line reason the template
asks for, or gives only a label or the template's blank), ``rubric_copied`` (a reason that is, for
the most part, the template's own rubric or instructions), ``contradicted`` (a reason that says
the opposite of its score, ``evidence.contradicts``: conservative), and ``identical`` (true when
every one of at least ``MIN_IDENTICAL`` verdicts has the same scores and the same reasons).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edct_task import evidence
from edct_task.core.records import BinaryScore, ChainStep, GradedScore, SampleRecord
from edct_task.scoring.metrics import family

REASONS = ("truncated", "refused", "malformed", "transport", "echoed", "unsupported", "restated")
SIGNALS = ("without_reason", "rubric_copied", "contradicted")
"""The counted signals of a degenerate judge among the judgements read (see the module docstring)."""
MIN_IDENTICAL = 5
"""Verdicts a judge must give (of one kind) before all of them being identical is a signal."""
_TEMPLATES = {"binary": "judge_binary", "graded": "judge_graded"}
KINDS = ("binary", "graded")
WARN_RATE = 0.05
"""Unscored share above which the summary warns."""


def unscored_reason(error: str | None) -> str:
    """The reason class of an unscored judgement's error text (see the module docstring)."""
    text = (error or "").lower()
    if "not evidence" in text:
        return "echoed"
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


def _whole(score: float) -> int:
    return int(score) if float(score).is_integer() else -1


def signals(output: BinaryScore | GradedScore) -> set[str]:
    """The ``SIGNALS`` a judgement that was read shows (empty for an unscored one)."""
    if _value(output) is None:
        return set()
    found = set()
    if isinstance(output, BinaryScore):
        reasons = {"ac": (output.ac, output.ac_reason), "ef": (output.ef, output.ef_reason)}
        template = _TEMPLATES["binary"]
        if any(evidence.reason_missing(reason, template) for _, reason in reasons.values()):
            found.add("without_reason")
        if any(evidence.copies_template(reason, template) for _, reason in reasons.values()):
            found.add("rubric_copied")
        if any(
            score is not None and evidence.contradicts(score, reason, which)
            for which, (score, reason) in reasons.items()
        ):
            found.add("contradicted")
        return found
    template = _TEMPLATES["graded"]
    if evidence.reason_missing(output.reason, template):
        found.add("without_reason")
    if evidence.copies_template(output.reason, template):
        found.add("rubric_copied")
    if evidence.contradicts(_whole(output.score), output.reason, "graded"):  # type: ignore[arg-type]
        found.add("contradicted")
    return found


def _verdict(output: BinaryScore | GradedScore) -> tuple[object, ...]:
    """A judgement's scores and reasons, to tell identical verdicts."""
    if isinstance(output, BinaryScore):
        return (output.ac, output.ef, output.ac_reason.strip(), output.ef_reason.strip())
    return (output.score, output.reason.strip())


def judge_health(records: Iterable[SampleRecord]) -> dict[str, dict[str, dict[str, Any]]]:
    """``judge → kind → {n, unscored, rate, by_reason, signals}`` over every judged step of every
    record; ``signals``: ``{without_reason, rubric_copied, contradicted}`` counts among the
    judgements read, and ``identical`` (see the module docstring)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    verdicts: dict[tuple[str, str], set[tuple[object, ...]]] = {}
    for record in records:
        for step in record.steps:
            for judge, kind, output in _judgements(step):
                cell = out.setdefault(judge, {}).setdefault(
                    kind,
                    {
                        "n": 0,
                        "unscored": 0,
                        "rate": 0.0,
                        "by_reason": {},
                        "signals": {**dict.fromkeys(SIGNALS, 0), "identical": False},
                    },
                )
                cell["n"] += 1
                if _value(output) is None:
                    cell["unscored"] += 1
                    reason = output.unscored or unscored_reason(output.error)
                    cell["by_reason"][reason] = cell["by_reason"].get(reason, 0) + 1
                    continue
                for signal in signals(output):
                    cell["signals"][signal] += 1
                verdicts.setdefault((judge, kind), set()).add(_verdict(output))
    for judge, kinds in out.items():
        for kind, cell in kinds.items():
            cell["rate"] = round(cell["unscored"] / cell["n"], 6) if cell["n"] else 0.0
            cell["by_reason"] = {r: cell["by_reason"][r] for r in REASONS if r in cell["by_reason"]}
            read = cell["n"] - cell["unscored"]
            cell["signals"]["identical"] = read >= MIN_IDENTICAL and len(verdicts.get((judge, kind), ())) == 1
    return out


_SIGNAL_WORDS = {
    "without_reason": "give no reason",
    "rubric_copied": "copy the prompt's rubric as their reason",
    "contradicted": "give a reason that contradicts their score",
}


def signal_summary(cell: dict[str, Any]) -> str:
    """A cell's signals in a few words (``no reason 20, identical``); "" when it shows none."""
    found = cell.get("signals") or {}
    words = {"without_reason": "no reason", "rubric_copied": "rubric copied", "contradicted": "contradicted"}
    parts = [f"{words[s]} {found[s]}" for s in SIGNALS if found.get(s)]
    if found.get("identical"):
        parts.append("all identical")
    return ", ".join(parts)


def health_line(health: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One summary line: the unscored share of each judge's binary and graded judgements."""
    parts = []
    for judge, kinds in health.items():
        cells = ", ".join(f"{kind} {c['unscored']}/{c['n']} unscored" for kind, c in kinds.items())
        parts.append(f"{judge}: {cells}")
    return "judge health: " + ("; ".join(parts) if parts else "no step was judged")


def health_warnings(health: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One line per judge and kind whose unscored rate exceeds ``WARN_RATE``; one per signal shown
    by more than ``WARN_RATE`` of the judgements read; one when all verdicts are identical."""
    lines = []
    for judge, kinds in health.items():
        for kind, cell in kinds.items():
            if cell["rate"] > WARN_RATE:
                reasons = ", ".join(f"{r} {n}" for r, n in cell["by_reason"].items())
                lines.append(
                    f"edct: warning: {judge}: {cell['unscored']} of {cell['n']} {kind} judgements unscored "
                    f"({cell['rate']:.1%}: {reasons})"
                )
            found = cell.get("signals") or {}
            read = cell["n"] - cell["unscored"]
            for signal in SIGNALS:
                count = found.get(signal, 0)
                if read and count / read > WARN_RATE:
                    lines.append(
                        f"edct: warning: {judge}: {count} of {read} {kind} verdicts read "
                        f"{_SIGNAL_WORDS[signal]} ({count / read:.1%})"
                    )
            if found.get("identical"):
                lines.append(
                    f"edct: warning: {judge}: all {read} {kind} verdicts read are identical "
                    "(same scores, same reasons): is the judge reading the prompt?"
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


def unscored_by_metric(records: Iterable[SampleRecord]) -> dict[str, int]:
    """Samples without each score whose judgement the run asked for: ``{metric: count}``.

    A sample counts for a metric when it ended ``unscored`` or in ``error``, or when it is
    ``scored`` without that score because a step's verdict of that kind could not be read (a
    score needs every verified step judged). Excluded samples do not count (their edit failed,
    nothing was judged). A kind no step of any record asked for (graded judging off) is left out.
    """
    records = list(records)
    asked = [
        kind
        for kind in KINDS
        if any(getattr(step, kind) is not None for record in records for step in record.steps)
    ]
    rows = [m for m in family("score") if m.judge in asked]
    out = {m.name: 0 for m in rows}
    for record in records:
        for m in rows:
            if record.status in ("unscored", "error") or (
                record.status == "scored" and (record.scores is None or m.value(record.scores) is None)
            ):
                out[m.name] += 1
    return out
