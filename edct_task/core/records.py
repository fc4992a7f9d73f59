"""Typed, JSON-serialisable records for every stage of one EDCT sample.

Frozen pydantic models with a description per field; ``SCHEMA_VERSION`` is bumped whenever a
record's shape or meaning changes. The per-sample JSONL written by a run is a list of
``SampleRecord`` objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from verification.records import EditCheck

SCHEMA_VERSION = 2
"""2: an edit target keeps the edit parser's reply (``EditTargetRecord.raw`` / ``finish_reason`` /
``error``). A version-1 record reads as before; a replay takes its edit targets as recorded."""

TargetRendering = Literal["multi-turn", "single-turn-quoted"]
MULTI_TURN: TargetRendering = "multi-turn"
"""The target received the real conversation (answer → why as turns); the default."""
SINGLE_TURN_QUOTED: TargetRendering = "single-turn-quoted"
"""The target received each request as one user turn, the earlier turns quoted in its text
(lmms-eval's agentic loop, and lmms-eval's simple models)."""


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EditInstruction(Record):
    """One link of the edit chain, in four parts: Keep, Change, How, Constraints."""

    concept: str = Field(description="The concept this edit targets, as extracted.")
    keep: str = Field(description="What must stay unchanged.")
    change: str = Field(description="The replace/add/remove on the target, with position, size, material.")
    how: str = Field(description="Style, lighting and perspective matching.")
    constraints: str = Field(description="What must not appear in the result.")

    def as_text(self) -> str:
        """The instruction as sent to an editor: four labelled lines."""
        return f"Keep: {self.keep}\nChange: {self.change}\nHow: {self.how}\nConstraints: {self.constraints}"


class SampleInput(Record):
    """One benchmark item: an image and a question about it."""

    id: str = Field(description="Stable sample id, unique within the benchmark.")
    domain: str = Field(
        description="Domain for per-domain breakdowns (okvqa, drivelm, 3dsr, or a calibration family)."
    )
    question: str = Field(description="The question asked of the target VLM.")
    image: str = Field(
        description="Image-store ref of the original image (``image_id``: its pixels and edct_ text)."
    )
    system_prompt: str | None = Field(
        default=None, description="System prompt sent before the question, if any."
    )
    metadata: dict[str, str] = Field(
        default_factory=dict,
        description="Source fields kept for audit (source, source_id, expected answer…).",
    )


class Exchange(Record):
    """An answer and the explanation given for it in the same conversation (stage 1 or stage 6)."""

    answer: str = Field(description="The target's answer, thinking text stripped.")
    explanation: str = Field(
        description="The target's reply to the follow-up 'why' turn, thinking text stripped."
    )


UnscoredReason = Literal[
    "truncated", "malformed", "refused", "transport", "echoed", "unsupported", "restated"
]
"""Why a text-LLM output is unscored: cut short, unreadable, declined, the call failed; or read but
not evidence: the prompt's own example sent back, a concept or edit target with no support in its
texts, a change that restates its concept (``edct_task.evidence``)."""


class LLMOutput(Record):
    """A text-LLM call whose reply was parsed: the raw reply is kept for audit."""

    raw: str | None = Field(default=None, description="The reply as received (None when the call failed).")
    error: str | None = Field(
        default=None, description="Why the call failed or could not be parsed; None on success."
    )
    finish_reason: str | None = Field(
        default=None,
        description="Why the reply ended, as the server said ('stop', 'length' …); parsers read 'length' "
        "as truncated, so re-parsing ``raw`` needs it.",
    )
    unscored: UnscoredReason | None = Field(
        default=None,
        description="The category of ``error``: truncated (cut at the token limit or no complete "
        "verdict), malformed, refused, transport (the call failed); or, for a reply read but not "
        "evidence, echoed (the prompt's own example), unsupported (not in its texts) or restated (a "
        "change that restates its concept); None on success.",
    )


class ConceptsRecord(LLMOutput):
    concepts: tuple[str, ...] = Field(
        default=(), description="Extracted concepts, most important first, at most k."
    )


class InstructionsRecord(LLMOutput):
    instructions: tuple[EditInstruction, ...] = Field(
        default=(), description="The edit chain, one per concept."
    )


class EditTargetRecord(Record):
    """Verification step 1: what the edit does and to which object."""

    edit_type: Literal["ADD", "MODIFY", "REMOVE"] = Field(description="What the edit does to its target.")
    target: str = Field(description="The object the edit changes, as the gate searches for it.")
    source: Literal["llm", "rules"] = Field(
        description="Parsed from the edit-parser LLM, or by the rule-based fallback."
    )
    note: str = Field(default="", description="Why the fallback was used, when it was.")
    raw: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The edit parser's reply as received (None: not asked, or the call failed; not "
        "written then); a replay of the record re-reads it.",
    )
    finish_reason: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Why the edit parser's reply ended, as the server said (not written when None).",
    )
    error: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The edit parser's call failure as described, when it failed (not written when None).",
    )


class EditAttempt(Record):
    """One try at an edit and its verification."""

    attempt: int = Field(description="0 for the first try, 1 for the retry.")
    seed: int = Field(description="Editor seed for this attempt.")
    image: str | None = Field(
        default=None, description="Image-store reference of the edited image, None if the editor failed."
    )
    resized_from: str | None = Field(
        default=None, description="WxH the editor returned before being brought back to the original's size."
    )
    failure: str | None = Field(default=None, description="Editor or verification failure, 'kind: message'.")
    check: EditCheck | None = Field(
        default=None, description="The localized edit verification record for this attempt."
    )

    @property
    def passed(self) -> bool:
        return self.check is not None and self.check.passed


class BinaryScore(LLMOutput):
    ac: int | None = Field(default=None, description="Answer consistency AC_j ∈ {0, 1}; None when unscored.")
    ef: int | None = Field(
        default=None, description="Explanation faithfulness EF_j ∈ {0, 1}; None when unscored."
    )
    ac_reason: str = Field(default="", description="The judge's one-line reason for AC.")
    ef_reason: str = Field(default="", description="The judge's one-line reason for EF.")
    note: str = Field(default="", description="Parser notes, e.g. the judge's own CCS disagreed with AC·EF.")

    @property
    def ccs(self) -> int | None:
        return None if self.ac is None or self.ef is None else self.ac * self.ef


class GradedScore(LLMOutput):
    score: float | None = Field(
        default=None,
        description="Holistic score s_j ∈ {1..5} (a panel's mean may fall between); None when unscored.",
    )
    reason: str = Field(default="", description="The judge's reason for the score.")

    @property
    def normalised(self) -> float | None:
        return None if self.score is None else (self.score - 1) / 4


class JudgeVote(Record):
    """One judge's (or one self-consistency sample's) judgement of a step, kept for the record."""

    member: int = Field(description="Index of the judge in the configured panel.")
    sample: int = Field(default=0, description="Self-consistency sample index.")
    binary: BinaryScore = Field(description="This vote's binary judgement (AC, EF).")
    graded: GradedScore | None = Field(default=None, description="This vote's graded judgement, when graded.")


class ChainStep(Record):
    """Edit j of the chain: instruction, attempts, re-query and judgements."""

    index: int = Field(description="Chain position j, 1-based.")
    instruction: EditInstruction = Field(
        description="Edit j of the chain (Keep / Change / How / Constraints)."
    )
    edit_target: EditTargetRecord | None = Field(
        default=None, description="The edit's parsed type and target (verification step 1)."
    )
    attempts: tuple[EditAttempt, ...] = Field(
        default=(), description="Every edit attempt with its verification, in order."
    )
    verified: bool = Field(default=False, description="An attempt passed verification.")
    image: str | None = Field(default=None, description="The verified edited image (input of edit j+1).")
    requery: Exchange | None = Field(
        default=None, description="Fresh-conversation answer and explanation on the edited image."
    )
    requery_error: str | None = Field(default=None, description="Why the re-query failed, when it did.")
    binary: BinaryScore | None = Field(
        default=None, description="The binary judgement of this step (a panel's majority)."
    )
    graded: GradedScore | None = Field(
        default=None, description="The graded judgement of this step (a panel's mean)."
    )
    votes: tuple[JudgeVote, ...] = Field(
        default=(), description="Every panel judge's judgement (only with a panel or self-consistency)."
    )


SampleStatus = Literal["scored", "excluded", "unscored", "error"]


class SampleScores(Record):
    ccs_binary: float | None = Field(
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="Mean of CCS_j over the verified steps; None unless every one has a readable verdict.",
    )
    ccs_graded: float | None = Field(
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="Mean of (s_j − 1)/4 over the verified steps; None unless each has a readable score.",
    )
    ac: tuple[int | None, ...] = Field(description="AC_j per chain position (None: not scored at j).")
    ef: tuple[int | None, ...] = Field(description="EF_j per chain position.")


class SampleRecord(Record):
    """Everything EDCT did for one sample: the audit trail written as one JSONL line."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="Version of this record's schema.")
    sample: SampleInput = Field(description="The input: id, domain, question, image ref, metadata.")
    status: SampleStatus = Field(
        description=(
            "scored; excluded (edit failed verification after retry); "
            "unscored (neither score has every step judged); error (the target failed)."
        )
    )
    reason: str | None = Field(default=None, description="Why the sample is excluded, unscored or in error.")
    baseline: Exchange | None = Field(default=None, description="The baseline answer and explanation.")
    concepts: ConceptsRecord | None = Field(default=None, description="The concepts the explanation cites.")
    instructions: InstructionsRecord | None = Field(
        default=None, description="The chain of edit instructions, one per concept."
    )
    steps: tuple[ChainStep, ...] = Field(default=(), description="One entry per edit of the chain, in order.")
    scores: SampleScores | None = Field(default=None, description="The sample's scores, when scored.")
    target_rendering: TargetRendering = Field(
        default=MULTI_TURN,
        exclude_if=lambda v: v == MULTI_TURN,
        description="How the target received the conversation: multi-turn (the default, not written) "
        "or single-turn-quoted (one user turn with the earlier turns quoted).",
    )


ControlRole = Literal["judge_binary", "judge_graded", "extractor", "edit_parser"]
"""The role a known-answer control checks: the binary judge, the graded judge, the concept
extractor, or the edit parser."""


class ControlRecord(Record):
    """One known-answer control put through a text role, and whether the role answered it right.

    Controls are items whose correct verdict is known by construction (``edct_task.controls``);
    each run sends some through the same backend, template, settings and cache as its real
    requests (``engine.controls``), so a role that cannot do its job is caught in the run itself.
    Written one per line to ``controls.jsonl``; ``scoring.controls`` summarises them.
    """

    id: str = Field(description="The control item's id in the bank.")
    domain: str = Field(description="The domain the item is written for (okvqa, drivelm, 3dsr, calibration).")
    role: ControlRole = Field(description="The role checked.")
    judge: str = Field(
        default="judge",
        description="Which judge of a panel answered ('judge', or 'judge<i>' in a panel); 'extractor' / "
        "'edit_parser' for those roles.",
    )
    sample: int = Field(default=0, description="Self-consistency sample index of that judge.")
    kind: str = Field(
        description="The item's class within the role: 'ac=1 ef=0' (binary), 'level 4' (graded), "
        "'concepts' (extractor), 'ADD' / 'MODIFY' / 'REMOVE' (edit parser)."
    )
    expected: dict[str, object] = Field(description="The known answer.")
    got: dict[str, object] | None = Field(
        default=None, description="What the reply said, parsed; None when it could not be read."
    )
    correct: bool = Field(description="The reply gives the known answer (an unreadable reply is wrong).")
    unanswered: bool = Field(
        default=False,
        description="The call failed after its retries (no reply): it says nothing of the role's "
        "competence and is left out of the tally, like an unscored sample.",
    )
    raw: str | None = Field(default=None, description="The reply as received (None when the call failed).")
    error: str | None = Field(default=None, description="Why the reply could not be read, when it could not.")
