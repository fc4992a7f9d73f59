"""Re-derive a sample record from its most primitive evidence, the way the protocol derived it.

A record's numbers are layered: raw judge replies → step verdicts (AC, EF, graded score) →
sample scores → status, and gate numbers (r_in, r_out, τ) → attempt verdicts → verified steps →
status. A bundle's author can edit any layer and reseal the archive, so every layer is rebuilt
here from the one below it with the protocol's own functions (``edct_task.parsing`` through
``protocol.with_judgements``, ``protocol.score_sample``) and compared with what is recorded:

- concepts and edit instructions re-parsed from the extractor's raw replies;
- each attempt's pass/fail from its r_in and r_out against the setup's τ_in and τ_out (the
  thresholds recorded in the check must be the setup's), in range [0, 1];
- a step is verified exactly when its last attempt passed; a failed step used every attempt and
  ends the chain; the chain follows the instructions in order, at most k long;
- each judged step's AC, EF and graded score re-parsed from the stored raw replies (every panel
  vote, then the panel's majority and mean);
- the sample's scores recomputed from its verified steps, and its status (scored, excluded,
  unscored, error) from the steps and the exclusion policy.

The first difference is raised as :class:`Mismatch`, naming the sample and step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from edct_task import parsing
from edct_task.core.records import BinaryScore, ChainStep, GradedScore, SampleRecord
from edct_task.core.requests import Failure
from edct_task.engine.protocol import ProtocolConfig, score_sample, with_judgements
from model_adapters.contracts import Completion


class Mismatch(Exception):
    """A recorded value that does not follow from the evidence below it."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-9)


def protocol_of(setup_protocol: Mapping[str, Any]) -> ProtocolConfig:
    """The protocol settings of a setup (seeds are not part of it and not needed here)."""
    try:
        return ProtocolConfig.model_validate(dict(setup_protocol))
    except ValueError as exc:
        raise Mismatch("setup_mismatch", f"the run's protocol settings are not valid ({exc})") from None


def _reply(score: BinaryScore | GradedScore | None) -> object:
    """What the judge sent, as the protocol received it: its raw text, or the failure."""
    if score is None or score.raw is None:
        return Failure("recorded", (score.error if score else None) or "no reply recorded")
    return Completion(text=score.raw, finish_reason=score.finish_reason)


def _recorded_replies(step: ChainStep, cfg: ProtocolConfig, where: str) -> list[object]:
    votes = cfg.judges * cfg.judge_samples
    if votes == 1:
        if step.votes:
            raise Mismatch("verdict_mismatch", f"{where}: panel votes recorded for a single judge")
        return [_reply(step.binary), _reply(step.graded)] if cfg.graded else [_reply(step.binary)]
    if len(step.votes) != votes:
        raise Mismatch(
            "verdict_mismatch", f"{where}: {len(step.votes)} judge vote(s) recorded, the setup asks {votes}"
        )
    order = [(m, s) for m in range(cfg.judges) for s in range(cfg.judge_samples)]
    if [(v.member, v.sample) for v in step.votes] != order:
        raise Mismatch("verdict_mismatch", f"{where}: judge votes are not in panel order")
    replies: list[object] = []
    for v in step.votes:
        replies.append(_reply(v.binary))
        if cfg.graded:
            replies.append(_reply(v.graded))
    return replies


def _verdict(binary: BinaryScore | None, graded: GradedScore | None) -> str:
    ac = binary.ac if binary else None
    ef = binary.ef if binary else None
    score = graded.score if graded else None
    return f"AC={ac} EF={ef} graded={score}"


def _same_verdict(
    a: tuple[BinaryScore | None, GradedScore | None], b: tuple[BinaryScore | None, GradedScore | None]
) -> bool:
    def parts(bg: tuple[BinaryScore | None, GradedScore | None]) -> tuple[Any, Any, Any]:
        binary, graded = bg
        if binary is None:
            return (None, None, graded.score if graded else None)
        return (binary.ac, binary.ef, graded.score if graded else None)

    pa, pb = parts(a), parts(b)
    return pa[:2] == pb[:2] and _close(pa[2], pb[2])


def rejudged_step(step: ChainStep, replies: Sequence[object], cfg: ProtocolConfig) -> ChainStep:
    """``step`` judged afresh from ``replies`` (recorded ones, or a board judge's)."""
    bare = step.model_copy(update={"binary": None, "graded": None, "votes": ()})
    return with_judgements(bare, replies, cfg)


def _check_judgement(step: ChainStep, cfg: ProtocolConfig, where: str) -> None:
    expected = rejudged_step(step, _recorded_replies(step, cfg, where), cfg)
    for i, (mine, theirs) in enumerate(zip(expected.votes, step.votes, strict=True)):
        if not _same_verdict((mine.binary, mine.graded), (theirs.binary, theirs.graded)):
            raise Mismatch(
                "verdict_mismatch",
                f"{where} vote {i}: the judge's raw replies parse to {_verdict(mine.binary, mine.graded)}, "
                f"the record says {_verdict(theirs.binary, theirs.graded)}",
            )
    if not _same_verdict((expected.binary, expected.graded), (step.binary, step.graded)):
        raise Mismatch(
            "verdict_mismatch",
            f"{where}: the judge's raw replies parse to {_verdict(expected.binary, expected.graded)}, "
            f"the record says {_verdict(step.binary, step.graded)}",
        )


def _check_attempts(step: ChainStep, cfg: ProtocolConfig, tau_in: float, tau_out: float, where: str) -> None:
    attempts = step.attempts
    if not attempts:
        raise Mismatch("gate_mismatch", f"{where}: no edit attempt recorded")
    if len(attempts) > cfg.edit_attempts:
        raise Mismatch(
            "gate_mismatch", f"{where}: {len(attempts)} edit attempts, the setup allows {cfg.edit_attempts}"
        )
    for i, a in enumerate(attempts):
        at = f"{where} attempt {i}"
        if a.attempt != i:
            raise Mismatch("gate_mismatch", f"{at}: recorded as attempt {a.attempt}")
        c = a.check
        if c is None:
            if a.failure is None:
                raise Mismatch("gate_mismatch", f"{at}: neither a verification record nor a failure")
            continue
        if a.image is None:
            raise Mismatch("gate_mismatch", f"{at}: a verification record without an edited image")
        if (c.tau_in, c.tau_out, c.params.tau_in, c.params.tau_out) != (tau_in, tau_out, tau_in, tau_out):
            raise Mismatch(
                "gate_mismatch",
                f"{at}: gate thresholds τ_in={c.tau_in} τ_out={c.tau_out} are not the setup's "
                f"τ_in={tau_in} τ_out={tau_out}",
            )
        if c.r_in is None or c.r_out is None:
            should_pass = False
        else:
            for name, value in (("r_in", c.r_in), ("r_out", c.r_out)):
                if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                    raise Mismatch("out_of_range", f"{at}: {name} {value} is not a share in [0, 1]")
            should_pass = c.r_in > tau_in and c.r_out < tau_out
        if c.passed != should_pass or (c.verdict == "pass") != should_pass:
            raise Mismatch(
                "gate_mismatch",
                f"{at}: r_in={c.r_in} r_out={c.r_out} against τ_in={tau_in} τ_out={tau_out} "
                f"{'passes' if should_pass else 'fails'}, the record says {c.verdict}",
            )
    passed = [a.passed for a in attempts]
    if any(passed[:-1]):
        raise Mismatch("gate_mismatch", f"{where}: an attempt passed but was retried")
    if step.verified != passed[-1]:
        raise Mismatch(
            "gate_mismatch",
            f"{where}: recorded {'verified' if step.verified else 'not verified'}, but its last attempt "
            f"{'passed' if passed[-1] else 'failed'} the gate",
        )
    if not step.verified and len(attempts) != cfg.edit_attempts:
        raise Mismatch(
            "gate_mismatch",
            f"{where}: failed after {len(attempts)} attempt(s), the setup retries up to {cfg.edit_attempts}",
        )
    if step.image != (attempts[-1].image if step.verified else None):
        raise Mismatch("gate_mismatch", f"{where}: its image is not the verified attempt's")


def _check_extraction(record: SampleRecord, cfg: ProtocolConfig, where: str) -> None:
    concepts, instructions = record.concepts, record.instructions
    for name, part in (("concepts", concepts), ("edit instructions", instructions)):
        if part is not None and part.error is None and part.raw is None:
            raise Mismatch("verdict_mismatch", f"{where}: {name} recorded without the extractor's reply")
    if concepts is not None and concepts.raw is not None:
        parsed = parsing.parse_concepts(concepts.raw, cfg.k, finish_reason=concepts.finish_reason)
        ok = (
            isinstance(parsed, parsing.Parsed) and tuple(parsed.value) == concepts.concepts
            if concepts.error is None
            else isinstance(parsed, parsing.Unparsed)
        )
        if not ok:
            raise Mismatch(
                "verdict_mismatch", f"{where}: the extractor's raw reply does not give its concepts"
            )
    if instructions is not None and instructions.raw is not None and concepts is not None:
        parsed_i = parsing.parse_instructions(
            instructions.raw, len(concepts.concepts), finish_reason=instructions.finish_reason
        )
        if instructions.error is None:
            chain = (
                tuple(
                    ins if ins.concept else ins.model_copy(update={"concept": c})
                    for ins, c in zip(parsed_i.value, concepts.concepts, strict=False)
                )
                if isinstance(parsed_i, parsing.Parsed)
                else None
            )
            ok = chain == instructions.instructions
        else:
            ok = isinstance(parsed_i, parsing.Unparsed)
        if not ok:
            raise Mismatch(
                "verdict_mismatch", f"{where}: the extractor's raw reply does not give its edit instructions"
            )


def expected_status(steps: Sequence[ChainStep], cfg: ProtocolConfig) -> tuple[str, Any]:
    """(status, scores) the protocol gives a record whose chain ran to ``steps``."""
    failed = any(not s.verified for s in steps)
    if failed and (cfg.exclusion_policy == "exclude_sample" or len(steps) == 1):
        return "excluded", None
    scores = score_sample([s for s in steps if s.verified])
    if scores.ccs_binary is None and scores.ccs_graded is None:
        return "unscored", scores
    return "scored", scores


def rederive_record(record: SampleRecord, cfg: ProtocolConfig, gate: Mapping[str, Any]) -> None:
    """Raise :class:`Mismatch` unless every layer of ``record`` follows from the one below."""
    sid = ascii(record.sample.id)[1:-1]
    where = f"sample {sid}"
    tau_in, tau_out = gate.get("tau_in"), gate.get("tau_out")
    if not all(isinstance(t, (int, float)) and 0 <= t <= 1 for t in (tau_in, tau_out)):
        raise Mismatch("setup_mismatch", "the setup's gate thresholds τ_in/τ_out are missing or out of range")
    if record.status == "error":
        if record.baseline is not None or record.steps or record.scores is not None:
            raise Mismatch("status_mismatch", f"{where}: status error, but the target answered the baseline")
        return
    if record.baseline is None:
        raise Mismatch("status_mismatch", f"{where}: status {record.status} without a baseline answer")
    _check_extraction(record, cfg, where)
    steps = record.steps
    if not steps:
        stopped = (
            record.concepts is None
            or record.concepts.error is not None
            or record.instructions is None
            or record.instructions.error is not None
        )
        if record.status != "unscored" or not stopped or record.scores is not None:
            raise Mismatch(
                "status_mismatch",
                f"{where}: status {record.status} with no chain step and no extraction failure",
            )
        return
    chain = record.instructions.instructions if record.instructions else ()
    if len(steps) > min(cfg.k, len(chain)):
        raise Mismatch(
            "status_mismatch", f"{where}: {len(steps)} steps for a chain of {len(chain)} (k={cfg.k})"
        )
    for j, step in enumerate(steps, 1):
        at = f"{where} step {j}"
        if step.index != j or step.instruction != chain[j - 1]:
            raise Mismatch("status_mismatch", f"{at}: not the chain's edit {j}")
        _check_attempts(step, cfg, float(tau_in), float(tau_out), at)  # type: ignore[arg-type]
        if not step.verified:
            if j != len(steps):
                raise Mismatch("status_mismatch", f"{at}: the chain continued after a failed edit")
            if step.requery or step.binary or step.graded or step.votes:
                raise Mismatch("status_mismatch", f"{at}: an unverified edit was re-queried or judged")
            continue
        if step.requery is None:
            if step.binary or step.graded or step.votes or not step.requery_error:
                raise Mismatch("status_mismatch", f"{at}: judged without a re-query answer")
            continue
        _check_judgement(step, cfg, at)
    if all(s.verified for s in steps) and len(steps) != len(chain):
        raise Mismatch(
            "status_mismatch", f"{where}: the chain stopped after {len(steps)} of {len(chain)} edits"
        )
    status, scores = expected_status(steps, cfg)
    if record.status != status:
        raise Mismatch(
            "status_mismatch",
            f"{where}: recorded {record.status}, but its steps make it {status}",
        )
    mine, theirs = scores, record.scores
    if mine is None:
        if theirs is not None:
            raise Mismatch("score_mismatch", f"{where}: an excluded sample carries scores")
        return
    if theirs is None or not (
        _close(mine.ccs_binary, theirs.ccs_binary)
        and _close(mine.ccs_graded, theirs.ccs_graded)
        and mine.ac == theirs.ac
        and mine.ef == theirs.ef
    ):
        shown = None if theirs is None else (theirs.ccs_binary, theirs.ccs_graded)
        raise Mismatch(
            "score_mismatch",
            f"{where}: scores recorded as CCS_binary, CCS_graded = {shown}, its steps give "
            f"{(mine.ccs_binary, mine.ccs_graded)}",
        )
