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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from edct_task.config import RunConfig
from edct_task.core.errors import ConfigError
from edct_task.core.records import ChainStep, SampleRecord
from edct_task.core.requests import AskLLM, EditImage, Failure, VerifyEdit
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.lockstep import Round
from edct_task.engine.stage_cache import CacheSchemaError, ImageStore, StageCache
from edct_task.engine.storage import StorageError
from edct_task.leaderboard.bundle import read_bundle
from edct_task.leaderboard.evidence import Evidence
from edct_task.leaderboard.rederive import gate_of, protocol_of, replay
from edct_task.leaderboard.verify import BoardScoring, Verified
from edct_task.roles import PanelSpec, RoleSpec
from edct_task.run.runner import Engine, compose
from edct_task.scoring.metrics import PRIMARY, family, summarise
from edct_task.scoring.panel import cohen_kappa, percent_agreement
from verification.check import EditCheck


@dataclass(frozen=True)
class BoardJudge:
    """What the board re-runs: its config (judge, detector, gate) and where its cache lives."""

    config: RunConfig
    cache_dir: Path
    regate: bool = False


MAX_JUDGE_PROMPT_CHARS = 48_000
"""Longest judge prompt the board sends (about 12k tokens: two explanations of a target's
4,096-token answer budget fit). A step whose prompt is longer is not sent: padded explanations
would overflow the judge's context and multiply what the board pays (a 240 KB bundle made an
uncapped board send 168 MB); the entry is flagged and left unranked instead."""


@dataclass
class BoardAnswers:
    """The replies of a re-judging replay: the judge's requests (and with ``packed`` images, the
    gate's) go to the board's dispatcher, everything else is answered from the records.

    A step whose judge prompt is over ``MAX_JUDGE_PROMPT_CHARS`` is not sent (its recorded replies
    answer it, and it is counted). The board's gate can only take an edit away: it answers a
    check the run passed, while a recorded failure stays one (its re-query was never made); each
    check it re-runs is a (recorded, board) pass pair, each it cannot (images not packed) counted.

    With ``packed`` (``--regate``) an exclusion is evidence too, and is re-checked or not trusted:
    a recorded gate failure, or a gate call recorded as failed, is re-run on its images like a
    pass; a check whose r_in or r_out, recomputed from the images, differs from the recorded one
    by more than ``RATIO_TOLERANCE`` is counted (``ratio_mismatches``), as is an edit whose
    "edited" image is the image it edits (``unchanged``); an editor failure, which left no image to
    re-check, is counted as ``untrusted_edits``. Each of these leaves the entry unranked."""

    evidence: dict[str, Evidence]
    dispatcher: Dispatcher
    packed: set[str] | None = None
    failures: int = 0
    overlong: int = 0
    unchecked: int = 0
    unchanged: int = 0
    untrusted_edits: int = 0
    ratio_mismatches: int = 0
    gate_pairs: list[tuple[bool, bool]] = field(default_factory=list)

    def __call__(self, round_: Round) -> list[object]:
        replies = [self.evidence[sample.id].answer(request) for sample, request in round_]
        steps: dict[tuple[str, str], list[int]] = {}
        gated: list[int] = []
        for i, (sample, request) in enumerate(round_):
            if isinstance(request, AskLLM) and request.role == "judge":
                steps.setdefault((sample.id, request.purpose.split(".")[0]), []).append(i)
            elif self.packed is None:
                continue
            elif isinstance(request, EditImage) and isinstance(replies[i], Failure):
                self.untrusted_edits += 1
            elif isinstance(request, VerifyEdit):
                self.unchanged += request.edited == request.original
                if {request.original, request.edited} <= self.packed:
                    gated.append(i)
                else:
                    self.unchecked += 1
        judged = []
        for group in steps.values():
            if any(len(round_[i][1].prompt) > MAX_JUDGE_PROMPT_CHARS for i in group):  # type: ignore[union-attr]
                self.overlong += 1
            else:
                judged += group
        answers = self.dispatcher.resolve([round_[i][1] for i in judged + gated])
        self.failures += sum(isinstance(a, Failure) for a in answers[: len(judged)])
        for i, answer in zip(judged, answers, strict=False):
            replies[i] = answer
        for i, answer in zip(gated, answers[len(judged) :], strict=True):
            recorded = replies[i]
            recorded_pass = isinstance(recorded, EditCheck) and recorded.passed
            board_pass = isinstance(answer, EditCheck) and answer.passed
            self.gate_pairs.append((recorded_pass, board_pass))
            if isinstance(recorded, EditCheck) and isinstance(answer, EditCheck):
                self.ratio_mismatches += not ratios_agree(recorded, answer)
            if recorded_pass:
                replies[i] = answer
        return replies


RATIO_TOLERANCE = 0.02
"""How far a recorded r_in or r_out may lie from the board's, recomputed from the same images with
the board's detector (the gate's thresholds are tenths apart; a detector of the same setup gives
the same ratios, so a larger gap means the numbers were not measured on these images)."""


def ratios_agree(recorded: EditCheck, board: EditCheck) -> bool:
    """Whether a recorded check's r_in and r_out are the board's, within ``RATIO_TOLERANCE`` (a
    check with no ratios agrees only with one that has none either)."""
    pairs = ((recorded.r_in, board.r_in), (recorded.r_out, board.r_out))
    return all(
        (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= RATIO_TOLERANCE)
        for a, b in pairs
    )


def _judged_steps(record: SampleRecord) -> list[ChainStep]:
    return [s for s in record.steps if s.verified and s.requery is not None]


def _ccs(step: ChainStep) -> int | None:
    return step.binary.ccs if step.binary is not None else None


def _packed_images(entry: Verified, store: ImageStore) -> set[str]:
    """The bundle's images, put in the board's image store; their refs."""
    packed = set()
    with read_bundle(entry.bundle) as bundle:
        for name in bundle.members:
            if name.startswith("images/"):
                with Image.open(io.BytesIO(bundle.members[name])) as im:
                    im.load()
                    packed.add(store.put(im))
    return packed


def rejudge_entry(
    entry: Verified, judge: BoardJudge, scoring: BoardScoring, engine: Engine
) -> dict[str, Any]:
    """The board's numbers for one verified entry: its records replayed under the entry's
    protocol with the board's judge settings (``ProtocolConfig.judged_by``), see ``BoardAnswers``."""
    cfg = protocol_of(entry.setup["protocol"]).judged_by(judge.config.protocol)
    gate = gate_of(entry.setup["verification"])
    answers = BoardAnswers(
        {r.sample.id: Evidence(r, gate) for r in entry.records},
        engine.dispatcher,
        _packed_images(entry, engine.images) if judge.regate else None,
    )
    records = replay(entry.records, cfg, answers)
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
    interval = summary.overall.metrics[PRIMARY.name]
    claimed = ((entry.claimed.get("overall") or {}).get("metrics") or {}).get(PRIMARY.name) or {}
    claim = claimed.get("estimate")
    flagged = bool(
        claim is not None
        and interval.low is not None
        and interval.high is not None
        and not interval.low - 1e-9 <= claim <= interval.high + 1e-9
    )
    out: dict[str, Any] = {
        "judge": judge.config.model_dump(mode="json")["roles"]["judge"],
        f"submitted_{PRIMARY.name}": claim,
        **{m.name: summary.overall.metrics[m.name].model_dump() for m in family("score")},
        "agreement": {
            "steps": sum(1 for a, b in zip(submitted, board, strict=True) if a is not None and b is not None),
            "rate": percent_agreement(submitted, board),
            "kappa": cohen_kappa(submitted, board, labels=[0, 1]),
        },
        "failed_calls": answers.failures,
        "overlong_steps": answers.overlong,
        "flagged": flagged,
    }
    if judge.regate:
        pairs = answers.gate_pairs
        disagree = sum(a != b for a, b in pairs)
        out["gate_agreement"] = {
            "edits": len(pairs),
            "rate": (1 - disagree / len(pairs)) if pairs else None,
            "disagreements": disagree,
            "unchecked": answers.unchecked,
            "ratio_mismatches": answers.ratio_mismatches,
            "unchanged": answers.unchanged,
            "untrusted_edits": answers.untrusted_edits,
        }
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
    if board.get(PRIMARY.name, {}).get("estimate") is None:
        reasons.append(f"the board's judge gave no {PRIMARY.label}")
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
    if gate.get("ratio_mismatches"):
        reasons.append(
            f"{gate['ratio_mismatches']} gate check(s) whose r_in/r_out differ from the board's"
            " on the same images"
        )
    if gate.get("unchanged"):
        reasons.append(f"{gate['unchanged']} edit(s) whose edited image is the image it edits")
    if gate.get("untrusted_edits"):
        reasons.append(
            f"{gate['untrusted_edits']} editor failure(s) the board cannot re-check (no image): not trusted"
        )
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
    """Digest → the board's numbers, for every entry; one dispatcher and cache for the board, built
    by the run's composition root (``run.runner.compose``: the config's call log, its image store
    under the cache). An entry whose re-judging fails (its bundle's images unreadable …) gets
    ``{"error": …}``."""
    cfg = judge.config
    specs = board_roles(cfg, regate=judge.regate)
    judge.cache_dir.mkdir(parents=True, exist_ok=True)
    with StageCache(judge.cache_dir) as cache:
        images = ImageStore(judge.cache_dir)
        with compose(cfg, cache, images, require_target=False, progress=False, specs=specs) as engine:
            out: dict[str, dict] = {}
            for e in entries:
                try:
                    out[e.digest] = rejudge_entry(e, judge, scoring, engine)
                except (ConfigError, CacheSchemaError, StorageError):
                    raise
                except Exception as exc:  # one entry's failure is that entry's, never the board's
                    first = str(exc).splitlines()[0][:200] if str(exc) else ""
                    error = f"re-judging failed ({type(exc).__name__}: {first})"
                    out[e.digest] = {"error": error, "unranked": [error]}
            return out
