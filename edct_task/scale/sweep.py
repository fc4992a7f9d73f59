"""A sweep file expanded into jobs: models × configs × seeds × shards, each job one ``edct run``
command line, and the merge groups that join a run's shards.

A sweep file (YAML)::

    output: runs/sweep            # jobs in <output>/jobs/…, merged runs in <output>/<model>/<config>/seed<S>
    configs:                      # name → a run config file or a shipped preset (non-target roles, data)
      base: run.yaml
    models:                       # name → the target role (any target backend and its options)
      faithful: {backend: calibration-reference, behavior: faithful}
    seeds: [0, 1]                 # protocol.seed of each repeated run
    shards: 4                     # slices per run (--shard I/N); 1 runs each run whole
    set: [limits.text_concurrency=8]   # overrides for every job
    retries: 2

Every job is checked before anything runs (its config is loaded with its overrides), and the
resources it asks a scheduler for follow from its roles: a job whose roles load model weights
locally (their records' ``local_weights``: ``diffusers``, ``owlv2``, ``sam2``, an ``lmms-eval``
target, whose API classes need ``resources.num_gpus: 0``) asks for a GPU unless they are set
to ``device: cpu``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from edct_task.config import RunConfig
from edct_task.core.errors import ConfigError
from edct_task.core.inputs import MiB, read_yaml
from edct_task.presets import load_preset
from edct_task.roles import ROLE_KINDS, PanelSpec, RoleSpec, record_of
from edct_task.run.sharding import MAX_SHARDS

MAX_JOBS = 10_000
"""Most jobs one sweep expands into (models × configs × seeds × shards), checked before any job is built."""
MAX_CPUS = 1024.0
"""Most CPUs (or GPUs, or units of a custom resource) one job may ask for."""
MAX_SWEEP_BYTES = MiB
"""Largest sweep file read."""
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
"""A model or config name: it becomes a folder below the sweep's output and a word of the emitted
Slurm scripts, so it is one safe path component (no ``/``, no ``..``, no space, quote or newline)."""


def _safe_names(names: dict[str, Any]) -> dict[str, Any]:
    for name in names:
        if not NAME_PATTERN.fullmatch(name):
            raise ValueError(
                f"name {name[:60]!r} must be 1-100 letters, digits, '.', '_', '+' or '-', starting with "
                "a letter or digit (it names a folder of the sweep's output)"
            )
    return names


Amount = Annotated[float, Field(ge=0, le=MAX_CPUS, allow_inf_nan=False)]


class Resources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_cpus: Amount = Field(1, description="CPUs a job asks for (Ray num_cpus, Slurm --cpus-per-task).")
    num_gpus: Amount | None = Field(
        None, description="GPUs a job asks for; default: 1 when a role loads weights locally, else 0."
    )
    custom: dict[str, Amount] = Field(
        default_factory=dict, description="Ray custom resources (e.g. {'api-quota': 1}); ignored by Slurm."
    )


class SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    output: Path = Field(Path("runs/sweep"), description="Folder of the jobs' and the merged runs' folders.")
    configs: Annotated[dict[str, str], AfterValidator(_safe_names)] = Field(
        min_length=1, description="Name → run config file (relative to the sweep file) or preset name."
    )
    models: Annotated[dict[str, dict[str, Any]], AfterValidator(_safe_names)] = Field(
        min_length=1, description="Name → the target role's spec: {backend: …, options…}."
    )
    seeds: list[int] = Field([0], min_length=1, description="protocol.seed of each repeated run.")
    shards: int = Field(1, ge=1, le=MAX_SHARDS, description="Slices per run (`edct run --shard I/N`).")
    set: list[str] = Field(default_factory=list, description="KEY=VALUE overrides for every job.")
    retries: int = Field(
        2, ge=0, le=100, description="Times a failed job (crash, kill, exit 1) is run again."
    )
    resources: Resources = Field(default_factory=Resources, description="What each job asks a scheduler for.")


@dataclass(frozen=True)
class Job:
    """One ``edct run`` of the sweep."""

    name: str
    argv: tuple[str, ...]
    """Arguments of ``edct`` (``run …``)."""
    output: Path
    group: str
    num_cpus: float
    num_gpus: float
    custom: dict[str, float] = field(default_factory=dict)
    config: RunConfig | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Group:
    """The jobs of one run (model × config × seed) and the folder their merge writes."""

    name: str
    model: str
    config: str
    seed: int
    output: Path
    jobs: tuple[Job, ...]

    @property
    def sharded(self) -> bool:
        return len(self.jobs) > 1


@dataclass(frozen=True)
class Sweep:
    path: Path
    spec: SweepFile
    groups: tuple[Group, ...]
    root: Path
    """The folder of the jobs' (``jobs/``) and the merged runs' folders."""

    @property
    def jobs(self) -> list[Job]:
        return [j for g in self.groups for j in g.jobs]


def read_sweep(path: Path) -> SweepFile:
    """The sweep file, read as a stranger's file (``core.inputs``: a regular file of at most
    ``MAX_SWEEP_BYTES``, its YAML aliases bounded) and checked, its job count included."""
    if not Path(path).exists() and not Path(path).is_symlink():
        raise ConfigError(f"sweep file {path} does not exist")
    raw = read_yaml(Path(path), MAX_SWEEP_BYTES)
    try:
        spec = SweepFile.model_validate(raw if isinstance(raw, dict) else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"sweep file {path}: {where}: {first['msg']}") from None
    jobs = math.prod((len(spec.models), len(spec.configs), len(spec.seeds), spec.shards))
    if jobs > MAX_JOBS:
        raise ConfigError(
            f"sweep file {path}: models × configs × seeds × shards is {jobs} jobs, more than {MAX_JOBS}"
        )
    return spec


def _config_location(value: str, base: Path) -> str:
    """A config file relative to the sweep file, or a preset's name as given."""
    candidate = base / value
    return str(candidate.resolve()) if candidate.is_file() else value


def local_weights(config: RunConfig) -> list[str]:
    """The roles whose backends load weights into the job's process (not set to ``device: cpu``)."""
    out = []
    for role, spec in config.role_specs().items():
        for s in spec.members if isinstance(spec, PanelSpec) else (spec,):
            assert isinstance(s, RoleSpec)
            segmenter = s.options.get("segmenter")
            nested = segmenter.get("backend") if isinstance(segmenter, dict) else segmenter
            args = str(s.options.get("model_args", "")).replace(" ", "").split(",")
            on_cpu = str(s.options.get("device", "")).lower() == "cpu" or "device=cpu" in args
            kind = ROLE_KINDS.get(role)
            records = (record_of(kind, s.backend) if kind else None, record_of("segmenter", str(nested)))
            if any(r is not None and r.local_weights for r in records) and not on_cpu:
                out.append(role)
    return out


def expand(path: Path, *, output: Path | None = None) -> Sweep:
    """The sweep file's jobs and merge groups, every job's config loaded and checked."""
    spec = read_sweep(path)
    root = output if output is not None else spec.output
    if not root.is_absolute() and output is None:
        root = Path(path).parent / root
    groups = []
    for model, target in spec.models.items():
        for cname, location in spec.configs.items():
            for seed in spec.seeds:
                group = f"{model}/{cname}/seed{seed}"
                base_argv = [
                    "run",
                    "--config",
                    _config_location(location, Path(path).parent),
                    "--no-progress",
                    *(a for o in spec.set for a in ("--set", o)),
                    "--set",
                    f"roles.target={json.dumps(target, sort_keys=True)}",
                    "--set",
                    f"protocol.seed={seed}",
                ]
                jobs = []
                for i in range(spec.shards):
                    sharded = spec.shards > 1
                    out = root / "jobs" / group / f"shard{i}-of-{spec.shards}" if sharded else root / group
                    argv = [
                        *base_argv,
                        *(["--shard", f"{i}/{spec.shards}"] if sharded else []),
                        "--output",
                        str(out),
                    ]
                    try:
                        config = load_preset(argv[2], _overrides(argv))
                    except ConfigError as exc:
                        why = " ".join(exc.line().split())  # one line
                        raise ConfigError(f"sweep job {group} (config {location}): {why}") from None
                    gpus = spec.resources.num_gpus
                    if gpus is None:
                        gpus = 1.0 if local_weights(config) else 0.0
                    jobs.append(
                        Job(
                            name=f"{group}/shard{i}-of-{spec.shards}" if sharded else group,
                            argv=tuple(argv),
                            output=out,
                            group=group,
                            num_cpus=spec.resources.num_cpus,
                            num_gpus=gpus,
                            custom=dict(spec.resources.custom),
                            config=config,
                        )
                    )
                groups.append(Group(group, model, cname, seed, root / group, tuple(jobs)))
    return Sweep(Path(path), spec, tuple(groups), root)


def _overrides(argv: list[str]) -> list[str]:
    """The ``--set`` values and the ``--shard`` of a job's command line, as config overrides."""
    out = []
    for flag, value in itertools.pairwise(argv):
        if flag == "--set":
            out.append(value)
        elif flag == "--shard":
            out.append(f"data.shard={value}")
    return out
