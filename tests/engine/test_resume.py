"""Durability: kill -9 in the middle of a run, resume, and nothing finished is paid for twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.backends import stand_in
from support.hang_guard import deadline, hang_limit

from edct_task import roles as roles_mod
from edct_task.calibration import RuleBasedLLM
from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run

pytestmark = pytest.mark.slow
N = 30


def _config_dict(tmp: Path, name: str) -> dict[str, Any]:
    base = calibration_config("mixed:0.5", n=N, output_dir=tmp / name).model_dump(mode="json")
    base.update(progress=False, call_log=str(tmp / f"{name}.calls.jsonl"), bootstrap_resamples=1000)
    base["limits"] = {"text_concurrency": 4, "editor_concurrency": 4, "target_batch_size": 8}
    base["roles"]["target"]["latency_s"] = 0.05
    base["roles"]["editor"]["latency_s"] = 0.05
    for role in ("extractor", "judge", "edit_parser"):
        base["roles"][role]["latency_s"] = 0.02
    return base


def _keys(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()]


def _metrics(out: Path) -> dict[str, Any]:
    return json.loads((out / "results.json").read_text())["results"]


def _cli(config: Path) -> list[str]:
    return [sys.executable, "-m", "edct_task.cli.main", "run", "--config", str(config)]


def test_sigkill_mid_run_then_resume_repeats_no_finished_call(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # reference: one uninterrupted run with its own cache
    reference = _config_dict(tmp_path, "reference")
    ref_path = tmp_path / "reference.yaml"
    ref_path.write_text(yaml.safe_dump(reference))
    subprocess.run(_cli(ref_path), check=True, env=env, capture_output=True, timeout=hang_limit(600))
    total_calls = len(_keys(tmp_path / "reference.calls.jsonl"))

    killed = _config_dict(tmp_path, "killed")
    cfg_path = tmp_path / "killed.yaml"
    cfg_path.write_text(yaml.safe_dump(killed))
    log = tmp_path / "killed.calls.jsonl"
    proc = subprocess.Popen(_cli(cfg_path), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    end = deadline(300)
    while len(_keys(log)) < total_calls // 2 and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = _keys(log)
    assert total_calls // 2 <= len(first) < total_calls
    assert not (tmp_path / "killed" / "results.json").exists()

    subprocess.run(_cli(cfg_path), check=True, env=env, capture_output=True, timeout=hang_limit(600))
    second = _keys(log)[len(first) :]
    repeated = set(first) & set(second)
    assert len(repeated) == 0, f"{len(repeated)} finished calls were repeated after resume"
    # every call made at most once overall (a kill between a commit and its log line hides one)
    assert total_calls - 2 <= len(first) + len(second) <= total_calls
    assert _metrics(tmp_path / "killed") == _metrics(tmp_path / "reference")
    ref_lines = (tmp_path / "reference" / "samples.jsonl").read_text()
    assert (tmp_path / "killed" / "samples.jsonl").read_text() == ref_lines


class _OtherJudge(RuleBasedLLM):
    """The same rules under another identity: stands in for swapping the judge model."""

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "model": "another-judge"}


def test_changing_only_the_judge_reruns_only_judge_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        roles_mod.REGISTRY["text"],
        "other-judge",
        stand_in("text", "other-judge", lambda options: _OtherJudge()),
    )
    base = calibration_config("faithful", n=20, output_dir=tmp_path / "a").model_dump(mode="json")
    base.update(progress=False, cache_dir=str(tmp_path / "cache"), bootstrap_resamples=1000)
    first = run(config_from_dict(base))
    assert first.results["calls"]["calls"]["judge"] > 0
    base["roles"]["judge"] = {"backend": "other-judge"}
    base["output_dir"] = str(tmp_path / "b")
    second = run(config_from_dict(base))
    calls = second.results["calls"]["calls"]
    assert set(calls) == {"judge"}
    # identical judge prompts may be answered from the cache within a run; requests match
    requests = [
        r.results["calls"]["calls"]["judge"] + r.results["calls"]["cache_hits"].get("judge", 0)
        for r in (first, second)
    ]
    assert requests[0] == requests[1] > 0
    assert second.results["results"]["overall"] == first.results["results"]["overall"]
