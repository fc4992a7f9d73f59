"""The typed run log: what ``edct run`` (and lmms-eval's loop on our tasks) writes as a run
folder's ``results.json``; read back through ``edct_task.run.outputs.load_run``.

A pydantic model with a docstring per field and a schema version (inspect_ai's ``EvalLog``
shape), typed down to the interval and the count: ``results`` is ``scoring.results.Results``,
``config.protocol`` the ``ProtocolConfig``, ``config.verification`` the ``GateParams``,
``config.limits`` the ``Limits`` and ``config.data`` a :class:`RunData` (its ``shard`` a
``ShardManifest``). ``RUN_LOG_SCHEMA_VERSION`` is bumped whenever a field's shape or meaning
changes; a file of an older version this edct-bench still reads is upgraded as it is read
(:data:`UPGRADES`), any other is refused with one message naming its version and ours.

Version 2 (issue 45): the sections above are typed; ``config.data`` leaves out its unset keys
(version 1 wrote ``"path": null`` and ``"limit": null``); ``config.protocol`` has every setting
(a version-1 run made before known-answer controls has no ``controls`` key: it is read as 0).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edct_task import __version__
from edct_task.core.errors import UserError
from edct_task.core.records import SCHEMA_VERSION
from edct_task.engine.driver import Limits
from edct_task.engine.files import json_text
from edct_task.engine.protocol import ProtocolConfig
from edct_task.run.sharding import ShardManifest
from edct_task.scoring.results import Results
from verification.gate import GateParams

RUN_LOG_SCHEMA_VERSION = 2
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


def _unset(value: object) -> bool:
    return value is None


class MergedFrom(_Log):
    """What ``edct merge --allow-missing`` records of a merge with slices missing."""

    missing_slices: list[str] = Field(description="The slices (``I/N``) that were not merged.")
    items: int = Field(ge=0, description="Items the merged run holds.")
    of_items: int = Field(ge=0, description="Items the unsharded run has.")
    merged_from: list[str] = Field(description="The shard folders merged.")


class RunData(_Log):
    """Where the run's samples came from: the ``data:`` section as run (unset keys left out)."""

    source: str = Field(description="calibration, dataset, or lmms-eval (a run on lmms-eval's loop).")
    path: str | None = Field(None, exclude_if=_unset, description="dataset: the folder or hub id read.")
    n: int | None = Field(None, exclude_if=_unset, description="calibration: number of samples.")
    seed: int | None = Field(None, exclude_if=_unset, description="calibration: world seed.")
    limit: int | None = Field(None, exclude_if=_unset, description="Only the first N samples.")
    limit_per_domain: int | None = Field(
        None, exclude_if=_unset, description="dataset: only the first N samples of each domain."
    )
    domains: list[str] | None = Field(None, exclude_if=_unset, description="dataset: only these domains.")
    max_pixels: int | None = Field(None, exclude_if=_unset, description="dataset: largest image read.")
    tasks: str | None = Field(
        None, exclude_if=_unset, description="lmms-eval: the --tasks given; inspect_ai: the task run."
    )
    host_version: str | None = Field(None, exclude_if=_unset, description="inspect_ai: its version.")
    shard: ShardManifest | None = Field(
        None, exclude_if=_unset, description="``edct run --shard I/N``: the slice run (``take_slice``)."
    )
    partial: MergedFrom | None = Field(
        None, exclude_if=_unset, description="``edct merge --allow-missing``: the slices missing."
    )

    @classmethod
    def recorded(cls, data: BaseModel, manifest: ShardManifest | None) -> RunData:
        """What a run log records of the configured ``data:`` section (``config.DataSection``): its
        ``shard`` (``I/N``) replaced by the slice's manifest; an unsharded run records none."""
        return cls.model_validate({**data.model_dump(mode="json", exclude={"shard"}), "shard": manifest})


class RunSetup(_Log):
    """The resolved configuration of the run (secrets never recorded)."""

    data: RunData = Field(description="The ``data:`` section as run; a slice's manifest as ``shard``.")
    protocol: ProtocolConfig = Field(description="Every protocol setting that changes scores.")
    verification: GateParams = Field(description="Every gate parameter.")
    limits: Limits = Field(description="Concurrency, batching and schedule (never change scores).")
    roles: dict[str, Any] = Field(description="Role → backend spec as configured (header values omitted).")
    backends: dict[str, Any] = Field(description="Role → the live backend's identity (model, revision…).")
    bootstrap_resamples: int = Field(
        description="The config's bootstrap_resamples (no CCS interval resamples since they are closed-form)."
    )


class RunLog(_Log):
    """One run's results file."""

    schema_version: int = Field(RUN_LOG_SCHEMA_VERSION, description="Layout version of this file.")
    record_schema_version: int = Field(SCHEMA_VERSION, description="Version of the records in samples.jsonl.")
    created: str = Field(description="When the run finished (ISO 8601, UTC).")
    versions: dict[str, str] = Field(description="Package versions (edct-bench, python, lmms-eval, torch…).")
    prompt_versions: dict[str, str] = Field(description="Prompt template name → content hash.")
    config: RunSetup = Field(description="The resolved configuration.")
    results: Results = Field(
        description="Metric → estimate, CI and counts (``scoring.metrics.summarise``), overall and by domain."
    )
    judge_agreement: dict[str, Any] | None = Field(description="Judge-panel agreement, None for one judge.")
    judge_health: dict[str, Any] = Field(
        description="Judge → kind (binary, graded) → judgements, unscored, rate, unscored by reason "
        "(truncated, refused, malformed, transport, echoed) and the signals of a degenerate judge among "
        "the verdicts read (without_reason, rubric_copied, contradicted counts; identical): "
        "``scoring.health.judge_health``."
    )
    controls: dict[str, Any] | None = Field(
        default=None,
        description="The known-answer controls (``scoring.controls.summarise_controls``): per role and "
        "judge their n, correct, accuracy and 95% Wilson CI, by kind; the bar; the roles below it "
        "(``unreliable``: a non-empty list marks the run unreliable). None in runs made before controls.",
    )
    usage: dict[str, Any] = Field(description="Tokens and calls per role, as the backends reported them.")
    calls: dict[str, Any] = Field(description="Backend calls, cache hits, failures and seconds per stage.")
    wall_seconds: float = Field(description="Wall time of the run.")

    def to_json(self) -> str:
        """The file's text (indented, field order as declared)."""
        return json_text(self.model_dump(mode="json"), indent=2) + "\n"  # never NaN or Infinity


def _from_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """A version-1 run log in the version-2 layout: ``config.data`` without its null keys, and
    ``protocol.controls`` 0 where a run made before known-answer controls has none (it drew none;
    version 2's typed protocol would read the missing key as the default, 16)."""
    config = payload.get("config")
    if isinstance(config, dict):
        config = dict(config)
        if isinstance(config.get("data"), dict):
            config["data"] = {k: v for k, v in config["data"].items() if v is not None}
        if isinstance(config.get("protocol"), dict) and "controls" not in config["protocol"]:
            config["protocol"] = {**config["protocol"], "controls": 0}
        payload = {**payload, "config": config}
    return {**payload, "schema_version": 2}


UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _from_v1}
"""Older version → its payload in the next version's layout (applied in turn up to ours)."""


def partial_label(results: Mapping[str, Any]) -> str | None:
    """ "PARTIAL: …" for the results of an ``edct merge --allow-missing`` (``config.data.partial``
    names the slices never run), None for a complete run. Every reader of a results file that shows
    its numbers (report, audit, board) labels or refuses it with this."""
    config = results.get("config")
    data = config.get("data") if isinstance(config, Mapping) else None
    partial = data.get("partial") if isinstance(data, Mapping) else None
    if partial is None:
        return None
    part = partial if isinstance(partial, Mapping) else {}
    missing = part.get("missing_slices")
    slices = ", ".join(map(str, missing)) if isinstance(missing, list) and missing else "?"
    items, of_items = part.get("items"), part.get("of_items")
    counted = f"; {items} of {of_items} items" if items is not None and of_items is not None else ""
    return f"PARTIAL: merged with slices {slices} missing{counted}"


def parse_run_log(payload: Any, source: Path | str) -> RunLog:
    """``payload`` (a parsed ``results.json``) as a ``RunLog``, or ``RunLogError`` naming ``source``.

    A run log of an older version this edct-bench still reads (:data:`UPGRADES`) is upgraded first.
    """
    if not isinstance(payload, dict):
        raise RunLogError(f"{source}: not a run log (a JSON object was expected)")
    version = payload.get("schema_version")
    while isinstance(version, int) and not isinstance(version, bool) and version in UPGRADES:
        payload = UPGRADES[version](payload)
        version = payload["schema_version"]
    if version != RUN_LOG_SCHEMA_VERSION:
        raise RunLogError(
            f"{source}: results schema version {version!r}; this edct-bench reads versions "
            f"{', '.join(map(str, sorted({*UPGRADES, RUN_LOG_SCHEMA_VERSION})))} "
            "(re-run the run, or read it with the edct-bench that wrote it)"
        )
    try:
        return RunLog.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RunLogError(f"{source}: {where}: {first['msg']}") from None
