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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from edct_task import parsing, prompts
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
)
from edct_task.core.requests import (
    AskLLM,
    AskTarget,
    EditedImage,
    EditImage,
    Failure,
    Message,
    Request,
    VerifyEdit,
)
from edct_task.scoring import panel
from model_adapters.contracts import Completion
from verification.edit_parsing import rule_based_edit_target
from verification.records import EditCheck

ExclusionPolicy = Literal["exclude_sample", "truncate_chain"]
Protocol = Generator[tuple[Request, ...], tuple[object, ...], SampleRecord]


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


def _llm(role: str, template: str, purpose: str, max_new_tokens: int, **fields: object) -> AskLLM:
    t = prompts.get_template(template)
    return AskLLM(
        role=role,  # type: ignore[arg-type]
        prompt=t.render(**fields),
        template=t.tag,
        purpose=purpose,
        max_new_tokens=max_new_tokens,
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


def _judge_requests(
    cfg: ProtocolConfig,
    sample: SampleInput,
    baseline: Exchange,
    chain: Sequence[EditInstruction],
    requery: Exchange,
) -> tuple[AskLLM, ...]:
    fields = {
        "question": sample.question,
        "answer": baseline.answer,
        "explanation": baseline.explanation,
        "edits": render_edits(chain),
        "new_answer": requery.answer,
        "new_explanation": requery.explanation,
    }
    j = len(chain)
    binary = _llm("judge", "judge_binary", f"step{j}.judge_binary", cfg.max_new_tokens, **fields)
    graded = _llm("judge", "judge_graded", f"step{j}.judge_graded", cfg.graded_max_new_tokens, **fields)
    requests = []
    for member in range(cfg.judges):
        for sample_index in range(cfg.judge_samples):
            vote = {"member": member, "sample": sample_index, "temperature": cfg.judge_temperature}
            requests.append(replace(binary, **vote))
            if cfg.graded:
                requests.append(replace(graded, **vote))
    return tuple(requests)


def _binary(reply: object) -> BinaryScore:
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


def _graded(reply: object) -> GradedScore:
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
                binary=_binary(replies[i]),
                graded=_graded(replies[i + 1]) if cfg.graded else None,
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
    votes: Sequence[JudgeVote], value: Callable[[JudgeVote], int | float | None]
) -> dict[str, list]:
    out: dict[str, list] = {}
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
    note = ""
    if reply is not None:
        text = _raw(reply)
        if isinstance(text, Failure):
            note = f"edit parser failed ({text.describe()}); rule-based fallback"
        else:
            parsed = parsing.parse_edit_target(text, finish_reason=_finish(reply))
            if isinstance(parsed, parsing.Parsed):
                return EditTargetRecord(edit_type=parsed.value.type, target=parsed.value.target, source="llm")
            note = f"edit parser reply unparseable ({parsed.reason}); rule-based fallback"
    fallback = rule_based_edit_target(instruction.as_text())
    if fallback is None:
        # Nothing better is known: search for the concept's object in the original image.
        return EditTargetRecord(
            edit_type="MODIFY",
            target=instruction.concept or instruction.change,
            source="rules",
            note=(note + "; " if note else "") + "rule-based parser found no target; using the concept",
        )
    return EditTargetRecord(edit_type=fallback.type, target=fallback.target, source="rules", note=note)


def score_sample(steps: Sequence[ChainStep]) -> SampleScores:
    """Per-sample CCS_binary (mean of CCS_j = AC_j · EF_j) and CCS_graded (mean of (s_j − 1) / 4) over
    the verified, judged steps; a step without a readable judgement is left out, never a 0."""
    ccs = [s.binary.ccs for s in steps if s.binary is not None and s.binary.ccs is not None]
    graded = [s.graded.normalised for s in steps if s.graded is not None and s.graded.normalised is not None]
    return SampleScores(
        ccs_binary=sum(ccs) / len(ccs) if ccs else None,
        ccs_graded=sum(graded) / len(graded) if graded else None,
        ac=tuple(s.binary.ac if s.binary else None for s in steps),
        ef=tuple(s.binary.ef if s.binary else None for s in steps),
    )


def sample_protocol(sample: SampleInput, cfg: ProtocolConfig) -> Protocol:
    """Run EDCT on one sample. See the module docstring for the request flow."""
    record = {"sample": sample}

    def finish(status: str, reason: str | None = None, **extra: object) -> SampleRecord:
        return SampleRecord(**record, **extra, status=status, reason=reason)  # type: ignore[arg-type]

    # Stage 1: baseline answer and explanation, one conversation.
    baseline = yield from _ask_exchange(sample, sample.image, "baseline")
    if isinstance(baseline, Failure):
        return finish("error", f"target failed at baseline: {baseline.describe()}")
    record["baseline"] = baseline

    # Stage 2: concept extraction.
    (reply,) = yield (
        _llm(
            "extractor",
            "extract_concepts",
            "concepts",
            cfg.max_new_tokens,
            question=sample.question,
            answer=baseline.answer,
            explanation=baseline.explanation,
            k=cfg.k,
        ),
    )
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
    record["concepts"] = ConceptsRecord(raw=text, finish_reason=_finish(reply), concepts=concepts)

    # Stage 3: the whole chain of edit instructions in one call.
    (reply,) = yield (
        _llm(
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
                    _llm(
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
                attempts.append(EditAttempt(attempt=attempt, seed=seed, failure=f"edit failed: {why}"))
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
                        failure=f"verification failed: {why}",
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
        step = step.model_copy(
            update={
                "edit_target": edit_target,
                "attempts": tuple(attempts),
                "verified": verified,
                "image": attempts[-1].image if verified else None,
            }
        )
        if not verified:
            failure_reason = (
                f"edit {j} failed verification after {len(attempts)} attempt(s): {attempts[-1].failure}"
            )
            steps.append(step)
            break
        current = attempts[-1].image  # type: ignore[assignment]

        requery = yield from _ask_exchange(sample, current, f"step{j}")
        if isinstance(requery, Failure):
            steps.append(step.model_copy(update={"requery_error": requery.describe()}))
            continue
        step = step.model_copy(update={"requery": requery})
        steps.append(step)
        pending = _judge_requests(cfg, sample, baseline, chain[:j], requery)

    if pending:
        replies = yield pending
        steps[-1] = _with_judgements(steps[-1], replies, cfg)

    if failure_reason is not None and (cfg.exclusion_policy == "exclude_sample" or len(steps) == 1):
        return finish("excluded", failure_reason, steps=tuple(steps))
    scored_steps = [s for s in steps if s.verified]
    scores = score_sample(scored_steps)
    if scores.ccs_binary is None and scores.ccs_graded is None:
        why = "; ".join(
            s.requery_error or (s.binary.error if s.binary else None) or "not judged" for s in scored_steps
        )
        return finish("unscored", f"no step could be judged: {why}", steps=tuple(steps), scores=scores)
    return finish("scored", failure_reason, steps=tuple(steps), scores=scores)


judge_requests = _judge_requests
"""The judge requests of one step (public for the leaderboard's re-judging)."""
with_judgements = _with_judgements
"""A step with its judge replies parsed and combined (public for the leaderboard's re-derivation)."""
