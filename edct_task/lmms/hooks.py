"""lmms-eval task hooks: EDCT as a ``generate_until_agentic`` task (``lmms-eval --tasks edct_bench``).

lmms-eval calls the target model itself, one request at a time, and after every reply calls the
task's ``doc_to_text`` with the outputs so far. That callback advances the *same* sans-IO protocol
as ``edct run`` (``SampleRun``), answers every non-target request (extractor, judge, editor,
verification) through the stage-cached ``Dispatcher`` the runner's composition root builds, and
hands lmms-eval the next target turn. When the protocol returns its record, the final response is
the record as a JSON string (``{…``); ``process_results`` appends it to the EDCT run folder
(``run.folder.RunFolder``) and scores it.

lmms-eval 0.7.3's agentic loop sends every round, to chat and simple models alike, as a fresh
single user turn built from one text and the images: the answer → why history is quoted in the
text (``turns.turn_text``), and the records say so (``target_rendering: single-turn-quoted``).
Rounds after the first end with a short image tag (the image's content hash) so that every round
of a document has a distinct text: lmms-eval's response cache hashes text, not images.

During an export (``lmms.export``: lmms-eval's own evaluator writing the files of a finished run)
each document is answered with its finished record at once (``state.replay``).

Non-target roles come from an EDCT config file (``$EDCT_CONFIG``; default: the calibration
roles) and are validated when the task's documents are loaded. Metric names come from
``edct_task.scoring.metrics``. No work happens at import time.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from edct_task.core.records import SINGLE_TURN_QUOTED, SampleInput, SampleRecord
from edct_task.core.requests import AskTarget, Request
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.drive import SampleRun
from edct_task.engine.protocol import ProtocolConfig
from edct_task.lmms import state
from edct_task.lmms.documents import IMAGE_ERRORS, doc_image_and_notes, sample_of, unreadable_record
from edct_task.lmms.results import final_response, parse_final, record_results
from edct_task.lmms.settings import settings
from edct_task.lmms.turns import first_turn_text, target_images, turn_text
from model_adapters.contracts import Completion

# ----------------------------------------------------------------------------- the compat driver


class Session:
    """One document's protocol, advanced one target round at a time by lmms-eval's loop.

    The protocol is driven by ``SampleRun`` (as in ``engine.driver.run_samples``); every request but the
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


PADDING_RESPONSE = json.dumps({"success": False, "error": "padding request of a multi-rank run"})
"""The final response of a padding request (its results are discarded by lmms-eval)."""


def padding_request() -> bool:
    """Whether lmms-eval's agentic loop is running a padding request now.

    Multi-rank runs whose document count does not divide evenly pad the shorter ranks with clones
    of a real request tagged ``metadata["__padding_only__"]``, and lmms-eval 0.7.3's
    ``_run_generate_until_agentic`` runs them like any
    other, results discarded. The callback is not given the request, so the loop's frame is
    read: a padding request ends after the model's first reply and costs none of our backends.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_run_generate_until_agentic":
            metadata = getattr(frame.f_locals.get("req"), "metadata", None)
            return isinstance(metadata, dict) and bool(metadata.get("__padding_only__"))
        frame = frame.f_back
    return False


def doc_to_text(
    doc: dict[str, Any],
    lmms_eval_specific_kwargs: dict | None = None,
    previous_output: list[str] | None = None,
    round_idx: int | None = None,
    previous_round_info: dict | None = None,
) -> Any:
    """The agentic callback: the question first, then one EDCT target turn per round."""
    replay = state.replay()
    if replay is not None:  # an export: the document's finished record is its response
        if round_idx is None:
            return ""
        record = replay.records[str(doc["id"])]
        return None, None, True, [final_response(record)], {"state": {"sample": record.sample.id}}
    if round_idx is None:
        return first_turn_text(doc)
    outputs = list(previous_output or [])
    reply = outputs[-1] if outputs else ""
    info = previous_round_info or {}
    session: Session | None = info.get("edct_session")
    if session is None and padding_request():  # a multi-rank run's filler: lmms-eval discards it
        return None, None, True, [*outputs, PADDING_RESPONSE], {"state": {"padding": True}}
    if session is None:
        s = settings()
        try:
            image, notes = doc_image_and_notes(doc)
            ref = s.images.put(image)
        except IMAGE_ERRORS as exc:  # a bad image costs this document: its error record, no model call
            record = quoted(unreadable_record(doc, exc))
            progress = {"sample": record.sample.id, "rounds": 0, "status": record.status}
            return None, None, True, [*outputs, final_response(record)], {"state": progress}  # type: ignore[arg-type]
        session = Session(sample_of(doc, ref, notes), s.protocol, s.dispatcher)
    if session.pending is None:  # should not happen: the loop stops at the terminal round
        return None, None, True, [*outputs, final_response(session.record)], info  # type: ignore[arg-type]
    session.answer(reply if isinstance(reply, str) else str(reply))
    nxt = session.pending
    progress = {"sample": session.sample.id, "rounds": session.rounds}
    if nxt is None:
        assert session.record is not None
        progress["status"] = session.record.status
        return None, None, True, [*outputs, final_response(quoted(session.record))], {"state": progress}
    progress["next"] = nxt.purpose
    visuals = [settings().images.get(ref) for ref in target_images(nxt)]
    return visuals, turn_text(nxt, first=False), False, None, {"state": progress, "edct_session": session}


# ----------------------------------------------------------------------------- scoring


def quoted(record: SampleRecord) -> SampleRecord:
    """The record with the rendering lmms-eval's loop gave the target."""
    return record.model_copy(update={"target_rendering": SINGLE_TURN_QUOTED})


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    """Scores of one document: the metrics it counts for, counts, and where its record is kept;
    the record is appended to the EDCT run folder first (not during an export: it is there).

    A metric the sample does not count for (None) is left out, so lmms-eval's ``mean`` skips it.
    """
    record = parse_final(doc, results)
    replay = state.replay()
    if replay is not None:
        return record_results(record, replay.run_dir)
    s = settings()
    record = quoted(record)
    s.run.append(record)
    return record_results(record, str(s.run.path))
