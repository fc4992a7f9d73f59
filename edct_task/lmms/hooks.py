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
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task import prompts
from edct_task.config import RunConfig, calibration_config
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.drive import SampleRun
from edct_task.engine.lockstep import build_dispatcher
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.records import SampleInput, SampleRecord, SampleScores
from edct_task.engine.requests import AskTarget, Request
from edct_task.engine.stage_cache import CacheSchemaError, ImageStore, StageCache
from edct_task.engine.workspace import check_writable
from edct_task.lmms.documents import doc_image, sample_of
from edct_task.lmms.turns import first_turn_text, target_images, turn_text
from edct_task.roles import ConfigError, Roles, build_roles
from edct_task.scoring import metrics as scoring
from model_adapters.contracts import Completion

log = logging.getLogger(__name__)

ENV_CONFIG = "EDCT_CONFIG"
"""Path of an EDCT YAML config whose non-target roles, protocol and gate the lmms-eval task uses."""
ENV_WORK_DIR = "EDCT_WORK_DIR"
"""Folder for the stage cache and the content-addressed images (default: the config's cache dir)."""

DEFAULT_WORK_DIR = Path("runs/edct-lmms")

COUNT_NAMES = ("n_scored", "n_excluded", "n_unscored", "n_error")
SETUP_NAME = "edct"
"""Key whose per-sample value is the audit digest with the full setup (logged with each sample);
it has no task-level value (``edct_task.lmms.aggregation.audit``)."""


# ----------------------------------------------------------------------------- settings


@dataclass
class Settings:
    """Everything the hooks need besides lmms-eval's model, built once per process."""

    config: RunConfig
    roles: Roles
    images: ImageStore
    cache: StageCache
    dispatcher: Dispatcher
    work_dir: Path

    @property
    def protocol(self) -> ProtocolConfig:
        return self.config.protocol

    def describe(self) -> dict[str, Any]:
        """What the results must state: roles (without target), protocol, gate, prompt versions."""
        roles = {r: s.as_dict() for r, s in self.config.role_specs().items() if r != "target"}
        return {
            "roles": roles,
            "protocol": self.protocol.model_dump(mode="json"),
            "verification": self.config.verification.model_dump(mode="json"),
            "prompt_versions": prompts.prompt_versions(),
            "config_file": os.environ.get(ENV_CONFIG) or None,
            "work_dir": str(self.work_dir),
        }

    def close(self) -> None:
        """Shut the pools, the stage cache and every backend down."""
        self.dispatcher.close()
        self.cache.close()
        self.roles.close()


_settings: Settings | None = None
_settings_lock = threading.Lock()


def hook_config() -> RunConfig:
    """The EDCT config for the lmms-eval task: ``$EDCT_CONFIG`` or the calibration roles."""
    path = os.environ.get(ENV_CONFIG)
    if path:
        from edct_task.presets import load_preset

        return load_preset(path)  # a file, or a shipped preset's name
    return calibration_config(output_dir=DEFAULT_WORK_DIR)


def settings() -> Settings:
    """Build (once) the roles, stage cache and dispatcher; fails early with a config message."""
    global _settings
    with _settings_lock:
        if _settings is None:
            _settings = build_settings(hook_config())
        return _settings


def install_settings(value: Settings | None) -> None:
    """Use ``value`` for the hooks of this process (the fast path installs its own config)."""
    global _settings
    with _settings_lock:
        _settings = value


def build_settings(config: RunConfig, work_dir: Path | None = None) -> Settings:
    """The stage cache first (a stale cache folder is refused before anything is built), then the
    non-target roles."""
    where = ""
    if work_dir is None:
        env = os.environ.get(ENV_WORK_DIR)
        where = f" (${ENV_WORK_DIR})" if env else f" (set {ENV_WORK_DIR} to put them elsewhere)"
        work_dir = Path(env) if env else config.resolved_cache_dir
    work_dir = Path(work_dir).resolve()
    check_writable(work_dir, "cache folder")
    # announced: lmms-eval's own loop would otherwise fill ./runs/edct-lmms/cache without a word
    print(f"edct: stage cache and edited images in {work_dir}{where}", file=sys.stderr, flush=True)
    try:
        cache = StageCache(work_dir)
    except CacheSchemaError as exc:
        raise ConfigError(str(exc)) from None
    specs = {r: s for r, s in config.role_specs().items() if r != "target"}
    try:
        roles = build_roles(specs, require_target=False)
    except ConfigError as exc:
        cache.close()
        source = os.environ.get(ENV_CONFIG) or "the built-in calibration roles"
        raise ConfigError(
            f"EDCT roles for the lmms-eval task (from {source}, set ${ENV_CONFIG}): {exc}"
        ) from None
    protocol = config.protocol
    needed = rounds_needed(protocol)
    if needed > 12:
        log.warning(
            "k=%d needs %d target rounds; raise generation_kwargs.max_agentic_steps", protocol.k, needed
        )
    images = ImageStore(work_dir)
    dispatcher = build_dispatcher(
        roles, images, cache, protocol=protocol, gate=config.verification, limits=config.limits
    )
    return Settings(config, roles, images, cache, dispatcher, work_dir)


def rounds_needed(protocol: ProtocolConfig) -> int:
    """Target rounds of one sample: answer and why at baseline and after each of k edits."""
    return 2 * (protocol.k + 1)


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
    out: dict[str, Any] = {k: v for k, v in sample_values(record).items() if v is not None}
    for name in COUNT_NAMES:
        out[name] = int(record.status == name[2:])
    try:
        s = settings()
        images, setup = s.images, s.describe()
    except Exception as exc:  # the digest is still useful without resolved paths
        images, setup = None, {"error": f"{type(exc).__name__}: {exc}"}
    out[SETUP_NAME] = {**audit(record, images), "setup": setup}
    return out


def scores_equal(a: SampleScores | None, b: SampleScores | None) -> bool:
    return (a.model_dump() if a else None) == (b.model_dump() if b else None)
