"""The board re-judges: its own judge (and, with ``regate``, its own edit gate) on every entry.

Verification proves that a bundle's numbers follow from its raw judge replies; it cannot prove
that the replies came from the judge the setup names. A submitter who rewrites the verdicts *and*
the raw replies consistently passes it. So the board re-runs the judge role of its own run
config on each entry's recorded texts (question, baseline answer and explanation, the edit
instructions, re-query answer and explanation) with the protocol's own judge requests and
parsers, and, with ``regate``, the edit gate on the bundled images with its own detector.

Each entry then carries the board's CCS with the board's interval, its verdict agreement with
the submitted verdicts (per judged step, the step's CCS_j = AC·EF: rate and Cohen's κ), and a
flag when the board's interval excludes the submitted estimate (with ``regate``, another when the
board's gate disagrees with a recorded pass or fail). Every call goes through the
stage cache (the run's own keys: role, backend identity, template, prompt, decoding), so an
interrupted board resumes, and re-running a board pays only for entries it has not judged.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from edct_task.config import RunConfig
from edct_task.core.errors import ConfigError
from edct_task.core.records import ChainStep, SampleRecord
from edct_task.core.requests import AskLLM, Failure, VerifyEdit
from edct_task.engine.driver import build_dispatcher
from edct_task.engine.protocol import ProtocolConfig, judge_requests
from edct_task.engine.stage_cache import CacheSchemaError, ImageStore, StageCache
from edct_task.engine.storage import StorageError
from edct_task.leaderboard.bundle import read_bundle
from edct_task.leaderboard.rederive import expected_status, protocol_of, rejudged_step
from edct_task.leaderboard.verify import BoardScoring, Verified
from edct_task.roles import PanelSpec, RoleSpec, build_roles
from edct_task.scoring.metrics import CCS_BINARY, summarise
from edct_task.scoring.panel import cohen_kappa, percent_agreement
from verification.check import EditCheck


@dataclass(frozen=True)
class BoardJudge:
    """What the board re-runs: its config (judge, detector, gate) and where its cache lives."""

    config: RunConfig
    cache_dir: Path
    regate: bool = False


def _judged_steps(record: SampleRecord) -> list[ChainStep]:
    return [s for s in record.steps if s.verified and s.requery is not None]


def _step_requests(record: SampleRecord, step: ChainStep, cfg: ProtocolConfig) -> tuple[AskLLM, ...]:
    chain = record.instructions.instructions if record.instructions else ()
    assert record.baseline is not None and step.requery is not None
    return judge_requests(cfg, record.sample, record.baseline, chain[: step.index], step.requery)


MAX_JUDGE_PROMPT_CHARS = 48_000
"""Longest judge prompt the board sends (about 12k tokens: two explanations of a target's
4,096-token answer budget fit). A step whose prompt is longer is not sent: padded explanations
would overflow the judge's context and multiply what the board pays (a 240 KB bundle made an
uncapped board send 168 MB); the entry is flagged and left unranked instead."""


def _regate(
    record: SampleRecord, dispatcher: Any, images_in_bundle: set[str]
) -> tuple[list[ChainStep], list[tuple[bool, bool]], int]:
    """The steps after the board's gate on every checked attempt, and (recorded, board) pass pairs.

    A step the run verified whose accepted edit fails the board's gate becomes unverified (its
    chain ends there); a step the run failed stays failed (its re-query was never made), but every
    attempt the board's gate passes is counted as a disagreement. The last number counts the
    checked attempts the board could not re-check (their images are not in the bundle)."""
    pairs: list[tuple[bool, bool]] = []
    unchecked = 0
    steps: list[ChainStep] = []
    current = record.sample.image
    for step in record.steps:
        target = step.edit_target
        board_pass: dict[int, bool] = {}
        for a in step.attempts:
            if target is None or a.check is None or a.image is None:
                continue
            if not {current, a.image} <= images_in_bundle:
                unchecked += 1
                continue
            request = VerifyEdit(current, a.image, target.edit_type, target.target, step.index, a.attempt)
            (reply,) = dispatcher.resolve([request])
            board_pass[a.attempt] = isinstance(reply, EditCheck) and reply.passed
            pairs.append((a.passed, board_pass[a.attempt]))
        last = step.attempts[-1] if step.attempts else None
        if step.verified and last is not None and board_pass.get(last.attempt) is False:
            steps.append(
                step.model_copy(
                    update={"verified": False, "image": None, "requery": None, "binary": None, "graded": None}
                )
            )
            break
        steps.append(step)
        if not step.verified or last is None or last.image is None:
            break
        current = last.image
    return steps, pairs, unchecked


def _rejudge_record(
    record: SampleRecord,
    replies: dict[tuple[int, int], list[object]],
    board_cfg: ProtocolConfig,
    entry_cfg: ProtocolConfig,
    steps: Sequence[ChainStep],
) -> SampleRecord:
    if record.status == "error" or not steps:
        return record
    new_steps = [
        rejudged_step(s, replies[(id(record), s.index)], board_cfg)
        if (id(record), s.index) in replies and s.verified and s.requery is not None
        else s
        for s in steps
    ]
    status, scores = expected_status(new_steps, entry_cfg)
    return record.model_copy(update={"steps": tuple(new_steps), "status": status, "scores": scores})


def _ccs(step: ChainStep) -> int | None:
    return step.binary.ccs if step.binary is not None else None


def rejudge_entry(
    entry: Verified, judge: BoardJudge, scoring: BoardScoring, dispatcher: Any
) -> dict[str, Any]:
    """The board's numbers for one verified entry (see the module docstring)."""
    board_cfg = judge.config.protocol
    entry_cfg = protocol_of(entry.setup["protocol"])
    gate_pairs: list[tuple[bool, bool]] = []
    chains: dict[int, list[ChainStep]] = {}
    unchecked = 0
    if judge.regate:
        packed = set()
        store = ImageStore(judge.cache_dir / "images")
        with read_bundle(entry.bundle) as bundle:
            for name in bundle.members:
                if name.startswith("images/"):
                    with Image.open(io.BytesIO(bundle.members[name])) as im:
                        im.load()
                        packed.add(store.put(im))
        for r in entry.records:
            if r.status != "error" and r.steps:
                chains[id(r)], pairs, missing = _regate(r, dispatcher, packed)
                gate_pairs += pairs
                unchecked += missing
    requests: list[AskLLM] = []
    owners: list[tuple[int, int]] = []
    overlong = 0
    for r in entry.records:
        if r.status == "error":
            continue
        for s in (
            _judged_steps(r)
            if id(r) not in chains
            else [x for x in chains[id(r)] if x.verified and x.requery]
        ):
            batch = _step_requests(r, s, board_cfg)
            if any(len(q.prompt) > MAX_JUDGE_PROMPT_CHARS for q in batch):
                overlong += 1  # not sent: the step keeps its submitted verdict, the entry is flagged
                continue
            requests += batch
            owners += [(id(r), s.index)] * len(batch)
    answers = dispatcher.resolve(requests)
    replies: dict[tuple[int, int], list[object]] = {}
    for owner, answer in zip(owners, answers, strict=True):
        replies.setdefault(owner, []).append(answer)
    failures = sum(isinstance(a, Failure) for a in answers)
    records = [
        _rejudge_record(r, replies, board_cfg, entry_cfg, chains.get(id(r), list(r.steps)))
        for r in entry.records
    ]
    submitted: list[int | None] = []
    board: list[int | None] = []
    for old, new in zip(entry.records, records, strict=True):
        new_by_index = {s.index: s for s in new.steps}
        for s in _judged_steps(old):
            mine = new_by_index.get(s.index)
            if mine is not None and mine.verified:
                submitted.append(_ccs(s))
                board.append(_ccs(mine))
    summary = summarise(records, seed=scoring.seed, n_resamples=scoring.n_resamples)
    interval = summary["overall"]["metrics"][CCS_BINARY]
    claimed = ((entry.claimed.get("overall") or {}).get("metrics") or {}).get(CCS_BINARY) or {}
    claim = claimed.get("estimate")
    flagged = bool(
        claim is not None
        and interval["estimate"] is not None
        and not interval["low"] - 1e-9 <= claim <= interval["high"] + 1e-9
    )
    out: dict[str, Any] = {
        "judge": judge.config.model_dump(mode="json")["roles"]["judge"],
        "submitted_ccs_binary": claim,
        "ccs_binary": interval,
        "ccs_graded": summary["overall"]["metrics"]["ccs_graded"],
        "agreement": {
            "steps": sum(1 for a, b in zip(submitted, board, strict=True) if a is not None and b is not None),
            "rate": percent_agreement(submitted, board),
            "kappa": cohen_kappa(submitted, board, labels=[0, 1]),
        },
        "failed_calls": failures,
        "overlong_steps": overlong,
        "flagged": flagged,
    }
    if judge.regate:
        disagree = sum(a != b for a, b in gate_pairs)
        out["gate_agreement"] = {
            "edits": len(gate_pairs),
            "rate": (1 - disagree / len(gate_pairs)) if gate_pairs else None,
            "disagreements": disagree,
        }
        out["gate_agreement"]["unchecked"] = unchecked
        out["gate_flagged"] = disagree > 0
    out["unranked"] = unranked_reasons(out)
    return out


def unranked_reasons(board: dict[str, Any]) -> list[str]:
    """Why the board's own numbers cannot rank an entry ([] when they can): the board could not
    re-judge it, its claim lies outside the board's interval, the board's gate disagrees with it
    or could not re-check it, or a judge call failed or was refused as over the cap."""
    if "error" in board:
        return [board["error"]]
    reasons = []
    if board.get("ccs_binary", {}).get("estimate") is None:
        reasons.append("the board's judge gave no CCS_binary")
    if board.get("failed_calls"):
        reasons.append(f"{board['failed_calls']} judge call(s) failed")
    if board.get("overlong_steps"):
        reasons.append(
            f"{board['overlong_steps']} step(s) over the {MAX_JUDGE_PROMPT_CHARS}-character judge cap"
        )
    if board.get("flagged"):
        reasons.append("claim outside the board's interval")
    gate = board.get("gate_agreement") or {}
    if board.get("gate_flagged"):
        reasons.append(f"the board's gate disagrees on {gate.get('disagreements')} edit(s)")
    if gate.get("unchecked"):
        reasons.append(
            f"{gate['unchecked']} gate check(s) could not be re-run (bundle made without --with-images)"
        )
    return reasons


_UNUSED = {
    "extractor": RoleSpec("calibration-rules", {}),
    "editor": RoleSpec("calibration-editor", {}),
    "detector": RoleSpec("calibration-oracle", {}),
}
"""Stand-ins for the roles a board never calls (the dispatcher's handler table wants every role):
only the config's judge — and with ``regate`` its detector — is built and used."""


def board_roles(cfg: RunConfig, *, regate: bool) -> dict[str, RoleSpec | PanelSpec]:
    """The role specs a board builds from its config: the judge, the detector with ``regate``."""
    specs = cfg.role_specs()
    if "judge" not in specs:
        raise ConfigError("--rejudge: the config names no judge role (roles: judge: {backend: ...})")
    if regate and "detector" not in specs:
        raise ConfigError("--regate: the config names no detector role (roles: detector: {backend: ...})")
    wanted = {"judge": specs["judge"], **_UNUSED}
    if regate:
        wanted["detector"] = specs["detector"]
    return wanted


def rejudge_board(entries: Sequence[Verified], judge: BoardJudge, scoring: BoardScoring) -> dict[str, dict]:
    """Digest → the board's numbers, for every entry; one dispatcher and cache for the board. An
    entry whose re-judging fails (its bundle's images unreadable …) gets ``{"error": …}``."""
    cfg = judge.config
    specs = board_roles(cfg, regate=judge.regate)
    judge.cache_dir.mkdir(parents=True, exist_ok=True)
    with build_roles(specs, require_target=False) as roles, StageCache(judge.cache_dir) as cache:
        images = ImageStore(judge.cache_dir / "images")
        dispatcher = build_dispatcher(
            roles, images, cache, protocol=cfg.protocol, gate=cfg.verification, limits=cfg.limits
        )
        out: dict[str, dict] = {}
        with dispatcher:
            for e in entries:
                try:
                    out[e.digest] = rejudge_entry(e, judge, scoring, dispatcher)
                except (ConfigError, CacheSchemaError, StorageError):
                    raise
                except Exception as exc:  # one entry's failure is that entry's, never the board's
                    first = str(exc).splitlines()[0][:200] if str(exc) else ""
                    error = f"re-judging failed ({type(exc).__name__}: {first})"
                    out[e.digest] = {"error": error, "unranked": [error]}
        return out
