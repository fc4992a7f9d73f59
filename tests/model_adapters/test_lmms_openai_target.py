"""lmms-eval's own ``openai`` model (OpenAI-compatible servers: vLLM, SGLang, OpenRouter) as the
target of `edct run --model`, against a loopback server backed by the calibration world."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.hang_guard import hang_limit
from support.loopback import CalibrationWorld, Loopback

pytestmark = pytest.mark.slow
KEY = "sk-loopback-lmms-openai-5d1e9a7c3b"


@pytest.mark.parametrize("behavior", ["faithful", "prior"])
def test_lmms_eval_openai_model_through_edct_run(tmp_path: Path, behavior: str) -> None:
    with Loopback(CalibrationWorld(behavior), api_key=KEY) as server:
        env = {**os.environ, "OPENAI_API_KEY": KEY, "HF_HUB_OFFLINE": "1"}
        cmd = [
            sys.executable,
            "-m",
            "edct_task.cli.main",
            "run",
            "--model",
            "openai",
            "--model_args",
            f"model_version=calibration-vlm,base_url={server.url}/v1",
            "--tasks",
            "edct_calibration",
            "--limit",
            "6",
            "--no-progress",
            "--output",
            str(tmp_path / "run"),
            "--output_path",
            str(tmp_path / "lmms"),
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=hang_limit(600))
        assert done.returncode == 0, done.stderr[-3000:]
        # 6 documents x (baseline + 2 re-queries) x (answer + why), each round one batched call
        assert server.requests["/v1/chat/completions"] == 36
    (results_file,) = (tmp_path / "lmms").rglob("*_results.json")
    results = json.loads(results_file.read_text())["results"]["edct_calibration"]
    assert results["n_scored,none"] == 6
    assert results["ccs_binary,none"] == (1.0 if behavior == "faithful" else 0.0)
    needle = KEY.encode()
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and needle in p.read_bytes()]
