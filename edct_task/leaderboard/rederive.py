"""Re-derive sample records by replaying the protocol on their own evidence.

A bundle's author can edit any number of a record and reseal the archive, so the board trusts
none: it drives ``sample_protocol`` (in lockstep, ``engine.lockstep.lockstep``) with every
request answered from the record's own evidence (``leaderboard.evidence.Evidence``: the raw
replies, images, gate numbers and failures it kept) under the run's own protocol and gate
settings, and compares the record the protocol produces with the recorded one. The first
difference, in the record's field order, is raised as :class:`Mismatch`, naming the sample and
step. There is no second statement of the protocol's rules here: a change to the protocol
changes the replay with it.

What the protocol does not make is taken from the record (``expected``): the schema version and
the target's rendering; a version-1 record's edit targets (it kept no edit-parser reply); and an
``error`` record written outside the protocol (an unreadable input, a protocol bug), whose only
evidence is its reason.

Re-judging (``leaderboard.rejudge``) is the same replay with the judge's requests sent to a live
dispatcher. The known-answer controls are re-derived by ``rederive_controls``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from edct_task.core.records import BinaryScore, GradedScore, SampleRecord, SampleScores
from edct_task.core.requests import Failure
from edct_task.engine.lockstep import Round, lockstep
from edct_task.engine.protocol import BASELINE_FAILED, ProtocolConfig
from edct_task.leaderboard.evidence import KEEPS_PARSER_REPLY, Evidence
from edct_task.scoring.metrics import family
from model_adapters.contracts import Completion
from verification.gate import gate_verdict
from verification.records import EditCheck, GateParams

Answer = Callable[[Round], Sequence[object]]
"""Replies to one round of the replay, in order."""
Path = tuple[str | int, ...]


class Mismatch(Exception):
    """A recorded value that does not follow from the evidence below it."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def protocol_of(setup_protocol: Mapping[str, Any]) -> ProtocolConfig:
    """The protocol settings of a setup."""
    try:
        return ProtocolConfig.model_validate(dict(setup_protocol))
    except ValueError as exc:
        raise Mismatch("setup_mismatch", f"the run's protocol settings are not valid ({exc})") from None


def gate_of(setup_verification: Mapping[str, Any]) -> GateParams:
    """The gate parameters of a setup (τ_in and τ_out must be stated)."""
    if not {"tau_in", "tau_out"} <= set(setup_verification):
        raise Mismatch("setup_mismatch", "the setup's gate thresholds τ_in/τ_out are missing")
    try:
        return GateParams.model_validate(dict(setup_verification))
    except ValueError as exc:
        raise Mismatch("setup_mismatch", f"the run's gate settings are not valid ({exc})") from None


def from_evidence(evidence: Mapping[str, Evidence]) -> Answer:
    """Every request answered from its sample's record."""
    return lambda round_: [evidence[sample.id].answer(request) for sample, request in round_]


def replay(records: Sequence[SampleRecord], cfg: ProtocolConfig, answer: Answer) -> list[SampleRecord]:
    """The records the protocol makes under ``cfg`` with ``answer``'s replies (``expected``)."""
    made = lockstep([r.sample for r in records], cfg, answer)
    return [expected(r, m) for r, m in zip(records, made, strict=True)]


def expected(record: SampleRecord, made: SampleRecord) -> SampleRecord:
    """``made`` with what the protocol does not make taken from ``record`` (module docstring)."""
    if record.status == "error" and not (record.reason or "").startswith(BASELINE_FAILED):
        made = SampleRecord(sample=record.sample, status="error", reason=record.reason)
    update: dict[str, Any] = {
        "schema_version": record.schema_version,
        "target_rendering": record.target_rendering,
    }
    if record.schema_version < KEEPS_PARSER_REPLY:
        kept = [s.edit_target for s in record.steps]
        update["steps"] = tuple(
            s.model_copy(update={"edit_target": kept[i]}) if i < len(kept) else s
            for i, s in enumerate(made.steps)
        )
    return made.model_copy(update=update)


def rederive_records(
    records: Sequence[SampleRecord], cfg: ProtocolConfig, setup_verification: Mapping[str, Any]
) -> None:
    """Raise :class:`Mismatch` at the first record that its own evidence does not reproduce."""
    gate = gate_of(setup_verification)
    evidence = {r.sample.id: Evidence(r, gate) for r in records}
    for record, mine in zip(records, replay(records, cfg, from_evidence(evidence)), strict=True):
        if mine == record:  # the common case, without walking the two
            continue
        found = first_difference(mine.model_dump(mode="json"), record.model_dump(mode="json"))
        if found is not None:
            raise mismatch(record, mine, found[0], gate)


def first_difference(mine: Any, theirs: Any, path: Path = ()) -> tuple[Path, Any, Any] | None:
    """The first place two JSON values differ (numbers within 1e-9), in ``mine``'s key order."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        keys = [*mine, *(k for k in theirs if k not in mine)]
        return next(
            (d for k in keys if (d := first_difference(mine.get(k), theirs.get(k), (*path, k)))), None
        )
    if isinstance(mine, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            if (d := first_difference(a, b, (*path, i))) is not None:
                return d
        return None if len(mine) == len(theirs) else (path, mine, theirs)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (mine, theirs))
    if numbers and math.isclose(mine, theirs, rel_tol=0, abs_tol=1e-9):
        return None
    return None if mine == theirs and type(mine) is type(theirs) else (path, mine, theirs)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _place(path: Path) -> str:
    """``steps, 0, attempts, 1, check, passed`` → ``step 1 attempt 1 check.passed``."""
    parts: list[str] = []
    for key in path:
        if isinstance(key, int):
            name = parts.pop() if parts else "item"
            label = {"steps": "step", "attempts": "attempt", "votes": "vote"}.get(name, name)
            parts.append(f"{label} {key + 1 if name == 'steps' else key}")
        else:
            parts.append(key if not parts or " " in parts[-1] else f"{parts.pop()}.{key}")
    return " ".join(parts)


def _verdict(binary: BinaryScore | None, graded: GradedScore | None) -> str:
    return (
        f"AC={binary.ac if binary else None} EF={binary.ef if binary else None} "
        f"graded={graded.score if graded else None}"
    )


def _scores(scores: SampleScores | None) -> object:
    """The score rows' values (the metric table's ``score`` family), None without scores."""
    return None if scores is None else tuple(m.value(scores) for m in family("score"))


def mismatch(record: SampleRecord, mine: SampleRecord, path: Path, gate: GateParams) -> Mismatch:
    """The :class:`Mismatch` of the first difference at ``path`` between ``mine`` (the replay)
    and ``record``: its code by the layer it lies in, its reason in that layer's terms."""
    where = f"sample {ascii(record.sample.id)[1:-1]}"
    if path[:1] == ("scores",):
        return Mismatch(
            "score_mismatch",
            f"{where}: scores recorded as {', '.join(m.label for m in family('score'))} = "
            f"{_scores(record.scores)}, its steps "
            f"give {_scores(mine.scores)}",
        )
    if path[:1] == ("status",):
        return Mismatch(
            "status_mismatch", f"{where}: recorded {record.status}, but its steps make it {mine.status}"
        )
    theirs_at, mine_at = _at(record, path), _at(mine, path)
    detail = f"{_place(path)} recorded as {_short(theirs_at)}, its evidence gives {_short(mine_at)}"
    if path[:1] in (("concepts",), ("instructions",)):
        return Mismatch("verdict_mismatch", f"{where}: the extractor's raw reply does not give it ({detail})")
    if path[:1] != ("steps",) or len(path) < 3:
        return Mismatch("status_mismatch", f"{where}: {detail}")
    layer = path[2]
    at = f"{where} {_place(path[:2])}"
    if layer in ("binary", "graded", "votes"):
        (*a, _), (*b, vote) = _judged(mine, path), _judged(record, path)
        if _verdict(*a) == _verdict(*b):
            return Mismatch("verdict_mismatch", f"{where}: the judge's raw replies do not give it ({detail})")
        return Mismatch(
            "verdict_mismatch",
            f"{at}{vote}: the judge's raw replies parse to {_verdict(*a)}, the record says {_verdict(*b)}",
        )
    if layer not in ("edit_target", "attempts", "verified", "image"):
        return Mismatch("status_mismatch", f"{where}: {detail}")
    check = _at(record, path[:5]) if len(path) > 4 and path[4] == "check" else None
    if isinstance(check, Mapping):
        field = path[5] if len(path) > 5 else None
        return _gate_mismatch(f"{at} attempt {path[3]}", EditCheck.model_validate(check), gate, field, detail)
    return Mismatch("gate_mismatch", f"{where}: {detail}")


def _gate_mismatch(at: str, check: EditCheck, gate: GateParams, field: object, detail: str) -> Mismatch:
    for name, value in (("r_in", check.r_in), ("r_out", check.r_out)):
        if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
            return Mismatch("out_of_range", f"{at}: {name} {value} is not a share in [0, 1]")
    if (check.tau_in, check.tau_out) != (gate.tau_in, gate.tau_out):
        return Mismatch(
            "gate_mismatch",
            f"{at}: gate thresholds τ_in={check.tau_in} τ_out={check.tau_out} are not the setup's "
            f"τ_in={gate.tau_in} τ_out={gate.tau_out}",
        )
    if field in ("passed", "verdict") and check.r_in is not None and check.r_out is not None:
        verdict = gate_verdict(check.r_in, check.r_out, tau_in=gate.tau_in, tau_out=gate.tau_out)
        return Mismatch(
            "gate_mismatch",
            f"{at}: r_in={check.r_in} r_out={check.r_out} against τ_in={gate.tau_in} τ_out={gate.tau_out} "
            f"{'passes' if verdict == 'pass' else 'fails'}, the record says {check.verdict}",
        )
    return Mismatch("gate_mismatch", f"{at}: {detail}")


def _at(record: SampleRecord, path: Path) -> Any:
    """The JSON value at ``path`` in ``record`` (None where there is none)."""
    value: Any = record.model_dump(mode="json")
    for key in path:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and key < len(value) else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return value


def _judged(record: SampleRecord, path: Path) -> tuple[BinaryScore | None, GradedScore | None, str]:
    """The verdict the difference at ``path`` is in: a panel vote's, or the step's."""
    step = record.steps[path[1]]  # type: ignore[index]
    if path[2] == "votes" and len(path) > 3:
        vote = step.votes[path[3]]  # type: ignore[index]
        return vote.binary, vote.graded, f" vote {path[3]}"
    return step.binary, step.graded, ""


def _control_request(item: Any, record: Any, cfg: ProtocolConfig) -> Any:
    """The request of ``item`` whose reply ``record`` holds (its role, panel member and sample)."""
    from edct_task.engine.controls import control_requests

    for request in control_requests(item, cfg):
        role = request.role
        if role == "judge":
            role = "judge_binary" if request.template.startswith("judge_binary") else "judge_graded"
        judge = f"judge{request.member}" if request.role == "judge" and cfg.judges > 1 else request.role
        if role == record.role and judge == record.judge and request.sample == record.sample:
            return request
    return None


def rederive_controls(controls: Sequence[Any], cfg: ProtocolConfig, samples: Sequence[Any]) -> None:
    """Each known-answer control record checked against the shipped bank and its own raw reply.

    The item must be in the bank (``edct_task.controls.shipped``) and ask the role the record
    names, with the bank's known answer; a record counted right must be right when its raw reply
    is graded again with the protocol's parsers (``engine.controls.grade_control``). The finish
    reason is not recorded, so a reply is re-read as a complete one: a record counted *wrong* is
    never contradicted (a truncated reply the run refused may parse now), only one counted right.
    Each reply is recorded once, and the records are exactly the replies the run's draw asks for
    (``controls.draw`` over the domains of its ``samples``, with its seed): a control left out, or
    one marked unanswered while it holds a reply, is a mismatch. Raises :class:`Mismatch` (code
    ``controls_mismatch``)."""
    from edct_task.controls import control_domains, draw, shipped
    from edct_task.engine.controls import control_requests, grade_control
    from edct_task.roles import CALIBRATION_SOURCE

    calibration = bool(samples) and all(
        r.sample.metadata.get("source") == CALIBRATION_SOURCE for r in samples
    )
    domains = control_domains([r.sample.domain for r in samples], calibration)
    expected = set()
    for item in draw(domains, cfg.controls, seed=cfg.seed, k=cfg.k):
        requests = control_requests(item, cfg)
        for r in grade_control(item, requests, [Failure("drawn", "")] * len(requests), cfg):
            expected.add((r.id, r.role, r.judge, r.sample))
    bank = {item.id: item for item in shipped()}
    seen: set[tuple[str, str, str, int]] = set()
    for number, record in enumerate(controls, 1):
        where = f"controls.jsonl line {number} ({record.id})"
        key = (record.id, record.role, record.judge, record.sample)
        if key in seen:
            raise Mismatch("controls_mismatch", f"{where}: the same control reply is recorded twice")
        if key not in expected:
            raise Mismatch("controls_mismatch", f"{where}: not a control this run's draw sends")
        if record.unanswered != (record.raw is None):
            raise Mismatch("controls_mismatch", f"{where}: marked unanswered, yet holds a reply (or not)")
        seen.add(key)
        item = bank.get(record.id)
        if item is None:
            raise Mismatch("controls_mismatch", f"{where}: not a control of the shipped bank")
        request = _control_request(item, record, cfg)
        if request is None:
            raise Mismatch("controls_mismatch", f"{where}: the setup sends no such {record.role} request")
        reply: object = (
            Failure("recorded", record.error or "no reply recorded")
            if record.raw is None
            else Completion(text=record.raw, finish_reason="stop")
        )
        (graded,) = grade_control(item, [request], [reply], cfg)
        if graded.expected != record.expected or graded.kind != record.kind:
            raise Mismatch("controls_mismatch", f"{where}: the known answer is not the bank's")
        if record.correct and not graded.correct:
            raise Mismatch(
                "controls_mismatch",
                f"{where}: counted right, but its recorded reply does not give the answer",
            )
    if seen != expected:
        missing = sorted(expected - seen)[0]
        raise Mismatch(
            "controls_mismatch",
            f"controls.jsonl lacks {len(expected - seen)} of the replies the run's draw sends "
            f"(first: {missing[0]}, {missing[1]})",
        )
