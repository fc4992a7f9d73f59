"""The typed run log: what ``edct run`` writes as ``results.json`` and embeds, as the ``edct``
block, in lmms-eval's results; read back through ``edct_task.run.outputs.load_run``.

A pydantic model with a docstring per field and a schema version (inspect_ai's ``EvalLog``
shape): ``RUN_LOG_SCHEMA_VERSION`` is bumped whenever a field's shape or meaning changes, and a
file of another version is refused with one message naming its version and ours.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edct_task import __version__
from edct_task.core.errors import UserError
from edct_task.core.records import SCHEMA_VERSION
from edct_task.engine.files import json_text

RUN_LOG_SCHEMA_VERSION = 1
"""Version of the ``results.json`` layout (``schema_version``)."""


RUN_DISTRIBUTIONS = ("lmms-eval", "transformers", "torch", "opencv-python-headless", "numpy")
"""Installed distributions whose versions a run log records besides edct-bench and Python."""


def installed_versions(distributions: Iterable[str]) -> dict[str, str]:
    """``distribution → version`` of those installed (the others are left out)."""
    out = {}
    for dist in distributions:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def run_versions() -> dict[str, str]:
    """What a run log records as ``versions``: edct-bench, Python and ``RUN_DISTRIBUTIONS``."""
    return {
        "edct-bench": __version__,
        "python": platform.python_version(),
        **installed_versions(RUN_DISTRIBUTIONS),
    }


class RunLogError(UserError, ValueError):
    """A ``results.json`` that is not a run log of this version; the message names the file."""


class _Log(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunSetup(_Log):
    """The resolved configuration of the run (secrets never recorded)."""

    data: dict[str, Any] = Field(description="The ``data:`` section: source, path, n, seed, limit.")
    protocol: dict[str, Any] = Field(description="Every protocol setting that changes scores.")
    verification: dict[str, Any] = Field(description="Every gate parameter (``GateParams``).")
    limits: dict[str, Any] = Field(description="Concurrency, batching and schedule (never change scores).")
    roles: dict[str, Any] = Field(description="Role → backend spec as configured (header values omitted).")
    backends: dict[str, Any] = Field(description="Role → the live backend's identity (model, revision…).")
    bootstrap_resamples: int = Field(description="Bootstrap resamples behind every CI.")


class RunLog(_Log):
    """One run's results file."""

    schema_version: int = Field(RUN_LOG_SCHEMA_VERSION, description="Layout version of this file.")
    record_schema_version: int = Field(SCHEMA_VERSION, description="Version of the records in samples.jsonl.")
    created: str = Field(description="When the run finished (ISO 8601, UTC).")
    versions: dict[str, str] = Field(description="Package versions (edct-bench, python, lmms-eval, torch…).")
    prompt_versions: dict[str, str] = Field(description="Prompt template name → content hash.")
    config: RunSetup = Field(description="The resolved configuration.")
    results: dict[str, Any] = Field(
        description="Metric → estimate, CI and counts (``scoring.metrics.summarise``), overall and by domain."
    )
    judge_agreement: dict[str, Any] | None = Field(description="Judge-panel agreement, None for one judge.")
    judge_health: dict[str, Any] = Field(
        description="Judge → kind (binary, graded) → judgements, unscored, rate and unscored by reason "
        "(truncated, refused, malformed, transport): ``scoring.health.judge_health``."
    )
    usage: dict[str, Any] = Field(description="Tokens and calls per role, as the backends reported them.")
    calls: dict[str, Any] = Field(description="Backend calls, cache hits, failures and seconds per stage.")
    wall_seconds: float = Field(description="Wall time of the run.")

    def to_json(self) -> str:
        """The file's text (indented, field order as declared)."""
        return json_text(self.model_dump(mode="json"), indent=2) + "\n"  # never NaN or Infinity


def parse_run_log(payload: Any, source: Path | str) -> RunLog:
    """``payload`` (a parsed ``results.json``) as a ``RunLog``, or ``RunLogError`` naming ``source``."""
    if not isinstance(payload, dict):
        raise RunLogError(f"{source}: not a run log (a JSON object was expected)")
    version = payload.get("schema_version")
    if version != RUN_LOG_SCHEMA_VERSION:
        raise RunLogError(
            f"{source}: results schema version {version!r}; this edct-bench reads version "
            f"{RUN_LOG_SCHEMA_VERSION} (re-run the run, or read it with the edct-bench that wrote it)"
        )
    try:
        return RunLog.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RunLogError(f"{source}: {where}: {first['msg']}") from None


class LmmsRunBlock(_Log):
    """The ``edct`` block of an lmms-eval export (``lmms.export``): what lmms-eval's own fields do
    not say about the EDCT run it was written from."""

    roles: dict[str, Any] = Field(description="Non-target role → backend spec (header values omitted).")
    protocol: dict[str, Any] = Field(description="Every protocol setting that changes scores.")
    verification: dict[str, Any] = Field(description="Every gate parameter (``GateParams``).")
    prompt_versions: dict[str, str] = Field(description="Prompt template name → content hash.")
    target_rendering: str = Field(description="How the target received the conversation (``multi-turn`` …).")
    run_dir: str = Field(description="The EDCT run folder (results.json, samples.jsonl, images/).")
    limits: dict[str, Any] = Field(description="Concurrency, batching and schedule.")
    target: dict[str, Any] = Field(description="The lmms-eval model's identity (secret arguments omitted).")
    calls: dict[str, Any] = Field(description="Backend calls, cache hits, failures and seconds per stage.")
    judge_health: dict[str, Any] = Field(description="As in ``RunLog.judge_health``.")
    versions: dict[str, str] = Field(description="Package versions.")
    wall_seconds: float = Field(description="Wall time of the run.")
