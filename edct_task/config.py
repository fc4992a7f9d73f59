"""Run configuration: one YAML file naming a backend per role, plus protocol and gate settings.

Secrets never go in the file: an option whose name looks like a credential (``api_key``,
``token``, ``secret``, ``password``) is refused; name the environment variable instead
(``api_key_env: OPENAI_API_KEY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edct_task.core.errors import ConfigError
from edct_task.core.inputs import InputFileError, load_yaml, read_yaml
from edct_task.engine.driver import Limits
from edct_task.engine.protocol import ProtocolConfig
from edct_task.roles import ROLE_KINDS, PanelSpec, RoleSpec, record_of
from model_adapters.errors import OptionsError
from model_adapters.secrets import is_secret_name
from verification.check import GateParams

MAX_SHARDS = 10_000
"""Most slices a run may be cut into (``--shard I/N``, a sweep's ``shards``): a merge lists and
checks every slice, so N is bounded before anything is allocated for it."""


def _refuse_secrets(options: Mapping[str, Any], where: str) -> None:
    """Refuse credential-looking keys at any depth (``extra_body: {nested: {password: …}}`` too)."""
    for key, value in options.items():
        path = f"{where}.{key}"
        if is_secret_name(key):
            raise ValueError(
                f"{path}: secrets may not be written in the config; put the value in an environment "
                f"variable and name it with '{key}_env: VARIABLE_NAME'"
            )
        if isinstance(value, Mapping):
            _refuse_secrets(value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    _refuse_secrets(item, f"{path}[{i}]")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataSection(_Section):
    source: Literal["calibration", "dataset"] = Field(
        "calibration", description="Where samples come from: the calibration world, or an EDCT-Bench dataset."
    )
    path: str | None = Field(
        None,
        description="dataset: a folder written by `edct build-bench` or a hub id (default $EDCT_BENCH_DATA).",
    )
    n: int = Field(300, ge=1, description="Number of calibration samples.")
    seed: int = Field(0, description="Calibration world seed.")
    limit: int | None = Field(None, ge=1, description="Use only the first N samples.")
    limit_per_domain: int | None = Field(
        None,
        ge=1,
        exclude_if=lambda v: v is None,
        description="dataset: only the first N samples of each domain (what lmms-eval's --limit is "
        "on the edct_bench group; `edct run --model … --limit N`).",
    )
    shard: str | None = Field(
        None,
        pattern=r"^\d{1,12}/\d{1,12}$",
        description="I/N: run only slice I (0 … N-1) of the items, by a hash of each item's id "
        "(`edct run --shard`; applied after `limit`; `edct merge` joins the N slices' folders).",
    )
    domains: list[str] | None = Field(
        None,
        exclude_if=lambda v: v is None,
        description="dataset: only the items of these domains (the registered ones: `edct build-bench "
        "--help`); the lmms-eval task edct_bench_<domain> is domains [<domain>] (`edct run --model … "
        "--tasks`).",
    )
    max_pixels: int = Field(
        40_000_000,
        ge=1,
        description="dataset: a row whose image has more pixels (width × height) is refused with its "
        "reason, checked before decoding.",
    )

    @field_validator("shard")
    @classmethod
    def _slice_in_range(cls, shard: str | None) -> str | None:
        if shard is not None and int(shard.split("/")[1]) > MAX_SHARDS:
            raise ValueError(f"shard {shard!r}: N must be at most {MAX_SHARDS} slices")
        if shard is not None and not int(shard.split("/")[0]) < int(shard.split("/")[1]):
            raise ValueError(f"shard {shard!r}: I must be 0 … N-1 (slices are counted from 0)")
        return shard


class RoleSection(BaseModel):
    model_config = ConfigDict(extra="allow")
    backend: str = Field(
        description="The backend's name (edct backends lists them); other keys are its options, "
        "checked against the backend's options when the config is loaded (see Backends below)."
    )


class RunConfig(_Section):
    output_dir: Path = Field(
        Path("runs/edct"), description="Where results.json, samples.jsonl and images/ go."
    )
    cache_dir: Path | None = Field(None, description="Stage cache; default <output_dir>/cache.")
    progress: bool = Field(True, description="Show per-stage progress (a heartbeat line without a terminal).")
    call_log: Path | None = Field(None, description="Append one JSON line per finished backend call.")
    bootstrap_resamples: int = Field(
        10_000,
        ge=100,
        description="Recorded with the run and in a leaderboard bundle; no CCS interval resamples any "
        "more (they are closed-form: docs/concepts/intervals.md).",
    )
    data: DataSection = Field(DataSection(), description="Which samples: the calibration world or a dataset.")
    protocol: ProtocolConfig = Field(ProtocolConfig(), description="The EDCT protocol's settings.")
    verification: GateParams = Field(GateParams(), description="The verification gate's parameters.")
    limits: Limits = Field(Limits(), description="Concurrency per role and the schedule.")
    roles: dict[str, RoleSection | list[RoleSection]] = Field(
        description="One backend per role (target, extractor, judge, edit_parser, editor, detector)."
    )
    """One backend per role; ``judge`` may be a list (a judge panel)."""

    @field_validator("roles")
    @classmethod
    def _no_secrets(
        cls, roles: dict[str, RoleSection | list[RoleSection]]
    ) -> dict[str, RoleSection | list[RoleSection]]:
        for role, value in roles.items():
            for i, section in enumerate(value if isinstance(value, list) else [value]):
                where = f"roles.{role}" + (f"[{i}]" if isinstance(value, list) else "")
                _refuse_secrets(section.model_extra or {}, where)
                record = record_of(ROLE_KINDS[role], section.backend) if role in ROLE_KINDS else None
                if record is not None:  # unknown names and roles: build_roles says what to set
                    try:
                        record.check(section.model_extra or {})
                    except OptionsError as exc:
                        raise ValueError(f"{where}: {exc}") from None
        return roles

    # -- derived ------------------------------------------------------------------------------
    @property
    def resolved_cache_dir(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else self.output_dir / "cache"

    def role_specs(self) -> dict[str, RoleSpec | PanelSpec]:
        def spec(section: RoleSection) -> RoleSpec:
            return RoleSpec(section.backend, dict(section.model_extra or {}))

        return {
            role: PanelSpec(tuple(spec(s) for s in value)) if isinstance(value, list) else spec(value)
            for role, value in self.roles.items()
        }

    @model_validator(mode="after")
    def _derive_protocol(self) -> RunConfig:
        """``protocol.judges`` follows from ``roles.judge`` (a list makes a panel); without an
        ``edit_parser`` role the rule-based parser is used."""
        judge = self.roles.get("judge")
        judges = len(judge) if isinstance(judge, list) else 1
        derived = {"judges": judges}
        if "edit_parser" not in self.roles:
            derived["llm_edit_parser"] = False
        self.protocol = self.protocol.model_copy(update=derived)
        return self


MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read (a real one is a few KB)."""
MAX_CONFIG_INT = 2**63 - 1
"""Largest integer a config may hold (what every counter, seed and size fits in)."""


def load_config(
    path: Path, overrides: list[str] | None = None, flags: Mapping[str, str] | None = None
) -> RunConfig:
    """Read a YAML config and apply ``dotted.key=value`` overrides (values parsed as YAML).

    The file is read only if it is a regular file of at most :data:`MAX_CONFIG_BYTES`, decoded as
    UTF-8 and parsed without YAML aliases (a 1.1 KB file of nested aliases expands to gigabytes);
    every failure is one line naming the file and, where known, the line."""
    if not Path(path).exists() and not Path(path).is_symlink():
        raise ConfigError(f"config file {path} does not exist")
    try:
        raw = read_yaml(Path(path), MAX_CONFIG_BYTES) or {}
    except InputFileError as exc:
        raise ConfigError(f"config file {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return config_from_dict(raw, overrides, flags)


def _check_numbers(value: Any, path: str = "") -> None:
    """Refuse an integer beyond :data:`MAX_CONFIG_INT` anywhere (its path named, not its digits)."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_CONFIG_INT:
            where = where or "the config"
            raise ConfigError(f"{where}: the number is out of range (at most {MAX_CONFIG_INT})")
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))


def config_from_dict(
    raw: dict[str, Any], overrides: list[str] | None = None, flags: Mapping[str, str] | None = None
) -> RunConfig:
    """The validated config of ``raw`` with ``overrides`` applied; an invalid value is one line that
    names what the user typed: the flag that set it (``flags``: config path → flag, as ``--limit``
    sets ``data.limit``), ``--set PATH`` for an override, else the path in the file."""
    raw = _apply_overrides(dict(raw), overrides or [])
    _check_numbers(raw)
    keys = [item.split("=", 1)[0].strip() for item in overrides or []]
    typed = {key: f"--set {key}" for key in keys}
    typed.update(flags or {})
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"])
            problems.append(f"{typed.get(where, where)}: {rule_message(e)}")
        raise ConfigError("; ".join(problems)) from None


_RULES = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
}


def rule_message(error: Mapping[str, Any]) -> str:
    """A validation error as the rule the value broke (``must be at least 1``), else pydantic's words."""
    rule = _RULES.get(str(error.get("type")))
    ctx = error.get("ctx") or {}
    if error.get("type") == "value_error" and ctx.get("error") is not None:  # our validators' own words
        return str(ctx["error"])
    if rule is not None:
        try:
            return rule.format(**ctx)
        except (KeyError, IndexError):
            pass
    return str(error.get("msg", "invalid value"))


def _apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like dotted.key=value")
        dotted, value = item.split("=", 1)
        node = raw
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        try:
            node[parts[-1]] = load_yaml(value, f"--set {dotted.strip()}")
        except InputFileError as exc:
            raise ConfigError(str(exc)) from None
    return raw


def calibration_config(
    behavior: str = "faithful",
    *,
    n: int = 300,
    output_dir: Path = Path("runs/demo"),
    degradation: dict[str, Any] | None = None,
) -> RunConfig:
    """The embedded default: the calibration benchmark with reference backends, fully offline."""
    editor: dict[str, Any] = {"backend": "calibration-editor"}
    if degradation:
        editor["degradation"] = degradation
    return config_from_dict(
        {
            "output_dir": str(output_dir),
            "data": {"source": "calibration", "n": n, "seed": 0},
            "roles": {
                "target": {"backend": "calibration-reference", "behavior": behavior},
                "extractor": {"backend": "calibration-rules"},
                "judge": {"backend": "calibration-rules"},
                "edit_parser": {"backend": "calibration-rules"},
                "editor": editor,
                "detector": {"backend": "calibration-oracle"},
            },
        }
    )
