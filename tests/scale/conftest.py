"""Shard runs of a small calibration benchmark, shared by the scale tests (each run once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edct_task.config import RunConfig, calibration_config
from edct_task.run.runner import run

N = 12
SHARDS = 3


def small_config(out: Path, *, shard: str | None = None, limit: int | None = None, n: int = N) -> RunConfig:
    config = calibration_config("mixed:0.5", n=n)
    data = config.data.model_copy(update={"shard": shard, "limit": limit})
    return config.model_copy(update={"output_dir": out, "progress": False, "data": data})


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``one``: the unsharded run; ``s0`` … ``s2``: its three slices as ``--shard I/3`` jobs."""
    base = tmp_path_factory.mktemp("shard-runs")
    out = {"one": base / "one"}
    run(small_config(out["one"]))
    for i in range(SHARDS):
        out[f"s{i}"] = base / f"s{i}"
        run(small_config(out[f"s{i}"], shard=f"{i}/{SHARDS}"))
    return out
