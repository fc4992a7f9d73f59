"""The handler table of a replay: every request of ``sample_protocol`` answered from one record.

A sample record keeps what each call of its protocol returned: the target's answers and
explanations (``baseline``, each step's ``requery``), the extractor's and the edit parser's raw
replies, each edit attempt's image and gate numbers, every judge vote's raw reply, and each
failure as described. :class:`Evidence` gives those back as the replies the protocol received
(``Completion``, ``EditedImage``, ``EditCheck``, ``Failure``), so driving the protocol with them
(``rederive.replay``) rebuilds the record with the protocol's own code. It decides nothing: a
request the record holds no reply for gets a :class:`Recorded` failure, and the replay then
differs from the record.

Two answers are not copied: the gate's pass and verdict are decided again from the recorded
r_in and r_out under the setup's gate parameters (``verification.gate.gate_verdict``), and a
check is of the edit type and target the replay asks for (version-2 records). A version-1 record
kept no edit-parser reply: its parser request is answered with a failure and the replay keeps the
recorded edit target (``rederive.expected``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edct_task.core.records import ChainStep, Exchange, JudgeVote, LLMOutput, SampleRecord
from edct_task.core.requests import AskLLM, AskTarget, EditedImage, EditImage, Failure, Request, VerifyEdit
from edct_task.engine.protocol import BASELINE_FAILED, EDIT_FAILED, VERIFY_FAILED
from model_adapters.contracts import Completion
from verification.gate import gate_verdict
from verification.records import EditCheck, GateParams

KEEPS_PARSER_REPLY = 2
"""The record schema version from which an edit target keeps the edit parser's reply."""


@dataclass(frozen=True)
class Recorded(Failure):
    """A failure as the record describes it: ``describe()`` gives the recorded text verbatim."""

    def describe(self) -> str:
        return self.message


def recorded(text: str | None) -> Recorded:
    return Recorded("recorded", text or "no reply recorded")


MISSING = recorded(None)


def llm_reply(output: LLMOutput | None) -> object:
    """A text-LLM reply as the protocol received it: its raw text, or its failure."""
    if output is None:
        return MISSING
    if output.raw is None:
        return recorded(output.error)
    return Completion(text=output.raw, finish_reason=output.finish_reason)


class Evidence:
    """Replies to ``record``'s protocol requests from the record itself (see the module docstring);
    ``gate`` is the setup's gate. ``answer`` never raises."""

    def __init__(self, record: SampleRecord, gate: GateParams) -> None:
        self.record, self.gate = record, gate
        self._table: dict[type, Callable[[Any], object]] = {
            AskTarget: self._target,
            AskLLM: self._llm,
            EditImage: self._edit,
            VerifyEdit: self._verify,
        }

    def answer(self, request: Request) -> object:
        return self._table[type(request)](request)

    def _step(self, purpose: str) -> ChainStep | None:
        """Step j of ``step{j}.…`` (the step at position j, whatever it says its index is)."""
        head = purpose.split(".", 1)[0].removeprefix("step")
        j = int(head) if head.isdigit() else 0
        return self.record.steps[j - 1] if 0 < j <= len(self.record.steps) else None

    def _attempt(self, j: int, a: int) -> Any:
        steps = self.record.steps
        attempts = steps[j - 1].attempts if 0 < j <= len(steps) else ()
        return attempts[a] if 0 <= a < len(attempts) else None

    def _target(self, request: AskTarget) -> object:
        stage, part = request.purpose.rsplit(".", 1)
        exchange: Exchange | None
        if stage == "baseline":
            exchange = self.record.baseline
            failed = (self.record.reason or "").removeprefix(BASELINE_FAILED)
        else:
            step = self._step(stage)
            exchange = step.requery if step else None
            failed = (step.requery_error if step else None) or ""
        if exchange is None:
            return recorded(failed)
        return Completion(text=exchange.answer if part == "answer" else exchange.explanation)

    def _llm(self, request: AskLLM) -> object:
        if request.role == "extractor":
            output = getattr(self.record, request.purpose, None)  # concepts, instructions
            return llm_reply(output if isinstance(output, LLMOutput) else None)
        step = self._step(request.purpose)
        if step is None:
            return MISSING
        if request.role == "edit_parser":
            target = step.edit_target
            if target is None or self.record.schema_version < KEEPS_PARSER_REPLY:
                return MISSING
            if target.raw is None:
                return recorded(target.error)
            return Completion(text=target.raw, finish_reason=target.finish_reason)
        votes = step.votes or (
            (JudgeVote(member=0, sample=0, binary=step.binary, graded=step.graded),) if step.binary else ()
        )
        vote = next((v for v in votes if (v.member, v.sample) == (request.member, request.sample)), None)
        if vote is None:
            return MISSING
        return llm_reply(vote.graded if request.purpose.endswith("judge_graded") else vote.binary)

    def _edit(self, request: EditImage) -> object:
        attempt = self._attempt(request.step, request.attempt)
        if attempt is None:
            return MISSING
        if attempt.image is None:
            return recorded((attempt.failure or "").removeprefix(EDIT_FAILED))
        return EditedImage(image=attempt.image, resized_from=attempt.resized_from)

    def _verify(self, request: VerifyEdit) -> object:
        attempt = self._attempt(request.step, request.attempt)
        if attempt is None:
            return MISSING
        if attempt.check is None:
            return recorded((attempt.failure or "").removeprefix(VERIFY_FAILED))
        return self.regated(attempt.check, request)

    def regated(self, check: EditCheck, request: VerifyEdit) -> object:
        """``check`` under the setup's gate: its pass and verdict decided again from its r_in and
        r_out (a check without them keeps a verdict of its own — target not found, bad image —
        and never passes; one that claims a ratio verdict without them is no check)."""
        update: dict[str, Any] = {
            "params": self.gate,
            "tau_in": self.gate.tau_in,
            "tau_out": self.gate.tau_out,
        }
        if self.record.schema_version >= KEEPS_PARSER_REPLY:
            update |= {"edit_type": request.edit_type, "target": request.target}
        if check.r_in is not None and check.r_out is not None:
            update["verdict"] = gate_verdict(
                check.r_in, check.r_out, tau_in=self.gate.tau_in, tau_out=self.gate.tau_out
            )
        elif check.verdict not in ("target_not_found", "bad_image"):
            return recorded(f"a {check.verdict} verdict without its r_in and r_out")
        update["passed"] = update.get("verdict", check.verdict) == "pass"
        return check.model_copy(update=update)
