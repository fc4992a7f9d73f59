"""The EDCT protocol for one sample, as sans-IO logic: baseline answer and why, concepts, the edit
chain, and per edit its verification, the re-query in a fresh conversation and the judges.

``sample_protocol`` is a generator: it yields a tuple of requests (``edct_task.core.requests``), is
sent a tuple of replies in the same order, and finally returns a ``SampleRecord``. It performs no
I/O, imports no model library and never sees pixels: images are store references. Drivers own
everything else (batching, concurrency, caching, retries). Failures arrive as ``Failure`` values
and become data in the record; nothing here raises on bad model output.

Request flow for one sample (requests in one tuple run concurrently)::

    baseline.answer → baseline.why → concepts → instructions
    for each edit j:  (edit_j [, edit_parse_j] [, judges_{j-1}])  → verify_j
                      (retry: edit_j' → verify_j')
                      → step j.answer → step j.why
    judges_k

Judging of edit j travels with the edit of j+1: it depends only on texts, so it is off the
critical path.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from edct_task import evidence, parsing, prompts
from edct_task.core.records import (
    BinaryScore,
    ChainStep,
    ConceptsRecord,
    EditAttempt,
    EditInstruction,
    EditTargetRecord,
    Exchange,
    GradedScore,
    InstructionsRecord,
    JudgeVote,
    SampleInput,
    SampleRecord,
    SampleScores,
    SampleStatus,
)
from edct_task.core.requests import (
    AskLLM,
    AskTarget,
    EditedImage,
    EditImage,
    Failure,
    Message,
    Request,
    TextRole,
    VerifyEdit,
)
from edct_task.scoring import panel
from model_adapters.contracts import Completion
from verification.edit_parsing import rule_based_edit_target
from verification.records import EditCheck

ExclusionPolicy = Literal["exclude_sample", "truncate_chain"]
Protocol = Generator[tuple[Request, ...], tuple[object, ...], SampleRecord]

BASELINE_FAILED = "target failed at baseline: "
"""How an ``error`` record's reason starts when the target's baseline call failed (the failure follows)."""
EDIT_FAILED = "edit failed: "
"""How an attempt's ``failure`` starts when the editor gave no image (the failure follows)."""
VERIFY_FAILED = "verification failed: "
"""How an attempt's ``failure`` starts when its verification gave no record (the failure follows)."""


class ProtocolConfig(BaseModel):
    """Protocol settings that change scores; recorded in results (the ``protocol:`` config block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(2, ge=1, description="Maximum number of concepts, hence chain length (paper: 2).")
    exclusion_policy: ExclusionPolicy = Field(
        "exclude_sample",
        description="exclude_sample (paper) drops a sample whose edit fails verification after the retry; "
        "truncate_chain scores the verified steps before the failure.",
    )
    edit_attempts: int = Field(2, ge=1, description="First try plus retries (paper: 2, one retry).")
    graded: bool = Field(True, description="Also run the graded (1-5) judge.")
    llm_edit_parser: bool = Field(
        True, description="Parse edits with the edit_parser role (derived: false when that role is not set)."
    )
    seed: int = Field(0, description="Base seed; attempt a of edit j uses seed + 1000*j + a.")
    max_new_tokens: int = Field(4096, ge=1, description="Token limit of every reply but the graded judge's.")
    graded_max_new_tokens: int = Field(8192, ge=1, description="Token limit of the graded judge's reply.")
    judges: int = Field(
        1, ge=1, description="Members of the judge panel (derived from roles.judge: a list makes a panel)."
    )
    judge_samples: int = Field(1, ge=1, description="Self-consistency samples per judge.")
    judge_temperature: float = Field(0.0, ge=0, description="Judge sampling temperature (> 0 for samples).")
    panel_tie: Literal["unscored", "first"] = Field(
        "unscored", description="A tied panel vote is unscored, or broken by the first judge that scored."
    )
    controls: int = Field(
        16,
        ge=0,
        le=1000,
        description="Known-answer controls per text role put through the run's own backends, interleaved "
        "with its samples (judge steps, explanations, edit instructions; docs: judge reliability); 0 turns "
        "them off.",
    )
    control_bar: float = Field(
        0.8,
        ge=0,
        le=1,
        description="A role whose controls' 95% interval lies wholly below this accuracy marks the run "
        "unreliable.",
    )

    def judged_by(self, board: ProtocolConfig) -> ProtocolConfig:
        """These settings with ``board``'s judge settings (panel, samples, temperature, tie rule,
        graded, token limits): the protocol a board's own judge re-judges a run under."""
        return self.model_copy(update={name: getattr(board, name) for name in JUDGE_SETTINGS})


JUDGE_SETTINGS = (
    "judges",
    "judge_samples",
    "judge_temperature",
    "panel_tie",
    "graded",
    "max_new_tokens",
    "graded_max_new_tokens",
)
"""The settings of ``ProtocolConfig`` that shape the judge's requests and how its replies combine."""


def why_prompt() -> str:
    """The follow-up turn asking for the explanation (stage 1 and stage 6)."""
    return prompts.get_template("answer_why").text.strip()


def opening(sample: SampleInput, image: str) -> tuple[Message, ...]:
    """A fresh conversation: optional system prompt, then the image and the question."""
    first = Message("user", sample.question, (image,))
    if sample.system_prompt:
        return (Message("system", sample.system_prompt), first)
    return (first,)


def render_edits(instructions: Sequence[EditInstruction]) -> str:
    """The cumulative edits 1..j as the judge sees them: ``N. Keep: …`` blocks."""
    return "\n\n".join(f"{i}. {ins.as_text()}" for i, ins in enumerate(instructions, 1))


def llm_request(role: TextRole, template: str, purpose: str, max_new_tokens: int, **fields: object) -> AskLLM:
    t = prompts.get_template(template)
    return AskLLM(
        role=role,
        prompt=t.render(**fields),
        template=t.tag,
        purpose=purpose,
        max_new_tokens=max_new_tokens,
    )


def concepts_request(cfg: ProtocolConfig, question: str, baseline: Exchange) -> AskLLM:
    """The extractor's request for the concepts ``baseline``'s explanation cites (stage 2)."""
    return llm_request(
        "extractor",
        "extract_concepts",
        "concepts",
        cfg.max_new_tokens,
        question=question,
        answer=baseline.answer,
        explanation=baseline.explanation,
        k=cfg.k,
    )


def _raw(reply: object) -> str | Failure:
    """A model reply's text as received; the parsers strip thinking text themselves (and can then
    say that a reply ended inside unfinished reasoning)."""
    if isinstance(reply, Failure):
        return reply
    if not isinstance(reply, Completion):
        return Failure("bad_reply", f"expected a Completion, got {type(reply).__name__}")
    return reply.text


def _finish(reply: object) -> str | None:
    """Why the backend says the reply ended (``"length"``: cut at the token limit); None if unknown."""
    return reply.finish_reason if isinstance(reply, Completion) else None


def _text(reply: object) -> str | Failure:
    """A target reply with thinking text stripped."""
    raw = _raw(reply)
    return raw if isinstance(raw, Failure) else parsing.strip_thinking(raw)


def _ask_exchange(
    sample: SampleInput, image: str, purpose: str
) -> Generator[tuple[Request, ...], tuple[object, ...], Exchange | Failure]:
    """Answer then why, in one conversation (stage 1 / stage 6)."""
    conversation = opening(sample, image)
    (reply,) = yield (AskTarget(conversation, f"{purpose}.answer"),)
    answer = _text(reply)
    if isinstance(answer, Failure):
        return answer
    conversation = (*conversation, Message("assistant", answer), Message("user", why_prompt()))
    (reply,) = yield (AskTarget(conversation, f"{purpose}.why"),)
    explanation = _text(reply)
    if isinstance(explanation, Failure):
        return explanation
    return Exchange(answer=answer, explanation=explanation)


def judge_requests(
    cfg: ProtocolConfig,
    sample: SampleInput,
    baseline: Exchange,
    chain: Sequence[EditInstruction],
    requery: Exchange,
) -> tuple[AskLLM, ...]:
    """The judge requests of the step whose chain is ``chain`` (every panel member and sample)."""
    fields = {
        "question": sample.question,
        "answer": baseline.answer,
        "explanation": baseline.explanation,
        "edits": render_edits(chain),
        "new_answer": requery.answer,
        "new_explanation": requery.explanation,
    }
    j = len(chain)
    binary = llm_request("judge", "judge_binary", f"step{j}.judge_binary", cfg.max_new_tokens, **fields)
    graded = llm_request(
        "judge", "judge_graded", f"step{j}.judge_graded", cfg.graded_max_new_tokens, **fields
    )
    kinds = (binary, graded) if cfg.graded else (binary,)
    return tuple(
        replace(kind, member=member, sample=sample_index, temperature=cfg.judge_temperature)
        for member in range(cfg.judges)
        for sample_index in range(cfg.judge_samples)
        for kind in kinds
    )


def binary_score(reply: object) -> BinaryScore:
    """A binary judge reply read as the protocol reads it (parsed; unscored with its reason)."""
    text = _raw(reply)
    if isinstance(text, Failure):
        return BinaryScore(error=text.describe(), unscored="transport")
    parsed = parsing.parse_binary_judgement(text, finish_reason=_finish(reply))
    if isinstance(parsed, parsing.Unparsed):
        return BinaryScore(
            raw=text,
            finish_reason=_finish(reply),
            error=f"unparseable judgement: {parsed.reason}",
            unscored=parsed.kind,
        )
    v = parsed.value
    return BinaryScore(
        raw=text,
        finish_reason=_finish(reply),
        ac=v.ac,
        ef=v.ef,
        ac_reason=v.ac_reason,
        ef_reason=v.ef_reason,
        note=v.note,
    )


def graded_score(reply: object) -> GradedScore:
    """A graded judge reply read as the protocol reads it (parsed, the evidence rule applied)."""
    text = _raw(reply)
    if isinstance(text, Failure):
        return GradedScore(error=text.describe(), unscored="transport")
    parsed = parsing.parse_graded_judgement(text, finish_reason=_finish(reply))
    if isinstance(parsed, parsing.Unparsed):
        return GradedScore(
            raw=text,
            finish_reason=_finish(reply),
            error=f"unparseable judgement: {parsed.reason}",
            unscored=parsed.kind,
        )
    echo = evidence.check_graded(parsed.value.score, parsed.value.reason)
    if echo is not None:  # the rubric's line of another score sent back as the reason
        return GradedScore(
            raw=text,
            finish_reason=_finish(reply),
            error=f"judgement not evidence: {echo.reason}",
            unscored=echo.kind,
        )
    return GradedScore(
        raw=text, finish_reason=_finish(reply), score=parsed.value.score, reason=parsed.value.reason
    )


def _with_judgements(step: ChainStep, replies: Sequence[object], cfg: ProtocolConfig) -> ChainStep:
    per_vote = 2 if cfg.graded else 1
    votes = []
    for i in range(0, len(replies), per_vote):
        member, sample_index = divmod(i // per_vote, cfg.judge_samples)
        votes.append(
            JudgeVote(
                member=member,
                sample=sample_index,
                binary=binary_score(replies[i]),
                graded=graded_score(replies[i + 1]) if cfg.graded else None,
            )
        )
    if len(votes) == 1:
        return step.model_copy(update={"binary": votes[0].binary, "graded": votes[0].graded})
    return step.model_copy(
        update={
            "binary": _panel_binary(votes, cfg),
            "graded": _panel_graded(votes) if cfg.graded else None,
            "votes": tuple(votes),
        }
    )


def _per_judge(
    votes: Sequence[JudgeVote], value: Callable[[JudgeVote], float | None]
) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for v in votes:
        out.setdefault(f"judge{v.member}", []).append(value(v))
    return out


def _panel_binary(votes: Sequence[JudgeVote], cfg: ProtocolConfig) -> BinaryScore:
    ac = panel.panel_score(_per_judge(votes, lambda v: v.binary.ac), "binary", tie=cfg.panel_tie)
    ef = panel.panel_score(_per_judge(votes, lambda v: v.binary.ef), "binary", tie=cfg.panel_tie)
    note = (
        f"panel of {cfg.judges} judge(s) x {cfg.judge_samples} sample(s); "
        f"AC votes {ac['votes']}, EF votes {ef['votes']}"
    )
    error = None
    if ac["score"] is None or ef["score"] is None:
        error = (
            "panel has no majority ("
            + ("; ".join(v.binary.error for v in votes if v.binary.error) or "tied vote")
            + ")"
        )
    return BinaryScore(
        ac=None if error else int(ac["score"]),
        ef=None if error else int(ef["score"]),
        note=note,
        error=error,
    )


def _panel_graded(votes: Sequence[JudgeVote]) -> GradedScore:
    result = panel.panel_score(_per_judge(votes, lambda v: v.graded.score if v.graded else None), "graded")
    if result["score"] is None:
        return GradedScore(error="no judge of the panel gave a graded score")
    return GradedScore(score=result["score"], reason=f"panel mean; votes {result['votes']}")


def _edit_target(instruction: EditInstruction, reply: object | None) -> EditTargetRecord:
    """The edit's type and target from the edit parser's ``reply`` (None: not asked), which the
    record keeps, or the rule-based fallback."""
    note = ""
    raw: str | None = None  # what the record keeps of the reply (None: not written)
    finish_reason: str | None = None
    error: str | None = None
    if reply is not None:
        text = _raw(reply)
        if isinstance(text, Failure):
            error = text.describe()
            note = f"edit parser failed ({text.describe()}); rule-based fallback"
        else:
            raw, finish_reason = text, _finish(reply)
            parsed = parsing.parse_edit_target(text, finish_reason=_finish(reply))
            if isinstance(parsed, parsing.Unparsed):
                note = f"edit parser reply unparseable ({parsed.reason}); rule-based fallback"
            elif (
                found := evidence.check_edit_target(parsed.value.target, instruction.as_text())
            ) is not None:
                note = f"edit parser reply not evidence ({found.kind}: {found.reason}); rule-based fallback"
            else:
                return EditTargetRecord(
                    edit_type=parsed.value.type,
                    target=parsed.value.target,
                    source="llm",
                    raw=raw,
                    finish_reason=finish_reason,
                    error=error,
                )
    fallback = rule_based_edit_target(instruction.as_text())
    if fallback is None:
        # Nothing better is known: search for the concept's object in the original image.
        return EditTargetRecord(
            edit_type="MODIFY",
            target=instruction.concept or instruction.change,
            source="rules",
            note=(note + "; " if note else "") + "rule-based parser found no target; using the concept",
            raw=raw,
            finish_reason=finish_reason,
            error=error,
        )
    return EditTargetRecord(
        edit_type=fallback.type,
        target=fallback.target,
        source="rules",
        note=note,
        raw=raw,
        finish_reason=finish_reason,
        error=error,
    )


def score_sample(steps: Sequence[ChainStep]) -> SampleScores:
    """Per-sample CCS_binary (mean of CCS_j = AC_j · EF_j) and CCS_graded (mean of (s_j − 1) / 4)
    over the verified steps. A score needs every one of those steps judged: a step without a
    readable verdict of that kind (an unreadable judgement, a failed re-query) leaves the score
    None (unscored, counted), never a 0 and never a mean over the other steps."""
    ccs = [s.binary.ccs for s in steps if s.binary is not None and s.binary.ccs is not None]
    graded = [s.graded.normalised for s in steps if s.graded is not None and s.graded.normalised is not None]
    return SampleScores(
        ccs_binary=sum(ccs) / len(ccs) if ccs and len(ccs) == len(steps) else None,
        ccs_graded=sum(graded) / len(graded) if graded and len(graded) == len(steps) else None,
        ac=tuple(s.binary.ac if s.binary else None for s in steps),
        ef=tuple(s.binary.ef if s.binary else None for s in steps),
    )


def _unjudged(steps: Sequence[ChainStep]) -> str:
    """Why a sample has no score: the steps without a readable verdict, and their errors."""
    missing = [
        (j, s.requery_error or (s.binary.error if s.binary else None) or "not judged")
        for j, s in enumerate(steps, 1)
        if s.binary is None or s.binary.ccs is None
    ]
    if len(missing) == len(steps):
        return "no step could be judged: " + "; ".join(why for _, why in missing)
    return "not every step could be judged: " + "; ".join(f"step {j}: {why}" for j, why in missing)


class _Stages(TypedDict, total=False):
    """What ``sample_protocol`` has recorded of a sample so far (the ``SampleRecord`` fields filled
    stage by stage; the others are given when it finishes)."""

    baseline: Exchange
    concepts: ConceptsRecord
    instructions: InstructionsRecord


def sample_protocol(sample: SampleInput, cfg: ProtocolConfig) -> Protocol:
    """Run EDCT on one sample. See the module docstring for the request flow."""
    record: _Stages = {}

    def finish(
        status: SampleStatus,
        reason: str | None = None,
        steps: tuple[ChainStep, ...] = (),
        scores: SampleScores | None = None,
    ) -> SampleRecord:
        return SampleRecord(sample=sample, **record, status=status, reason=reason, steps=steps, scores=scores)

    # Stage 1: baseline answer and explanation, one conversation.
    baseline = yield from _ask_exchange(sample, sample.image, "baseline")
    if isinstance(baseline, Failure):
        return finish("error", BASELINE_FAILED + baseline.describe())
    record["baseline"] = baseline

    # Stage 2: concept extraction.
    (reply,) = yield (concepts_request(cfg, sample.question, baseline),)
    text = _raw(reply)
    if isinstance(text, Failure):
        record["concepts"] = ConceptsRecord(error=text.describe(), unscored="transport")
        return finish("unscored", f"concept extraction failed: {text.describe()}")
    parsed_concepts = parsing.parse_concepts(text, cfg.k, finish_reason=_finish(reply))
    if isinstance(parsed_concepts, parsing.Unparsed):
        record["concepts"] = ConceptsRecord(
            raw=text,
            finish_reason=_finish(reply),
            error=parsed_concepts.reason,
            unscored=parsed_concepts.kind,
        )
        return finish("unscored", f"concept extraction unparseable: {parsed_concepts.reason}")
    concepts = tuple(parsed_concepts.value)
    found = evidence.check_concepts(
        concepts, question=sample.question, answer=baseline.answer, explanation=baseline.explanation
    )
    if found is not None:  # read, but not what the explanation cites
        record["concepts"] = ConceptsRecord(
            raw=text, finish_reason=_finish(reply), error=found.reason, unscored=found.kind
        )
        return finish("unscored", f"concept extraction not evidence ({found.kind}): {found.reason}")
    record["concepts"] = ConceptsRecord(raw=text, finish_reason=_finish(reply), concepts=concepts)

    # Stage 3: the whole chain of edit instructions in one call.
    (reply,) = yield (
        llm_request(
            "extractor",
            "edit_instructions",
            "instructions",
            cfg.max_new_tokens,
            question=sample.question,
            answer=baseline.answer,
            explanation=baseline.explanation,
            concepts="\n".join(f"{i}. {c}" for i, c in enumerate(concepts, 1)),
            n=len(concepts),
        ),
    )
    text = _raw(reply)
    if isinstance(text, Failure):
        record["instructions"] = InstructionsRecord(error=text.describe(), unscored="transport")
        return finish("unscored", f"instruction writing failed: {text.describe()}")
    parsed_instr = parsing.parse_instructions(text, len(concepts), finish_reason=_finish(reply))
    if isinstance(parsed_instr, parsing.Unparsed):
        record["instructions"] = InstructionsRecord(
            raw=text, finish_reason=_finish(reply), error=parsed_instr.reason, unscored=parsed_instr.kind
        )
        return finish("unscored", f"edit instructions unparseable: {parsed_instr.reason}")
    found = evidence.check_instructions(
        [(ins.change, concept) for ins, concept in zip(parsed_instr.value, concepts, strict=False)]
    )
    if found is not None:  # a change that only names its concept edits nothing
        record["instructions"] = InstructionsRecord(
            raw=text, finish_reason=_finish(reply), error=found.reason, unscored=found.kind
        )
        return finish("unscored", f"edit instructions not evidence ({found.kind}): {found.reason}")
    chain = tuple(
        ins if ins.concept else ins.model_copy(update={"concept": concept})
        for ins, concept in zip(parsed_instr.value, concepts, strict=False)
    )
    record["instructions"] = InstructionsRecord(raw=text, finish_reason=_finish(reply), instructions=chain)

    # Stages 4–7 for every edit of the chain.
    steps: list[ChainStep] = []
    pending: tuple[AskLLM, ...] = ()  # judge requests of the previous step, sent with this edit
    current = sample.image
    failure_reason: str | None = None
    for j, instruction in enumerate(chain, 1):
        step = ChainStep(index=j, instruction=instruction)
        text_instruction = instruction.as_text()
        attempts: list[EditAttempt] = []
        edit_target: EditTargetRecord | None = None
        for attempt in range(cfg.edit_attempts):
            seed = cfg.seed + 1000 * j + attempt
            batch: list[Request] = [*pending, EditImage(current, text_instruction, j, attempt, seed)]
            wants_parse = edit_target is None and cfg.llm_edit_parser
            if wants_parse:
                batch.append(
                    llm_request(
                        "edit_parser",
                        "edit_parse",
                        f"step{j}.edit_parse",
                        cfg.max_new_tokens,
                        instruction=text_instruction,
                    )
                )
            replies = yield tuple(batch)
            if pending:
                steps[-1] = _with_judgements(steps[-1], replies[: len(pending)], cfg)
                replies = replies[len(pending) :]
                pending = ()
            if edit_target is None:
                edit_target = _edit_target(instruction, replies[1] if wants_parse else None)
            reply = replies[0]
            if isinstance(reply, Failure) or not isinstance(reply, EditedImage):
                why = reply.describe() if isinstance(reply, Failure) else "editor returned no image"
                attempts.append(EditAttempt(attempt=attempt, seed=seed, failure=EDIT_FAILED + why))
                continue
            edited = reply.image
            (check,) = yield (
                VerifyEdit(current, edited, edit_target.edit_type, edit_target.target, j, attempt),
            )
            if isinstance(check, Failure) or not isinstance(check, EditCheck):
                why = check.describe() if isinstance(check, Failure) else "no verification record"
                attempts.append(
                    EditAttempt(
                        attempt=attempt,
                        seed=seed,
                        image=edited,
                        resized_from=reply.resized_from,
                        failure=VERIFY_FAILED + why,
                    )
                )
                continue
            attempts.append(
                EditAttempt(
                    attempt=attempt,
                    seed=seed,
                    image=edited,
                    resized_from=reply.resized_from,
                    check=check,
                    failure=None if check.passed else f"verification: {check.verdict}",
                )
            )
            if check.passed:
                break
        verified = bool(attempts) and attempts[-1].passed
        image = attempts[-1].image if verified else None
        step = step.model_copy(
            update={
                "edit_target": edit_target,
                "attempts": tuple(attempts),
                "verified": verified,
                "image": image,
            }
        )
        if image is None:  # not verified (a verified attempt always has its image)
            failure_reason = (
                f"edit {j} failed verification after {len(attempts)} attempt(s): {attempts[-1].failure}"
            )
            steps.append(step)
            break
        current = image

        requery = yield from _ask_exchange(sample, current, f"step{j}")
        if isinstance(requery, Failure):
            steps.append(step.model_copy(update={"requery_error": requery.describe()}))
            continue
        step = step.model_copy(update={"requery": requery})
        steps.append(step)
        pending = judge_requests(cfg, sample, baseline, chain[:j], requery)

    if pending:
        replies = yield pending
        steps[-1] = _with_judgements(steps[-1], replies, cfg)

    if failure_reason is not None and (cfg.exclusion_policy == "exclude_sample" or len(steps) == 1):
        return finish("excluded", failure_reason, steps=tuple(steps))
    scored_steps = [s for s in steps if s.verified]
    scores = score_sample(scored_steps)
    if scores.ccs_binary is None and scores.ccs_graded is None:
        return finish("unscored", _unjudged(scored_steps), steps=tuple(steps), scores=scores)
    return finish("scored", failure_reason, steps=tuple(steps), scores=scores)
