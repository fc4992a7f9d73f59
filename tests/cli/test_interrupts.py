"""Ctrl-C in ``edct run``, with real SIGINTs sent to a subprocess (``core.interrupt``).

The first Ctrl-C stops new work at once and says so; a second one quits at once without a
traceback; nothing finished is lost, and the rerun says how many calls it reused."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
import yaml
from support.hang_guard import hang_limit, wait_for
from support.loopback import UNTIL_CLOSED, CalibrationWorld, FaultPlan, Loopback
from support.processes import alive

from edct_task.core.interrupt import QUITTING, STOPPING

pytestmark = pytest.mark.slow

ROLES = {
    "extractor": {"backend": "calibration-rules"},
    "judge": {"backend": "calibration-rules"},
    "edit_parser": {"backend": "calibration-rules"},
    "editor": {"backend": "calibration-editor"},
    "detector": {"backend": "calibration-oracle"},
}


def _config(
    tmp_path: Path, name: str, n: int, latency: dict[str, float], target: dict | None = None, **limits: int
) -> Path:
    roles = {"target": target or {"backend": "calibration-reference", "behavior": "faithful"}, **ROLES}
    roles = {r: {**spec, **({"latency_s": latency[r]} if r in latency else {})} for r, spec in roles.items()}
    config = {
        "output_dir": str(tmp_path / "run"),
        "call_log": str(tmp_path / f"{name}-calls.jsonl"),
        "progress": False,
        "data": {"source": "calibration", "n": n, "seed": 0},
        "protocol": {"k": 2},
        "limits": limits,
        "roles": roles,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Edct:
    """``edct run --config CONFIG`` in a subprocess, its output read line by line as it comes."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "edct_task.cli.main", "run", "--config", str(config)],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def wait(self, nominal_s: float) -> str:
        """The exit under a hang guard (a hung process is killed), then everything it printed."""
        try:
            self.proc.wait(timeout=hang_limit(nominal_s))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self._reader.join(timeout=hang_limit(10))
        return self.out


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _pooled_calls(call_log: Path) -> int:
    """Finished calls of the roles with one call in flight (the target's batches left out)."""
    lines = call_log.read_text().splitlines() if call_log.exists() else []
    return sum(json.loads(line)["stage"] != "target" for line in lines if line.strip())


def _cache_entries(run: Path) -> int:
    with sqlite3.connect(run / "cache" / "stages.sqlite") as db:
        return int(db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


def test_first_ctrl_c_stops_new_work_at_once_and_the_rerun_reuses_every_finished_call(tmp_path):
    # one call in flight per role, every text call 0.3 s: dozens of extractor calls queue behind
    config = _config(
        tmp_path,
        "slow",
        30,
        {"extractor": 0.3, "judge": 0.3, "edit_parser": 0.3, "target": 0.3},
        text_concurrency=1,
        editor_concurrency=1,
        verify_concurrency=1,
    )
    calls = tmp_path / "slow-calls.jsonl"
    run = Edct(config)
    assert wait_for(lambda: _pooled_calls(calls) >= 4 or run.proc.poll() is not None, 120)
    assert run.proc.poll() is None, run.out
    before = _pooled_calls(calls)
    run.proc.send_signal(signal.SIGINT)
    out = run.wait(60)
    assert run.proc.returncode == 130, out
    assert STOPPING in out and "Traceback" not in out
    # at most the calls in flight finished after the signal (one text call, one edit, one check,
    # and one that finished while the signal was sent); the old shutdown ran every queued call
    # (≈ 30 extractor calls here)
    assert _pooled_calls(calls) - before <= 4, out
    kept = _cache_entries(tmp_path / "run")
    assert kept >= _lines(calls) > 0
    # the rerun (no latency: the same setup) reuses every finished call and computes the rest
    fast = _config(tmp_path, "fast", 30, {})
    rerun = subprocess.run(
        [sys.executable, "-m", "edct_task.cli.main", "run", "--config", str(fast)],
        capture_output=True,
        text=True,
        timeout=hang_limit(600),
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    (tmp_path / "clean").mkdir()
    clean_config = _config(tmp_path / "clean", "clean", 30, {})
    clean = subprocess.run(
        [sys.executable, "-m", "edct_task.cli.main", "run", "--config", str(clean_config)],
        capture_output=True,
        text=True,
        timeout=hang_limit(600),
    )
    assert clean.returncode == 0, clean.stderr[-2000:]
    resumed = json.loads((tmp_path / "run" / "results.json").read_text())
    fresh = json.loads((tmp_path / "clean" / "run" / "results.json").read_text())
    new = sum(resumed["calls"]["calls"].values())
    assert "resumed: " in rerun.stdout and f", {new} new" in rerun.stdout
    assert new == sum(fresh["calls"]["calls"].values()) - kept  # nothing finished was lost
    assert resumed["results"] == fresh["results"]
    assert "resumed:" not in clean.stdout


def test_second_ctrl_c_quits_at_once_without_a_traceback(tmp_path):
    # the target is a server whose replies stall until it closes: the first Ctrl-C is sent once a
    # target call is really in flight (the server has it), so only a prompt exit ends the process
    stall = FaultPlan(rate=1.0, kinds=("timeout",), max_consecutive=10**6, stall_s=UNTIL_CLOSED)
    with Loopback(CalibrationWorld("faithful"), faults=stall) as server:
        target = {
            "backend": "openai-chat",
            "model": "calibration-vlm",
            "base_url": f"{server.url}/v1",
            "api_key_env": "EDCT_LOOPBACK_KEY",
            "timeout_s": 3600,  # longer than the test: the call stays in flight
            "max_retries": 0,
        }
        config = _config(tmp_path, "stuck", 4, {}, target=target)
        run = Edct(config, env={"EDCT_LOOPBACK_KEY": "sk-loopback"})
        in_flight = lambda: server.requests["/v1/chat/completions"] > 0  # noqa: E731
        assert wait_for(lambda: in_flight() or run.proc.poll() is not None, 120), run.out
        assert run.proc.poll() is None, run.out
        run.proc.send_signal(signal.SIGINT)
        assert wait_for(lambda: STOPPING in run.out, 30), run.out
        run.proc.send_signal(signal.SIGINT)
        out = run.wait(30)
        assert run.proc.returncode == 130, out
        assert QUITTING in out and "Traceback" not in out


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _gone(procs: list[psutil.Process]) -> bool:
    return not any(alive(p) for p in procs)


def test_sigterm_stops_a_sweep_and_its_running_job(tmp_path):
    """SIGTERM (a scheduler's stop) to ``edct sweep``: its running ``edct run`` job is stopped with
    it, never left behind as an orphan; exit 143 and no traceback."""
    base = _config(
        tmp_path, "base", 30, {"extractor": 0.3, "judge": 0.3, "edit_parser": 0.3}, text_concurrency=1
    )
    raw = yaml.safe_load(base.read_text())
    raw.pop("output_dir")
    raw.pop("call_log")
    base.write_text(yaml.safe_dump(raw))
    spec = {
        "output": str(tmp_path / "out"),
        "configs": {"base": str(base)},
        "models": {"faithful": {"backend": "calibration-reference", "behavior": "faithful"}},
        "shards": 1,
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    sweep = subprocess.Popen(
        [sys.executable, "-m", "edct_task.cli.main", "sweep", str(tmp_path / "sweep.yaml"), "--local"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started = lambda: list((tmp_path / "out").rglob("stages.sqlite")) or sweep.poll() is not None  # noqa: E731
    assert wait_for(started, 120) and sweep.poll() is None, sweep.communicate()[0]  # the job runs
    job = _children(sweep.pid)
    assert job
    sweep.send_signal(signal.SIGTERM)
    out, _ = sweep.communicate(timeout=hang_limit(60))
    assert sweep.returncode == 143, out
    assert STOPPING in out and "Traceback" not in out
    assert wait_for(lambda: _gone(job), 30), [p.pid for p in job]


def test_sigterm_stops_edct_run_and_its_lmms_eval_export_child(tmp_path):
    """``edct run --model`` starts lmms-eval's export in a child process at the run's start: a
    SIGTERM to the run ends that child too."""
    cmd = [sys.executable, "-m", "edct_task.cli.main", "run", "--model", "edct_reference"]
    cmd += ["--model_args", "behavior=faithful", "--tasks", "edct_calibration", "--limit", "30"]
    cmd += ["--no-progress", "--output", str(tmp_path / "run"), "--set", "roles.judge.latency_s=0.5"]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    export: list[psutil.Process] = []

    def started() -> bool:
        export.extend(p for p in _children(run.pid) if "edct_task.lmms.export" in " ".join(p.cmdline()))
        return bool(export) or run.poll() is not None

    assert wait_for(started, 120) and run.poll() is None, run.communicate()[0]
    assert wait_for(lambda: (tmp_path / "run" / "cache" / "stages.sqlite").exists(), 120)
    run.send_signal(signal.SIGTERM)
    out, _ = run.communicate(timeout=hang_limit(60))
    assert run.returncode == 143, out
    assert "Traceback" not in out
    assert wait_for(lambda: _gone(export), 30), [p.pid for p in export]
