"""Bundles made the way a submitter makes them: ``edct submit`` of an ``edct run`` folder written
from synthetic records (``support.edct_runs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main

ALPHA = {"backend": "openai-chat", "model": "org/alpha-vl", "revision": "abc123"}
"""The default target: a served model with a pinned revision."""


def submitted(
    tmp_path: Path, name: str, level: float, *, target: dict[str, Any] = ALPHA, n: int = 12, offset: int = 0
) -> Path:
    """The bundle ``tmp_path/bundles/NAME.edct.zip`` of a run of ``n`` records at ``level``."""
    write_edct_run(tmp_path / "runs" / name, records(level, n=n, offset=offset), target=target, resamples=200)
    out = tmp_path / "bundles" / f"{name}.edct.zip"
    assert main(["submit", str(tmp_path / "runs" / name), "--out", str(out)]) == 0
    return out
