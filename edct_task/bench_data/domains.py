"""The registry of EDCT-Bench domains: each source module's ``DOMAIN`` record, in order, and those
of the ``edct_bench.domains`` entry-point group (domains shipped outside the repository).

Order matters once: ``--counts 160,80,60`` gives one count per domain in registry order. Tests
add a domain with ``monkeypatch.setitem(REGISTRY, name, record)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from edct_task.bench_data import drivelm, okvqa, threedsr
from edct_task.bench_data.domain import Domain
from edct_task.core.entry_points import records_of
from edct_task.core.errors import ConfigError

ENTRY_POINT_GROUP = "edct_bench.domains"
"""Domains shipped outside the repository: an entry point of this group names a ``Domain`` or a
sequence of them (``[project.entry-points."edct_bench.domains"]``)."""


def collect(*groups: Iterable[Domain]) -> dict[str, Domain]:
    """One registry (name -> record) from groups of records; a name given twice is a bug."""
    out: dict[str, Domain] = {}
    for records in groups:
        for record in records:
            if not isinstance(record, Domain):
                raise TypeError(f"not a Domain: {record!r}")
            if record.name in out:
                raise KeyError(f"domain {record.name} is registered twice")
            out[record.name] = record
    return out


REGISTRY = collect((okvqa.DOMAIN, drivelm.DOMAIN, threedsr.DOMAIN))
"""The repository's domains, in the paper's order; ``registry()`` adds the entry points'."""

_entry_points_loaded = False


def registry() -> dict[str, Domain]:
    """``REGISTRY`` with the ``edct_bench.domains`` entry points' records (loaded once); a bad
    entry point is one ``ConfigError`` line naming it."""
    global _entry_points_loaded
    if not _entry_points_loaded:
        _entry_points_loaded = True
        try:
            external = collect([d for ep in entry_points(group=ENTRY_POINT_GROUP) for d in _records_of(ep)])
            for name, record in external.items():
                if name in REGISTRY:
                    raise ConfigError(
                        f"domain {name} is registered twice (entry point group {ENTRY_POINT_GROUP})"
                    )
                REGISTRY[name] = record
        except BaseException:
            _entry_points_loaded = False
            raise
    return REGISTRY


def _records_of(ep: EntryPoint) -> list[Domain]:
    return records_of(ep, Domain, ENTRY_POINT_GROUP, Domain.load_scan)


def domains() -> tuple[Domain, ...]:
    """Every registered domain, in registry order."""
    return tuple(registry().values())


def names() -> tuple[str, ...]:
    return tuple(registry())


def domain(name: str) -> Domain | None:
    return registry().get(name)


def by_task(task: str) -> Domain | None:
    """The domain whose lmms-eval task is ``task`` (``edct_bench_okvqa``), or None."""
    return next((d for d in domains() if d.task == task), None)


def of_id(item_id: str) -> Domain | None:
    """The domain a benchmark id belongs to by its prefix (``okvqa-2971475``), or None."""
    return next((d for d in domains() if item_id.startswith(d.name + "-")), None)
