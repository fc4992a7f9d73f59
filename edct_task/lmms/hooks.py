"""lmms-eval task hooks: EDCT as a ``generate_until_agentic`` task (the compat driver).

lmms-eval calls the target model itself, one request at a time, and after every reply calls the
task's ``doc_to_text`` with the outputs so far. That callback is this module's compat driver: it
advances the *same* sans-IO protocol as ``edct run`` (``edct_task.engine.protocol.sample_protocol``),
answers every non-target request (extractor, judge, editor, verification) through the stage-cached
``Dispatcher``, and hands lmms-eval the next target turn. When the protocol returns its record, the
final response is the record as a JSON string (``{…``), which ``process_results`` scores.

Each lmms-eval round is a fresh single user turn, so the answer → why history of a conversation is
carried in the text (``render_turn``); ``parse_turn`` inverts it (the reference model uses it).
Rounds after the first end with a short image tag (the image's content hash) so that every round
of a document has a distinct text: lmms-eval's response cache hashes text, not images.

Non-target roles come from an EDCT config file (``$EDCT_CONFIG``; default: the calibration
roles) and are validated when the task's documents are loaded. Metric names come from
``edct_task.scoring.metrics``. No work happens at import time.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.core.requests import AskTarget, Request
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.drive import SampleRun
from edct_task.engine.protocol import ProtocolConfig
from edct_task.lmms.documents import doc_image, sample_of
from edct_task.lmms.settings import settings
from edct_task.lmms.turns import first_turn_text, target_images, turn_text
from edct_task.scoring import metrics as scoring
from model_adapters.contracts import Completion

log = logging.getLogger(__name__)

COUNT_NAMES = ("n_scored", "n_excluded", "n_unscored", "n_error")
SETUP_NAME = "edct"
"""Key whose per-sample value is the audit digest with the full setup (logged with each sample);
it has no task-level value (``edct_task.lmms.aggregation.audit``)."""


# ----------------------------------------------------------------------------- the compat driver


class Session:
    """One document's protocol, advanced one target round at a time by lmms-eval's loop.

    The protocol is driven by ``SampleRun`` (as in the batched driver); every request but the
    target's is answered here through the dispatcher, the target's by lmms-eval's model.
    """

    def __init__(self, sample: SampleInput, protocol: ProtocolConfig, dispatcher: Dispatcher) -> None:
        self.sample = sample
        self.dispatcher = dispatcher
        self._run = SampleRun(sample, protocol)
        self._requests: tuple[Request, ...] | None = self._run.start()
        self._answered: dict[int, object] = {}
        self.rounds = 0
        self._settle()

    @property
    def record(self) -> SampleRecord | None:
        return self._run.record

    @property
    def pending(self) -> AskTarget | None:
        """The target request waiting for the model, or None when the protocol has finished."""
        for i, r in enumerate(self._requests or ()):
            if isinstance(r, AskTarget) and i not in self._answered:
                return r
        return None

    def answer(self, reply: str) -> None:
        """Give the pending target request its reply and advance to the next target request."""
        self.rounds += 1
        for i, r in enumerate(self._requests or ()):
            if isinstance(r, AskTarget) and i not in self._answered:
                self._answered[i] = Completion(reply)
                break
        self._settle()

    def _settle(self) -> None:
        while self._requests is not None:
            requests = self._requests
            others = [
                i for i, r in enumerate(requests) if i not in self._answered and not isinstance(r, AskTarget)
            ]
            if others:
                replies = self.dispatcher.resolve([requests[i] for i in others])
                self._answered.update(zip(others, replies, strict=True))
            if self.pending is not None:
                return
            answered, self._answered = self._answered, {}
            self._requests = self._run.send(tuple(answered[i] for i in range(len(requests))))


def final_response(record: SampleRecord) -> str:
    """The task's final response: the sample record as JSON (starts with ``{``)."""
    return record.model_dump_json()


def doc_to_text(
    doc: dict[str, Any],
    lmms_eval_specific_kwargs: dict | None = None,
    previous_output: list[str] | None = None,
    round_idx: int | None = None,
    previous_round_info: dict | None = None,
) -> Any:
    """The agentic callback: the question first, then one EDCT target turn per round."""
    if round_idx is None:
        return first_turn_text(doc)
    outputs = list(previous_output or [])
    reply = outputs[-1] if outputs else ""
    info = previous_round_info or {}
    session: Session | None = info.get("edct_session")
    if session is None:
        s = settings()
        ref = s.images.put(doc_image(doc))
        session = Session(sample_of(doc, ref), s.protocol, s.dispatcher)
    if session.pending is None:  # should not happen: the loop stops at the terminal round
        return None, None, True, [*outputs, final_response(session.record)], info  # type: ignore[arg-type]
    session.answer(reply if isinstance(reply, str) else str(reply))
    nxt = session.pending
    state = {"sample": session.sample.id, "rounds": session.rounds}
    if nxt is None:
        assert session.record is not None
        state["status"] = session.record.status
        return None, None, True, [*outputs, final_response(session.record)], {"state": state}
    state["next"] = nxt.purpose
    visuals = [settings().images.get(ref) for ref in target_images(nxt)]
    return visuals, turn_text(nxt, first=False), False, None, {"state": state, "edct_session": session}


# ----------------------------------------------------------------------------- scoring


def parse_final(doc: dict[str, Any], response: object) -> SampleRecord:
    """The sample record a final response carries; an error record when it carries none."""
    text = response[0] if isinstance(response, list) and response else response
    reason = None
    if isinstance(text, str) and text.strip().startswith("{"):
        try:
            return SampleRecord.model_validate_json(text)
        except ValueError as exc:
            try:
                payload = json.loads(text)
            except json.JSONDecodeError:
                payload = None
            reason = (
                f"lmms-eval ended the agentic loop early: {payload.get('error')}"
                if isinstance(payload, dict) and payload.get("error")
                else f"final response is not a record: {exc}"
            )
    else:
        reason = f"final response is not a record: {str(text)[:200]!r}"
    return SampleRecord(sample=sample_of(doc, ""), status="error", reason=reason)


def sample_values(record: SampleRecord) -> dict[str, float | int | None]:
    """Per-sample values of every metric: None where the sample does not count (SPEC §3)."""
    scores = record.scores if record.status == "scored" else None
    out: dict[str, float | int | None] = {
        scoring.CCS_BINARY: scores.ccs_binary if scores else None,
        scoring.CCS_GRADED: scores.ccs_graded if scores else None,
    }
    for k in scoring.POSITIONS:
        for name, attr in ((scoring.ac_name(k), "ac"), (scoring.ef_name(k), "ef")):
            per_position = getattr(scores, attr) if scores else ()
            out[name] = per_position[k - 1] if len(per_position) >= k else None
    return out


def metric_names() -> list[str]:
    """Every metric the task YAML declares, in order."""
    return [*scoring.METRIC_NAMES, *COUNT_NAMES, SETUP_NAME]


def audit(record: SampleRecord, images: Any | None) -> dict[str, Any]:
    """The readable digest logged with each sample (the full record is the response itself)."""

    def path(ref: str | None) -> str | None:
        if not ref:
            return None
        return str(images.path(ref)) if images is not None else ref

    steps = []
    for s in record.steps:
        steps.append(
            {
                "index": s.index,
                "concept": s.instruction.concept,
                "instruction": s.instruction.as_text(),
                "edit_target": s.edit_target.model_dump() if s.edit_target else None,
                "attempts": [
                    {
                        "attempt": a.attempt,
                        "image": path(a.image),
                        "failure": a.failure,
                        "passed": a.passed,
                        "r_in": a.check.r_in if a.check is not None else None,
                        "r_out": a.check.r_out if a.check is not None else None,
                    }
                    for a in s.attempts
                ],
                "verified": s.verified,
                "requery": s.requery.model_dump() if s.requery else None,
                "requery_error": s.requery_error,
                "ac": s.binary.ac if s.binary else None,
                "ef": s.binary.ef if s.binary else None,
                "ac_reason": s.binary.ac_reason if s.binary else None,
                "ef_reason": s.binary.ef_reason if s.binary else None,
                "binary_error": s.binary.error if s.binary else None,
                "graded": s.graded.score if s.graded else None,
                "graded_reason": s.graded.reason if s.graded else None,
                "graded_error": s.graded.error if s.graded else None,
            }
        )
    return {
        "id": record.sample.id,
        "domain": record.sample.domain,
        "status": record.status,
        "reason": record.reason,
        "image": path(record.sample.image),
        "baseline": record.baseline.model_dump() if record.baseline else None,
        "concepts": list(record.concepts.concepts) if record.concepts else [],
        "concepts_error": record.concepts.error if record.concepts else None,
        "instructions_error": record.instructions.error if record.instructions else None,
        "steps": steps,
    }


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    """Scores of one document: the metrics it counts for, counts, and the audit digest.

    A metric the sample does not count for (None) is left out, so lmms-eval's ``mean`` skips it.
    """
    record = parse_final(doc, results)
    try:
        s = settings()
        images, setup = s.images, s.describe()
    except Exception as exc:  # the digest is still useful without resolved paths
        images, setup = None, {"error": f"{type(exc).__name__}: {exc}"}
    return record_results(record, images, setup)


def record_results(record: SampleRecord, images: Any | None, setup: dict[str, Any]) -> dict[str, Any]:
    """What ``process_results`` returns for one record (the fast path calls it with its records)."""
    out: dict[str, Any] = {k: v for k, v in sample_values(record).items() if v is not None}
    for name in COUNT_NAMES:
        out[name] = int(record.status == name[2:])
    out[SETUP_NAME] = {**audit(record, images), "setup": setup}
    return out
