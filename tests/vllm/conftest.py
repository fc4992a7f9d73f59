"""The real vLLM server for tests/vllm/: ONE per test session, started through ``edct serve``.

The server runs from the vLLM environment (``make vllm-env`` → ``.venv-vllm``, or
``$EDCT_VLLM_PYTHON``) while pytest runs in the main one. It serves a tiny random Qwen3-VL
(``head_dim=64``: vLLM's CPU attention has no kernels for 16) built offline for the session.
Without the vLLM environment these tests skip, except under ``CI=true``, where they fail.
At teardown ``edct serve`` gets SIGTERM, and every process the server had must be gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.hang_guard import hang_limit
from support.vllm_server import BUILD_TINY, CI, Served, start_edct_serve, vllm_python


@pytest.fixture(scope="session")
def vllm_env() -> Path:
    """The vLLM environment's interpreter; skip without it locally, fail under CI."""
    python = vllm_python()
    if python is None or not python.is_file():
        why = (
            "the vLLM environment is missing: run `make vllm-env` (builds .venv-vllm) "
            "or set EDCT_VLLM_PYTHON to a Python that has vLLM"
        )
        if CI:
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    return python


@pytest.fixture(scope="session")
def tiny_vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen3-VL with head_dim=64 (name contains 'qwen3-vl': the target recipe's
    Qwen-VL pixel cap applies to it)."""
    out = tmp_path_factory.mktemp("vllm-model") / "tiny-qwen3-vl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, str(BUILD_TINY), str(out), "--head-dim", "64"],
        env=env,
        check=True,
        capture_output=True,
        timeout=hang_limit(300),
    )
    return out


@pytest.fixture(scope="session")
def vllm_server(vllm_env: Path, tiny_vl_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """ONE real vLLM server for the session, started with ``edct serve target``."""
    log = tmp_path_factory.mktemp("vllm-log") / "vllm-target.log"
    served = start_edct_serve(vllm_env, tiny_vl_dir, log)
    yield served
    left = served.stop()
    assert served.serve.returncode == 0, f"edct serve exited {served.serve.returncode}"
    assert not left, f"processes of the vLLM server outlived edct serve: {left}"
    print(f"\nvLLM server stopped by SIGTERM to edct serve; {len(served.processes)} processes, none left")


@pytest.fixture(scope="session")
def vllm_env_has_lmms(vllm_env: Path) -> Path:
    """The vLLM environment with lmms-eval and edct-bench in it (``make vllm-env`` installs both)."""
    probe = "import lmms_eval, edct_task"
    done = subprocess.run(
        [str(vllm_env), "-c", probe], capture_output=True, text=True, timeout=hang_limit(300)
    )
    if done.returncode != 0:
        why = f"{vllm_env} lacks lmms-eval/edct-bench (rebuild it with `make vllm-env`): {done.stderr[-300:]}"
        if CI:
            pytest.fail(why)
        pytest.skip(why)
    return vllm_env
