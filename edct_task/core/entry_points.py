"""Records shipped outside the repository through an entry-point group (backends, domains): each
entry point names one record or a list of them, loaded and checked here; whatever a third party's
import raises is one ``ConfigError`` line naming the entry point."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint
from typing import TypeVar

from edct_task.core.errors import ConfigError

R = TypeVar("R")


def records_of(ep: EntryPoint, kind: type[R], group: str, check: Callable[[R], object]) -> list[R]:
    """The ``kind`` records entry point ``ep`` of ``group`` names, each passed to ``check`` (which
    raises on a record that cannot be used)."""
    where = f"entry point {ep.name} = {ep.value} (group {group})"
    try:
        loaded = ep.load()
        records = [loaded] if isinstance(loaded, kind) else list(loaded)
        if not records or any(not isinstance(r, kind) for r in records):
            raise TypeError(f"it names {type(loaded).__name__}, not a {kind.__name__} or a list of them")
        for record in records:
            check(record)
    except Exception as exc:  # anything a third party's import can raise: one line naming it
        raise ConfigError(f"{where}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None
    return records
