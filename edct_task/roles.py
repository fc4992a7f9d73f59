"""Roles → backends (cf. inspect_ai model roles).

A run names one backend per role in its configuration; ``build_roles`` turns that into live
objects. Each backend has one ``BackendRecord`` next to its code; ``registry()`` collects them
(this module's calibration backends, each package's ``RECORDS``, the ``edct_bench.backends``
entry points). Factories import optional dependencies inside themselves, so a missing extra fails
only when that backend is asked for, with a message that says so; a paid backend is built behind
the cost ceiling (``build_backend``).

Roles: ``target`` (VisionChatModel), ``extractor`` and ``judge`` (TextModel; the extractor also
writes the edit instructions), ``edit_parser`` (TextModel, optional: the rule-based parser is the
fallback), ``editor`` (ImageEditor), ``detector`` (MaskProvider: finds and masks the edit target).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from pydantic import Field

from edct_task.core.entry_points import records_of
from edct_task.core.errors import ConfigError
from model_adapters import factories as adapter_factories
from model_adapters.contracts import ImageEditor, TextModel, VisionChatModel
from model_adapters.cost_ceiling import CEILING_OPTIONS, with_ceiling
from model_adapters.errors import OptionsError
from verification import factories as verification_factories
from verification.backends import KINDS, BackendOptions, BackendRecord, Latency
from verification.localization import MaskProvider

Options = Mapping[str, Any]

REQUIRED_ROLES = ("target", "extractor", "judge", "editor", "detector")
ROLE_KINDS = {
    "target": "target",
    "extractor": "text",
    "judge": "text",
    "edit_parser": "text",
    "editor": "editor",
    "detector": "detector",
}


HEADER_OPTIONS = ("headers", "extra_headers", "default_headers")
"""Backend options holding HTTP headers: their values may be credentials (``Ocp-Apim-Subscription-Key``,
``X-Auth``), so results, caches and logs record header names only."""
HEADER_VALUE_NOT_RECORDED = "<not recorded>"


class ReferenceOptions(BackendOptions):
    """``calibration-reference``: the calibration world's reference VLM (known truth)."""

    behavior: str = Field(
        "faithful", description="How it answers: faithful, prior, … (edct_task.calibration)."
    )
    latency_s: float | None = Field(
        None, ge=0, description="Seconds it sleeps per batch (driver benchmarks)."
    )


class RulesOptions(BackendOptions):
    """``calibration-rules``: the calibration world's rule-based extractor, judge and edit parser."""

    latency_s: float | None = Field(None, ge=0, description="Seconds it sleeps per call (driver benchmarks).")


class SceneEditorOptions(BackendOptions):
    """``calibration-editor``: the calibration world's scene renderer as the editor."""

    degradation: dict[str, Any] | None = Field(
        None, description="Edits it gets wrong on purpose (edct_task.calibration.Degradation's fields)."
    )
    latency_s: float | None = Field(None, ge=0, description="Seconds it sleeps per edit (driver benchmarks).")


class OracleOptions(BackendOptions):
    """``calibration-oracle``: the calibration world's true masks (no options)."""


def _calibration_target(options: Options) -> VisionChatModel:
    from edct_task.calibration import ReferenceVLM
    from edct_task.latency import DelayedChat

    model = ReferenceVLM(str(options.get("behavior", "faithful")))
    return DelayedChat(model, options["latency_s"]) if options.get("latency_s") else model


def _calibration_text(options: Options) -> TextModel:
    from edct_task.calibration import RuleBasedLLM
    from edct_task.latency import DelayedText

    model = RuleBasedLLM()
    return DelayedText(model, options["latency_s"]) if options.get("latency_s") else model


def _calibration_editor(options: Options) -> ImageEditor:
    from edct_task.calibration import Degradation, SceneEditor
    from edct_task.latency import DelayedEditor

    degradation = options.get("degradation")
    editor = SceneEditor(Degradation(**degradation) if degradation else None)
    return DelayedEditor(editor, options["latency_s"]) if options.get("latency_s") else editor


def _calibration_oracle(options: Options) -> MaskProvider:
    from edct_task.calibration import OracleMaskProvider

    return OracleMaskProvider()


CALIBRATION_RECORDS = (
    BackendRecord(
        "target",
        "calibration-reference",
        _calibration_target,
        ReferenceOptions,
        Latency(0.0, cpu=0.005, note="in-process, 5 ms CPU"),
    ),
    BackendRecord(
        "text",
        "calibration-rules",
        _calibration_text,
        RulesOptions,
        Latency(0.0, note="in-process, microseconds"),
        calibration_only=True,
    ),
    BackendRecord(
        "editor",
        "calibration-editor",
        _calibration_editor,
        SceneEditorOptions,
        Latency(0.0, cpu=0.007, note="in-process renderer, 7 ms CPU"),
        calibration_only=True,
    ),
    BackendRecord(
        "detector",
        "calibration-oracle",
        _calibration_oracle,
        OracleOptions,
        Latency(0.0, cpu=0.038, note="verification, 38 ms CPU"),
        calibration_only=True,
    ),
)
"""The calibration world's reference backends (offline, known truth). The rules, the scene
editor and the oracle read the world's scene metadata or prompts (``calibration_only``): they
cannot extract, judge, edit or locate anything in real photos."""

HOST_RECORDS = (
    BackendRecord(
        "text",
        "inspect-role",
        "edct_task.inspect.role_model:inspect_role_text",
        "edct_task.inspect.role_model:InspectRoleOptions",
        Latency(2.0, note="Inspect's model for the role (--model-role): as its provider"),
    ),
)
"""Backends a host supplies: ``inspect-role`` is Inspect's model for a model role, bound by
``inspect eval --model-role ROLE=MODEL`` (built only inside an Inspect task; ``edct_task.inspect``)."""

ENTRY_POINT_GROUP = "edct_bench.backends"
"""Backends shipped outside the repository: an entry point of this group names a
``BackendRecord`` or a sequence of them (``[project.entry-points."edct_bench.backends"]``)."""


def collect(*groups: Iterable[BackendRecord]) -> dict[str, dict[str, BackendRecord]]:
    """One registry (kind -> name -> record) from groups of records; a name given twice is a bug."""
    out: dict[str, dict[str, BackendRecord]] = {kind: {} for kind in KINDS}
    for records in groups:
        for record in records:
            if not isinstance(record, BackendRecord):
                raise TypeError(f"not a BackendRecord: {record!r}")
            if record.name in out[record.kind]:
                raise KeyError(f"backend {record.kind}/{record.name} is registered twice")
            out[record.kind][record.name] = record
    return out


REGISTRY = collect(
    CALIBRATION_RECORDS, HOST_RECORDS, adapter_factories.RECORDS, verification_factories.RECORDS
)
"""Every backend of the repository by kind and name, collected explicitly from each package's
``RECORDS`` (nothing registers itself on import); ``registry()`` adds the entry points' (tests add a
backend with ``monkeypatch.setitem(REGISTRY[kind], name, record)``)."""

_entry_points_loaded = False


def registry() -> dict[str, dict[str, BackendRecord]]:
    """``REGISTRY`` with the ``edct_bench.backends`` entry points' records (loaded once); a bad
    entry point is one ``ConfigError`` line naming it."""
    global _entry_points_loaded
    if not _entry_points_loaded:
        _entry_points_loaded = True
        try:
            external = [record for ep in entry_points(group=ENTRY_POINT_GROUP) for record in _records_of(ep)]
            for kind, records in collect(external).items():
                for name, record in records.items():
                    if name in REGISTRY[kind]:
                        raise KeyError(f"backend {kind}/{name} is registered twice")
                    REGISTRY[kind][name] = record
        except BaseException:
            _entry_points_loaded = False
            raise
    return REGISTRY


def _records_of(ep: EntryPoint) -> list[BackendRecord]:
    return records_of(ep, BackendRecord, ENTRY_POINT_GROUP, _loadable)


def _loadable(record: BackendRecord) -> None:
    """A record from outside the repository: its options model and factory import."""
    record.options_model()
    record.load_factory()


def record_of(kind: str, name: str) -> BackendRecord | None:
    """The record of backend ``name`` of ``kind``, or None when none is registered."""
    return registry()[kind].get(name)


def build_backend(record: BackendRecord, options: Options) -> Any:
    """The live backend a record's options describe: checked, built, and behind the cost ceiling
    when the backend is paid (``model_adapters.cost_ceiling``)."""
    record.check(options)
    options = dict(options)
    ceiling = {k: options.pop(k) for k in CEILING_OPTIONS if k in options} if record.paid else {}
    backend = record.load_factory()(options)
    return with_ceiling(backend, record.kind, **ceiling) if record.paid else backend


@dataclass(frozen=True)
class RoleSpec:
    backend: str
    options: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """The spec as recorded in results: header values are never written (names are)."""
        options = {
            k: (
                {name: HEADER_VALUE_NOT_RECORDED for name in v}
                if k in HEADER_OPTIONS and isinstance(v, Mapping)
                else v
            )
            for k, v in self.options.items()
        }
        return {"backend": self.backend, **options}


@dataclass(frozen=True)
class PanelSpec:
    """Several backends for one role: the judge panel (majority vote of the binary scores, mean of
    the graded ones)."""

    members: tuple[RoleSpec, ...]

    def as_dict(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [m.as_dict() for m in self.members]


CALIBRATION_SOURCE = "calibration"
"""The ``source`` of the calibration world's samples (its own documents, or a dataset built from them)."""


def refuse_calibration_roles(
    specs: Mapping[str, RoleSpec | PanelSpec], data: str, sources: Iterable[str | None]
) -> None:
    """``ConfigError`` when samples that are not the calibration world's (``sources``: each
    sample's ``source``) would meet a calibration-only role; ``data`` names them in the message."""
    foreign = sorted({str(s) for s in sources if s != CALIBRATION_SOURCE})
    if not foreign:
        return
    data = f"{data} (source {', '.join(foreign[:3])}{', …' if len(foreign) > 3 else ''})"
    named = {}
    for role, spec in specs.items():
        members = spec.members if isinstance(spec, PanelSpec) else (spec,)
        kind = ROLE_KINDS.get(role)
        only = sorted(
            {m.backend for m in members if kind and (r := record_of(kind, m.backend)) and r.calibration_only}
        )
        if only:
            named[role] = only
    if named:
        roles = ", ".join(f"{role} ({'/'.join(b)})" for role, b in named.items())
        raise ConfigError(
            f"{data} is not calibration data, but these roles use calibration-only backends that work "
            f"on the calibration world's images alone: {roles}. Name real backends for them in a config "
            "file (`edct run --config FILE`, or EDCT_CONFIG=FILE for lmms-eval and `edct run --model`); "
            "see docs/guides/roles-backends-presets.md (`edct presets` lists ready-made configs)"
        )


@dataclass
class Roles:
    """Live backends for one run."""

    extractor: TextModel
    judges: tuple[TextModel, ...]
    """The judge, or the members of the judge panel in configuration order."""
    editor: ImageEditor
    detector: MaskProvider
    target: VisionChatModel | None = None
    """None when the caller answers target requests itself (the lmms-eval task hooks)."""
    edit_parser: TextModel | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The values of every environment variable a role's options name (``api_key_env`` …): the
    request handlers redact them from every reply (``engine.redact``)."""

    @property
    def judge(self) -> TextModel:
        return self.judges[0]

    def by_role(self) -> dict[str, Any]:
        """Role name → live backend (panel judges as ``judge0``, ``judge1``, …)."""
        out: dict[str, Any] = {"target": self.target, "extractor": self.extractor}
        if len(self.judges) == 1:
            out["judge"] = self.judge
        else:
            out.update({f"judge{i}": judge for i, judge in enumerate(self.judges)})
        out.update(edit_parser=self.edit_parser, editor=self.editor, detector=self.detector)
        return {role: backend for role, backend in out.items() if backend is not None}

    def identities(self) -> dict[str, Any]:
        """What each role's backend is, as recorded in results and cache keys."""
        return {
            "target": self.target.identity() if self.target else None,
            "extractor": self.extractor.identity(),
            "judge": [judge.identity() for judge in self.judges],
            "edit_parser": self.edit_parser.identity() if self.edit_parser else None,
            "editor": self.editor.identity(),
            "detector": _identity(self.detector),
        }

    def close(self) -> None:
        """Close every backend that holds resources (HTTP clients, servers, model memory)."""
        seen: set[int] = set()
        for backend in self.by_role().values():
            close = getattr(backend, "close", None)
            if callable(close) and id(backend) not in seen:
                seen.add(id(backend))
                close()

    def __enter__(self) -> Roles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def text_model(self, role: str, member: int = 0) -> TextModel:
        if role == "judge":
            return self.judges[member]
        model = {"extractor": self.extractor, "edit_parser": self.edit_parser}[role]
        if model is None:
            raise ConfigError(f"role {role!r} is not configured")
        return model


def _identity(backend: Any) -> dict[str, Any]:
    ident = getattr(backend, "identity", None)
    return ident() if callable(ident) else {"name": backend.name}


def build_roles(
    specs: Mapping[str, RoleSpec | PanelSpec], *, require_target: bool = True, journal_dir: Path | None = None
) -> Roles:
    """Instantiate every configured role, failing early with a message that says what to set.

    ``require_target=False`` is for callers that answer target requests themselves (lmms-eval).
    ``journal_dir``: where a paid backend that keeps a journal of its submitted jobs (an option
    ``job_journal``, not set in the config) keeps it (``<journal_dir>/paid_jobs/<backend>.jsonl``),
    so a rerun looks a paid job up instead of paying for it again (``model_adapters.job_journal``).
    """
    unknown = sorted(set(specs) - set(ROLE_KINDS))
    if unknown:
        raise ConfigError(f"unknown role(s) {', '.join(unknown)}; roles are {', '.join(ROLE_KINDS)}")
    required = REQUIRED_ROLES if require_target else tuple(r for r in REQUIRED_ROLES if r != "target")
    missing = [r for r in required if r not in specs]
    if missing:
        raise ConfigError(
            f"role(s) {', '.join(missing)} not configured: add them under 'roles:' in the config, e.g.\n"
            "roles:\n  "
            + "\n  ".join(f"{r}: {{backend: <name>}}" for r in missing)
            + f"\nknown backends: {available_backends()}"
        )
    preflight(specs)
    built: dict[str, Any] = {}
    for role, spec in specs.items():
        if isinstance(spec, PanelSpec):
            if role != "judge":
                raise ConfigError(f"role {role!r} takes one backend; only 'judge' may be a list (a panel)")
            if not spec.members:
                raise ConfigError("role 'judge': the judge panel is empty")
            built["judges"] = tuple(_build_one(role, m, journal_dir) for m in spec.members)
        elif role == "judge":
            built["judges"] = (_build_one(role, spec, journal_dir),)
        else:
            built[role] = _build_one(role, spec, journal_dir)
    return Roles(**built, secrets=_secret_values(specs))


def _secret_values(specs: Mapping[str, RoleSpec | PanelSpec]) -> tuple[str, ...]:
    """The values of the environment variables every ``*_env`` option of every role names."""
    values = []
    for role, spec in specs.items():
        for member in spec.members if isinstance(spec, PanelSpec) else (spec,):
            for _, variable in _env_options(member.options, f"roles.{role}"):
                if os.environ.get(variable):
                    values.append(os.environ[variable])
    return tuple(values)


def preflight(specs: Mapping[str, RoleSpec | PanelSpec]) -> None:
    """What can be checked before any backend is built: every backend name is known, and every
    environment variable an option names (``api_key_env: NAME`` …) is set."""
    for role, spec in specs.items():
        for member in spec.members if isinstance(spec, PanelSpec) else (spec,):
            kind = ROLE_KINDS[role]
            if member.backend not in registry()[kind]:
                raise ConfigError(
                    f"roles.{role}: unknown backend {member.backend!r}; {kind} backends: "
                    f"{', '.join(sorted(registry()[kind]))}"
                )
            for path, variable in _env_options(member.options, f"roles.{role}"):
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", variable):
                    raise ConfigError(  # never echo it: it may be the key itself, put there by mistake
                        f"{path} must name an environment variable (like OPENAI_API_KEY), not hold a "
                        "value; put the key in the environment and its name here"
                    )
                if variable not in os.environ:
                    raise ConfigError(
                        f"{path} names the environment variable {variable}, which is not set: "
                        f"export {variable}=... before the run"
                    )


def _env_options(options: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    """``(dotted path, variable)`` of every ``*_env`` option with a string value, at any depth."""
    out = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            out += _env_options(value, f"{path}.{key}")
        elif str(key).endswith("_env") and isinstance(value, str):
            out.append((f"{path}.{key}", value))
    return out


def _build_one(role: str, spec: RoleSpec, journal_dir: Path | None = None) -> Any:
    record = registry()[ROLE_KINDS[role]][spec.backend]
    options = dict(spec.options)
    journals = record.paid and "job_journal" in record.options_model().model_fields
    if journal_dir is not None and journals and not options.get("job_journal"):
        options["job_journal"] = str(journal_dir / "paid_jobs" / f"{spec.backend}.jsonl")
    try:
        return build_backend(record, options)
    except (OptionsError, ValueError, TypeError) as exc:  # a bad option value is a user error
        # one line: libraries' messages (a model not cached while offline) span several
        raise ConfigError(f"roles.{role} (backend {spec.backend!r}): {' '.join(str(exc).split())}") from None
    except OSError as exc:  # weights not found, not cached while offline, gated: a user error too
        reason = " ".join(str(exc).split())[:400]
        raise ConfigError(
            f"roles.{role} (backend {spec.backend!r}): cannot load its model ({type(exc).__name__}: {reason})"
        ) from None


def available_backends() -> dict[str, list[str]]:
    """Backend names per role (``segmenter`` is the detector role's nested option)."""
    out = {role: sorted(registry()[kind]) for role, kind in ROLE_KINDS.items()}
    out["segmenter"] = sorted(registry()["segmenter"])
    return out
