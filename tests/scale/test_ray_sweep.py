"""A sweep as Ray tasks on a local Ray cluster (and on the local executor, without Ray): the shards
merged into the unsharded run, also when one shard's process is killed mid-run (the sweep retries
it; the retry resumes from the stage cache the killed try left)."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import SHARDS, N
from support.hang_guard import deadline, hang_limit

from edct_task.config import calibration_config
from edct_task.scale.execute import LocalExecutor, RayExecutor, merge_groups, run_jobs
from edct_task.scale.sweep import Job, expand

pytestmark = pytest.mark.slow
KILL_AT_CALLS = 20


def _cached(job: Job) -> int:
    path = job.output / "cache" / "stages.sqlite"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM entries").fetchone()[0]
    except sqlite3.Error:
        return 0


def _kill_mid_run(job: Job, killed: dict) -> None:
    """SIGKILL the process running ``job`` (this test's own, found by its output folder) once
    ``KILL_AT_CALLS`` of its calls are in its stage cache."""
    end = deadline(240)
    while time.monotonic() < end:
        for p in psutil.process_iter(["pid", "cmdline"]):
            if str(job.output) in (p.info["cmdline"] or []):
                while (done := _cached(job)) < KILL_AT_CALLS and p.is_running():
                    time.sleep(0.02)
                p.send_signal(signal.SIGKILL)
                killed.update(pid=p.info["pid"], cached=done)
                return
        time.sleep(0.1)


def _executor(kind: str):
    if kind == "local":
        return LocalExecutor()
    pytest.importorskip("ray")
    return RayExecutor(num_cpus=SHARDS)


@pytest.mark.parametrize("kind", ["ray", "local"])
def test_jobs_merge_into_the_single_run_even_with_a_shard_killed(runs, tmp_path: Path, kind: str) -> None:
    raw = calibration_config("faithful", n=N).model_dump(mode="json")
    raw.pop("output_dir")
    for role in ("extractor", "judge", "edit_parser"):  # slow enough to be killed mid-run;
        raw["roles"][role]["latency_s"] = 0.3  # latency never changes a record
    raw["limits"]["text_concurrency"] = 1
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(raw))
    target = {"backend": "calibration-reference", "behavior": "mixed:0.5"}
    spec = {"output": "out", "configs": {"base": "base.yaml"}, "models": {"mixed": target}, "shards": SHARDS}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    sweep = expand(tmp_path / "sweep.yaml")
    killed: dict = {}
    watcher = threading.Thread(target=_kill_mid_run, args=(sweep.jobs[1], killed), daemon=True)
    watcher.start()
    lines: list[str] = []
    run_jobs(sweep.jobs, _executor(kind), retries=1, say=lines.append)
    watcher.join(hang_limit(5))  # it returned once it killed (before the retry could finish)
    assert killed and killed["cached"] >= KILL_AT_CALLS, killed
    retried = [line for line in lines if "shard1-of-3: exit -9" in line]
    assert len(retried) == 1 and "try 2 of 2" in retried[0], lines
    rerun = json.loads((sweep.jobs[1].output / "results.json").read_text())["calls"]
    fresh = json.loads((runs["s1"] / "results.json").read_text())["calls"]  # the same slice, not killed
    requests = sum(fresh["calls"].values()) + sum(fresh["cache_hits"].values())
    assert sum(rerun["calls"].values()) + sum(rerun["cache_hits"].values()) == requests
    assert sum(rerun["cache_hits"].values()) >= killed["cached"]  # resumed from the killed try's cache
    merge_groups(sweep, say=lines.append)
    merged = sweep.groups[0].output
    assert (merged / "samples.jsonl").read_bytes() == (runs["one"] / "samples.jsonl").read_bytes()
    one, got = (json.loads((d / "results.json").read_text()) for d in (runs["one"], merged))
    assert got["results"] == one["results"] and got["judge_health"] == one["judge_health"]
