"""One registration record per backend, next to its code (cf. inspect_ai's ``@modelapi``).

A ``BackendRecord`` says what a backend is (``kind``, ``name``), how it is built (``factory``),
which options it takes (``options``: a pydantic model, checked when the run config is loaded and
listed in the generated reference) and the traits the rest of the project reads from it instead
of tables keyed by backend name: ``paid`` (it gets the cost ceiling), ``local_weights`` (a sweep
job asks for a GPU), ``serial`` (one call at a time), ``calibration_only`` and ``latency`` (what
``edct estimate`` assumes before a run has measured it).

Each package lists its records in a ``RECORDS`` tuple; the composition root
(``edct_task.roles``) collects them, plus those of the ``edct_bench.backends`` entry-point group
for backends shipped outside the repository. This module lives in the lowest leaf package so that
every package with backends can register them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["KINDS", "BackendOptions", "BackendRecord", "Latency", "OptionsError", "check_options"]

Kind = Literal["target", "text", "editor", "detector", "segmenter"]
KINDS: tuple[Kind, ...] = ("target", "text", "editor", "detector", "segmenter")
"""Backend kinds: one contract each (VisionChatModel, TextModel, ImageEditor, MaskProvider, and
the detector's nested segmenter)."""


class OptionsError(ValueError):
    """A backend's options (from the run config's ``roles.<role>:``) are invalid.

    Raised when the config is loaded and by factories at start-up; the message names the option
    and says how to fix it. A ``ValueError``, so configuration layers that catch those report it as
    a configuration error.
    """


class BackendOptions(BaseModel):
    """The options of one backend: every key is a field; an unknown key is refused by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Latency:
    """A backend's assumed call time, before a run has measured it (``edct estimate``)."""

    seconds: float
    """Mean seconds one call waits for (per batch for a target)."""
    sd: float = 0.0
    """Standard deviation of those seconds (log-normal)."""
    per_item: float = 0.0
    """Seconds added per conversation of a target's batch."""
    cpu: float = 0.0
    """CPU seconds in the run's own process per call."""
    note: str = ""
    """Where the number comes from, shown by ``edct estimate``."""


@dataclass(frozen=True)
class BackendRecord:
    """One backend's registration (the module docstring)."""

    kind: Kind
    """Which contract it implements."""
    name: str
    """What ``backend:`` names in the run config."""
    factory: str | Callable[[Mapping[str, Any]], Any]
    """``"module:function"`` (imported when the backend is built, so a missing optional
    dependency fails only then) or the function itself; it takes the options mapping."""
    options: str | type[BackendOptions]
    """Its options model, one typed field each with a description (the generated reference):
    ``"module:Class"`` (imported when a config names the backend) or the class itself."""
    latency: Latency
    """What a call takes, before a run has measured it."""
    paid: bool = False
    """Calls cost money: the registry wraps it in the cost ceiling (``max_cost_usd``)."""
    local_weights: bool = False
    """Loads model weights into the run's process: a sweep job using it asks for a GPU."""
    serial: bool = False
    """One in-process model behind a lock: one call at a time, whatever the concurrency."""
    calibration_only: bool = False
    """Reads the calibration world's scene metadata: useless on real photos."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"backend {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def check(self, options: Mapping[str, Any]) -> BackendOptions:
        """The options validated against ``options``; ``OptionsError`` naming the option."""
        return check_options(self.options_model(), options, f"backend {self.name!r}")

    def options_model(self) -> type[BackendOptions]:
        return _load(self.options) if isinstance(self.options, str) else self.options

    def load_factory(self) -> Callable[[Mapping[str, Any]], Any]:
        return _load(self.factory) if isinstance(self.factory, str) else self.factory


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def check_options(model: type[BackendOptions], options: Mapping[str, Any], what: str) -> BackendOptions:
    """``options`` validated by ``model``, or one ``OptionsError`` line that starts with ``what``
    (``backend 'bfl'``) and names the option, never its value (a misplaced key may be a secret)."""
    if not isinstance(options, Mapping):
        raise OptionsError(f"{what}: options must be a mapping, got {type(options).__name__}")
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        extra = sorted(
            str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1
        )
        if extra:
            known = ", ".join(sorted(model.model_fields)) or "none"
            raise OptionsError(
                f"{what} does not take option(s) {', '.join(extra)} (known: {known})"
            ) from None
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise OptionsError(f"{what}: " + (f"{where}: {message}" if where else message)) from None
