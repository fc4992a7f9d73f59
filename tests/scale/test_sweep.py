"""``edct sweep``: jobs expanded from a sweep file, run locally (no Ray needed) or as Ray tasks,
retried, merged; the same sweep as a Slurm job array whose every array task runs here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
import yaml
from conftest import SHARDS, N
from support.hang_guard import hang_limit

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.core.errors import ConfigError
from edct_task.scale.execute import Outcome, RayExecutor, SweepError, run_jobs
from edct_task.scale.sweep import expand

MIXED = {"backend": "calibration-reference", "behavior": "mixed:0.5"}


def _sweep(tmp_path: Path, models: dict, *, shards: int = SHARDS, n: int = N, **extra) -> Path:
    raw = calibration_config("faithful", n=n).model_dump(mode="json")
    raw.pop("output_dir")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(raw))
    spec = {"output": "out", "configs": {"base": "base.yaml"}, "models": models, "shards": shards, **extra}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "sweep.yaml"


def test_a_sweep_expands_into_checked_jobs(tmp_path: Path) -> None:
    path = _sweep(tmp_path, {"a": MIXED, "b": {"backend": "calibration-reference"}}, seeds=[0, 1], shards=2)
    sweep = expand(path)
    assert [g.name for g in sweep.groups] == ["a/base/seed0", "a/base/seed1", "b/base/seed0", "b/base/seed1"]
    assert len(sweep.jobs) == 8 and all(j.num_gpus == 0 and j.num_cpus == 1 for j in sweep.jobs)
    job = sweep.jobs[1]
    assert job.config.data.shard == "1/2" and job.config.roles["target"].model_extra == {
        "behavior": "mixed:0.5"
    }
    assert job.output == tmp_path / "out" / "jobs" / "a/base/seed0" / "shard1-of-2"
    bad = _sweep(tmp_path, {"a": MIXED}, set=["protocol.k=zero"])
    with pytest.raises(ConfigError, match=r"sweep job a/base/seed0 .*protocol\.k"):
        expand(bad)


def test_a_job_loading_weights_here_asks_for_a_gpu(tmp_path: Path) -> None:
    path = _sweep(
        tmp_path, {"a": MIXED}, shards=1, set=['roles.editor={"backend": "diffusers", "model": "m"}']
    )
    assert expand(path).jobs[0].num_gpus == 1
    on_cpu = _sweep(
        tmp_path, {"a": MIXED}, shards=1, set=['roles.editor={"backend": "diffusers", "device": "cpu"}']
    )
    assert expand(on_cpu).jobs[0].num_gpus == 0


class Scripted:
    """An executor whose jobs end as scripted (exit codes per try), to pin the retry policy."""

    name = "scripted"

    def __init__(self, codes: dict[str, list[int]]) -> None:
        self.codes, self.pending, self.tries = codes, [], []

    def submit(self, job, attempt):
        self.pending.append((job, attempt))

    def next_done(self):
        job, attempt = self.pending.pop(0)
        self.tries.append((job.name, attempt))
        return job, attempt, Outcome(job.name, self.codes[job.name][attempt - 1], 0.1, "tail")

    @property
    def busy(self):
        return bool(self.pending)

    def close(self):
        pass


def test_failed_tries_are_retried_and_refusals_stop_the_sweep(tmp_path: Path) -> None:
    jobs = expand(_sweep(tmp_path, {"a": MIXED}, shards=2)).jobs
    lines: list[str] = []
    ex = Scripted({jobs[0].name: [-9, 1, 0], jobs[1].name: [3]})  # killed, crashed, done; done (exit 3)
    run_jobs(jobs, ex, retries=2, say=lines.append)
    assert ex.tries == [(jobs[0].name, 1), (jobs[1].name, 1), (jobs[0].name, 2), (jobs[0].name, 3)]
    assert "exit -9 (tail); try 2 of 3, resuming from its cache" in lines[0] and lines[-1].startswith(
        "[2/2 jobs"
    )
    with pytest.raises(SweepError, match="failed 2 time"):
        run_jobs(jobs[:1], Scripted({jobs[0].name: [1, 1]}), retries=1, say=lines.append)
    with pytest.raises(SweepError, match="was refused: tail"):
        run_jobs(jobs[:1], Scripted({jobs[0].name: [2, 0]}), retries=5, say=lines.append)


class FakeRay(types.ModuleType):
    """``ray`` whose local node never comes up (as on a loaded machine); records the environment
    and the arguments ``ray.init`` saw."""

    def __init__(self) -> None:
        super().__init__("ray")
        self.seen: dict = {}

    def init(self, **kwargs):
        self.seen.update(kwargs, wait=os.environ.get("RAY_raylet_start_wait_time_s"))  # noqa: SIM112 (Ray spells it so)
        raise Exception(  # what Ray 2.60 raises after its fixed 30 s wait for the raylet
            "The current node timed out during startup. This could happen because some of the raylet "
            "failed to startup or the GCS has become overloaded."
        )


def test_a_ray_that_does_not_start_stops_the_sweep_with_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_raylet_start_wait_time_s", raising=False)
    path = _sweep(tmp_path, {"a": MIXED}, shards=2)
    assert main(["sweep", str(path), "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "timed out during startup" in err and "ray start --head" in err and "--local" in err
    assert fake.seen == {
        "address": None,
        "include_dashboard": False,
        "log_to_driver": False,
        "num_cpus": 2,
        "wait": "120",  # the driver's wait for its raylet, raised for a loaded machine
    }
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "600")  # the user's own value wins
    with pytest.raises(SweepError, match="is the cluster running"):
        RayExecutor(address="ray://head:10001")
    assert fake.seen["wait"] == "600" and fake.seen["address"] == "ray://head:10001"


def test_a_ray_address_nobody_answers_at_stops_the_sweep_with_one_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Ray retries a connection to an address nobody answers at without end (issue 46): the sweep
    stops once ``RAY_CONNECT_S`` pass, with one line naming the address."""
    from edct_task.scale import execute

    release = threading.Event()
    fake = FakeRay()
    fake.init = lambda **kwargs: release.wait()  # what ray.init does at an unreachable address
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(execute, "RAY_CONNECT_S", 0.5)
    path = _sweep(tmp_path, {"a": MIXED}, shards=2)
    try:
        assert main(["sweep", str(path), "--address", "10.255.255.1:6379"]) == 2
    finally:
        release.set()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "Ray did not start at 10.255.255.1:6379" in err and "no answer within 0.5 s" in err
    assert "is the cluster running" in err


@pytest.mark.slow
def test_a_local_sweep_merges_every_run_and_prints_every_model(runs, tmp_path: Path, capsys) -> None:
    path = _sweep(
        tmp_path, {"mixed": MIXED, "prior": {"backend": "calibration-reference", "behavior": "prior"}}
    )
    assert main(["sweep", str(path), "--local"]) == 0
    out = capsys.readouterr().out
    assert f"{2 * SHARDS} job(s) in 2 run(s) on local" in out and f"[{2 * SHARDS}/{2 * SHARDS} jobs" in out
    merged = tmp_path / "out" / "mixed" / "base" / "seed0"
    assert (merged / "samples.jsonl").read_bytes() == (runs["one"] / "samples.jsonl").read_bytes()
    for row in ("mixed/base/seed0", "prior/base/seed0"):
        assert re.search(rf"^{row} +\d\.\d{{3}} \[\d\.\d\d,\d\.\d\d\]", out, re.M), out
    assert main(["sweep", str(path), "--merge-only"]) == 0  # merging again gives the same folder
    assert (merged / "samples.jsonl").read_bytes() == (runs["one"] / "samples.jsonl").read_bytes()


@pytest.mark.slow
def test_the_slurm_array_runs_task_by_task(runs, tmp_path: Path, capsys) -> None:
    """The emitted scripts parsed and run: each array task's command by bash with its
    SLURM_ARRAY_TASK_ID, then the merge script; the merged run is the unsharded run."""
    path = _sweep(tmp_path, {"mixed": MIXED})
    slurm = tmp_path / "slurm"
    assert main(["sweep", str(path), "--emit-slurm", str(slurm), "--max-parallel", "2"]) == 0
    jobs = (slurm / "jobs.sbatch").read_text()
    directives = dict(re.findall(r"^#SBATCH --([a-z-]+)=(\S+)$", jobs, re.M))
    assert directives["array"] == f"0-{SHARDS - 1}%2" and directives["cpus-per-task"] == "1"
    assert "gres" not in directives  # no job loads weights here
    submit = (slurm / "submit.sh").read_text()
    assert re.search(r"jobs=\$\(sbatch --parsable \S+jobs\.sbatch\)", submit)
    assert re.search(r'sbatch --dependency="afterok:\$\{jobs%%;\*\}" \S+merge\.sbatch', submit)
    env = {**os.environ, "EDCT": f"{sys.executable} -m edct_task.cli.main"}
    first, last = directives["array"].split("%")[0].split("-")
    for task in range(int(first), int(last) + 1):
        done = subprocess.run(
            ["bash", str(slurm / "jobs.sbatch")],
            env={**env, "SLURM_ARRAY_TASK_ID": str(task)},
            capture_output=True,
            text=True,
            timeout=hang_limit(300),
        )
        assert done.returncode == 0, done.stderr[-2000:]
    outside = subprocess.run(
        ["bash", str(slurm / "jobs.sbatch")],
        env={**env, "SLURM_ARRAY_TASK_ID": "99"},
        capture_output=True,
        text=True,
        timeout=hang_limit(300),
    )
    assert outside.returncode == 2 and "no job 99" in outside.stderr
    merge = subprocess.run(
        ["bash", str(slurm / "merge.sbatch")],
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_limit(300),
    )
    assert merge.returncode == 0, merge.stderr[-2000:]
    assert f"merged {SHARDS} shards of mixed/base/seed0" in merge.stdout
    merged = tmp_path / "out" / "mixed" / "base" / "seed0"
    assert (merged / "samples.jsonl").read_bytes() == (runs["one"] / "samples.jsonl").read_bytes()
    assert (
        json.loads((merged / "results.json").read_text())["results"]
        == json.loads((runs["one"] / "results.json").read_text())["results"]
    )


def test_merging_a_sweep_whose_jobs_have_not_run_names_them(tmp_path: Path, capsys) -> None:
    path = _sweep(tmp_path, {"a": MIXED}, shards=2)
    assert main(["sweep", str(path), "--merge-only"]) == 2
    err = capsys.readouterr().err
    assert "2 job(s) have not finished: a/base/seed0/shard0-of-2, a/base/seed0/shard1-of-2" in err
