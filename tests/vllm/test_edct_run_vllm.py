"""``edct run`` against the real vLLM server: an ``openai-chat`` target, and
lmms-eval's ``openai`` model through ``edct run --model openai`` and through ``lmms-eval`` itself.

The tiny model is random, so its answers are random text: the calibration roles (rule-based
extractor and judge) find no concepts in them, and every sample must end *recorded* with its
reason — nothing hangs, nothing is lost, nothing is silently scored.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.hang_guard import hang_limit
from support.vllm_server import (
    LMMS_LIMIT,
    NEW_TOKENS,
    check_lmms_output,
    finished_requests,
    lmms_env,
    sample_record,
)

from edct_task.config import calibration_config, config_from_dict
from edct_task.core.records import SampleRecord
from edct_task.run.runner import run

pytestmark = pytest.mark.vllm
N = 12


def _target(server) -> dict:
    timeout_s = hang_limit(120)  # a hang guard: a timed-out request would be retried, and counted
    return {"backend": "openai-chat", "model": server.model, "base_url": server.url, "timeout_s": timeout_s}


def test_edct_run_with_an_openai_chat_target(vllm_server, tmp_path: Path) -> None:
    raw = calibration_config("faithful", n=N, output_dir=tmp_path / "run").model_dump(mode="json")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 200
    raw["protocol"]["max_new_tokens"] = NEW_TOKENS
    raw["protocol"]["graded_max_new_tokens"] = NEW_TOKENS
    raw["limits"]["target_concurrency"] = 2
    raw["roles"]["target"] = _target(vllm_server)
    outcome = run(config_from_dict(raw))

    records = outcome.records
    assert len(records) == N
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert [SampleRecord.model_validate_json(line).sample.id for line in lines] == [
        r.sample.id for r in records
    ]
    for r in records:
        assert r.baseline is not None and r.baseline.answer.strip() and r.baseline.explanation.strip()
        assert r.status in ("excluded", "unscored", "scored", "error")
        if r.status != "scored":
            assert r.reason, f"{r.sample.id} ended {r.status} without a reason"
    counts = outcome.results["results"]["overall"]["counts"]
    assert counts["total"] == N
    assert counts["scored"] + counts["excluded"] + counts["unscored"] + counts["error"] == N
    usage = outcome.results["usage"]["roles"]["target"]
    assert usage["requests"] >= 2 * N and usage["images"] >= N  # answer + why for every baseline
    assert usage["completion_tokens"] == NEW_TOKENS * usage["requests"]
    # no target call failed; the calibration editor cannot apply instructions made from random text
    assert "target" not in outcome.results["calls"]["failures"]
    reasons = {r.reason for r in records}
    print(
        f"\nedct run on vLLM: {counts}; reasons: {sorted(reasons)[:3]}; {outcome.results['wall_seconds']} s"
    )


def test_lmms_eval_openai_model_through_edct_run(vllm_server, tmp_path: Path) -> None:
    before = finished_requests(vllm_server)
    cmd = [sys.executable, "-m", "edct_task.cli.main", "run", "--model", "openai"]
    cmd += ["--model_args", f"model_version={vllm_server.model},base_url={vllm_server.url}"]
    cmd += ["--tasks", "edct_calibration", "--limit", str(LMMS_LIMIT), "--no-progress", "--log_samples"]
    cmd += ["--fail-on-unscored", "1.0"]  # random weights score nothing: accepted here, else exit code 3
    cmd += [
        "--set",
        f"protocol.max_new_tokens={NEW_TOKENS}",
        "--set",
        f"protocol.graded_max_new_tokens={NEW_TOKENS}",
    ]
    cmd += ["--output", str(tmp_path / "run"), "--output_path", str(tmp_path / "lmms")]
    env = lmms_env(tmp_path)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=hang_limit(900))
    assert done.returncode == 0, done.stderr[-3000:]
    samples = check_lmms_output(tmp_path / "lmms", LMMS_LIMIT)
    asked = sum(2 * (1 + sum(1 for st in sample_record(s)["steps"] if st.get("requery"))) for s in samples)
    assert finished_requests(vllm_server) - before == asked  # answer + why, per baseline and re-query


def test_lmms_eval_cli_with_its_openai_model(vllm_server, tmp_path: Path) -> None:
    before = finished_requests(vllm_server)
    cmd = [str(Path(sys.executable).parent / "lmms-eval"), "--model", "openai"]
    cmd += ["--model_args", f"model_version={vllm_server.model},base_url={vllm_server.url}"]
    cmd += ["--tasks", "edct_calibration", "--limit", str(LMMS_LIMIT), "--log_samples"]
    cmd += ["--gen_kwargs", f"max_new_tokens={NEW_TOKENS}", "--output_path", str(tmp_path / "lmms")]
    env = lmms_env(tmp_path)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=hang_limit(900))
    assert done.returncode == 0, done.stderr[-3000:]
    samples = check_lmms_output(tmp_path / "lmms", LMMS_LIMIT)
    asked = sum(2 * (1 + sum(1 for st in sample_record(s)["steps"] if st.get("requery"))) for s in samples)
    assert finished_requests(vllm_server) - before == asked
