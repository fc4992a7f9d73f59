"""``edct run`` under torchrun and accelerate: documents sharded over two ranks, each running the
batched driver on its share with one shared stage cache, rank 0 gathering over gloo and writing
ONE output folder — the same scores, records and images as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.hang_guard import hang_limit
from support.vllm_server import free_port

from edct_task.config import calibration_config
from edct_task.core.errors import ConfigError
from edct_task.run.sharding import Shard, item_slice, shard_from_env, sum_counts

N = 24
BIN = Path(sys.executable).parent
RUN = ["-m", "edct_task.cli.main", "run", "--no-progress", "--config"]
LAUNCHERS = {
    # --standalone: a rendezvous on a free local port (tests run in parallel)
    "torchrun": [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2"],
    # accelerate's --cpu needs MPI for several processes; its torchrun-based launcher runs on CPU
    "accelerate": [
        *(str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"),
        *("--mixed_precision", "no", "--dynamo_backend", "no"),
    ],
}


def _edct(cmd: list[str], out: Path) -> float:
    """Run ``cmd`` to success; its wall time, printed for the reader, never asserted (a busy machine
    decides it: the speed of ranks is benchmarks/' business)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [*cmd, "--output", str(out)], env=env, capture_output=True, text=True, timeout=hang_limit(600)
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return time.perf_counter() - started


def _folder(out: Path) -> tuple[dict, list[str], dict[str, bytes]]:
    results = json.loads((out / "results.json").read_text())
    lines = (out / "samples.jsonl").read_text().splitlines()
    images = {str(p.relative_to(out)): p.read_bytes() for p in (out / "images").rglob("*.png")}
    return results, lines, images


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    raw = calibration_config("mixed:0.5", n=N).model_dump(mode="json")
    path = tmp_path_factory.mktemp("config") / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def single(tmp_path_factory, config: Path) -> tuple[Path, float]:
    out = tmp_path_factory.mktemp("single") / "run"
    return out, _edct([sys.executable, *RUN, str(config)], out)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_two_ranks_write_the_single_process_results(
    single, config: Path, launcher: str, tmp_path: Path
) -> None:
    one, one_s = single
    out = tmp_path / "run"
    port = ["--main_process_port", str(free_port())] if launcher == "accelerate" else []
    two_s = _edct([*LAUNCHERS[launcher], *port, *RUN, str(config)], out)
    print(f"\nedct run, {N} calibration samples: 1 process {one_s:.1f} s, {launcher} 2 ranks {two_s:.1f} s")
    r1, lines1, images1 = _folder(one)
    r2, lines2, images2 = _folder(out)
    assert r2["results"] == r1["results"]
    assert r2["judge_agreement"] == r1["judge_agreement"]
    assert lines2 == lines1  # every record, in document order
    assert images2 == images1
    assert r2["results"]["overall"]["counts"]["total"] == N
    # call counts are the ranks' sums: every stage was called, none failed
    assert set(r2["calls"]["calls"]) == set(r1["calls"]["calls"]) and not r2["calls"]["failures"]


def test_shards_come_from_rank_and_world_size() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    shard = shard_from_env(env)
    assert shard == Shard(1, 3) and not shard.is_main
    ids = [f"doc-{i}" for i in range(12)]  # rank 1 of 3 takes slice 1 of 3 (run.sharding.item_slice)
    assert shard.take(ids, key=str) == [i for i in ids if item_slice(i, 3) == 1] != []
    assert shard_from_env({}) is None and shard_from_env({"WORLD_SIZE": "1"}) is None
    with pytest.raises(ConfigError, match="MASTER_ADDR"):
        shard_from_env({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(ConfigError, match=r"outside 0\.\.1"):
        shard_from_env({**env, "RANK": "2", "WORLD_SIZE": "2"})


def test_rank_counters_add_up() -> None:
    a = {"calls": {"judge": 3}, "seconds": {"judge": 0.5}, "endpoints": [{"endpoint": "a", "requests": 2}]}
    b = {
        "calls": {"judge": 4, "edit": 1},
        "seconds": {"judge": 0.25},
        "endpoints": [{"endpoint": "a", "requests": 5}],
    }
    assert sum_counts([a, b]) == {
        "calls": {"judge": 7, "edit": 1},
        "seconds": {"judge": 0.75},
        "endpoints": [{"endpoint": "a", "requests": 7}],
    }
