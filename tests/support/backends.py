"""Stand-in backends for tests: a ``BackendRecord`` around a test's own factory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ConfigDict

from verification.backends import BackendOptions, BackendRecord, Latency


class AnyOptions(BackendOptions):
    """A stand-in takes whatever options its test gives it."""

    model_config = ConfigDict(extra="allow", frozen=True)


def stand_in(
    kind: str, name: str, factory: Callable[[Mapping[str, Any]], Any], **traits: Any
) -> BackendRecord:
    """The record of a test's backend (in-process, no options checked)."""
    return BackendRecord(kind, name, factory, AnyOptions, traits.pop("latency", Latency(0.0)), **traits)  # type: ignore[arg-type]


def build(kind: str, name: str, options: Mapping[str, Any]) -> Any:
    """Backend ``name`` of ``kind`` built as a run builds it (``edct_task.roles.build_backend``)."""
    from edct_task.roles import build_backend, registry

    return build_backend(registry()[kind][name], options)
