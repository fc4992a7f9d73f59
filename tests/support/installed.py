"""A package that extends edct-bench, installed for a test the way ``pip install`` would expose it:
its modules on ``sys.path`` and a ``.dist-info`` whose ``entry_points.txt`` holds the entry points
its ``pyproject.toml`` declares; the backend and domain registries made fresh so that they read
them. Nothing is installed into the environment (other sessions share it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "docs" / "examples" / "extending" / "edct-toy"
"""docs/extending.md's example package (a ``shapes`` domain and the paid editor ``acme-edit``)."""


def entry_points_of(pyproject: Path) -> str:
    """``entry_points.txt`` text of the ``[project.entry-points."GROUP"]`` tables of ``pyproject``."""
    out, group = [], None
    for line in pyproject.read_text("utf-8").splitlines():
        header = re.fullmatch(r'\[project\.entry-points\."([^"]+)"\]\s*', line)
        if header:
            group = header.group(1)
            out.append(f"[{group}]")
        elif line.startswith("["):
            group = None
        elif group and (m := re.fullmatch(r'\s*([\w.-]+)\s*=\s*"([^"]+)"\s*', line)):
            out.append(f"{m.group(1)} = {m.group(2)}")
    return "\n".join(out) + "\n"


def dist_info(site: Path, package: Path, name: str = "edct_toy") -> Path:
    """``site/<name>-0.1.0.dist-info`` for the package folder ``package``; ``site`` returned."""
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points_of(package / "pyproject.toml"))
    return site


def fresh_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backend and domain registries that have not read the entry points yet (restored after)."""
    from edct_task import roles
    from edct_task.bench_data import domains

    monkeypatch.setattr(roles, "REGISTRY", {kind: dict(records) for kind, records in roles.REGISTRY.items()})
    monkeypatch.setattr(roles, "_entry_points_loaded", False)
    monkeypatch.setattr(domains, "REGISTRY", dict(domains.REGISTRY))
    monkeypatch.setattr(domains, "_entry_points_loaded", False)


def install(site: Path, monkeypatch: pytest.MonkeyPatch, package: Path = TOY) -> list[str]:
    """``package`` installed on ``sys.path`` for this test; the ``PYTHONPATH`` entries a child
    process needs to see it too."""
    dist_info(site, package)
    paths = [str(package), str(site)]
    for path in paths:
        monkeypatch.syspath_prepend(path)
    fresh_registries(monkeypatch)
    return paths
