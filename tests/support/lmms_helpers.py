"""Helpers for the lmms-eval plugin tests: offline environment, subprocess runners, result readers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.hang_guard import hang_limit

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
BUILD_TINY = REPO / "tests" / "support" / "tiny_qwen3_vl.py"


def offline_env(work_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "EDCT_WORK_DIR": str(work_dir),
            "HF_DATASETS_CACHE": str(work_dir / "hf_datasets"),
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    env.pop("EDCT_CONFIG", None)
    env.update(extra)
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``args`` to success; ``timeout`` is a hang guard's nominal seconds (``hang_limit``)."""
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=hang_limit(timeout))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def lmms_eval_cmd(*args: str) -> list[str]:
    return [str(VENV_BIN / "lmms-eval"), *args]


def edct_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "edct_task.cli.main", *args]


def read_results(output_path: Path) -> dict:
    files = sorted(output_path.rglob("*_results.json"))
    assert files, f"no results JSON under {output_path}: lmms-eval exits 0 even when a run fails"
    return json.loads(files[-1].read_text())


def read_samples(output_path: Path, task: str) -> list[dict]:
    files = sorted(output_path.rglob(f"*_samples_{task}.jsonl"))
    assert files, f"no sample log for {task} under {output_path}"
    return [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]
