"""Fixtures for the EDCT-Bench data tests; the tiny Qwen3-VL comes from the lmms-eval tests' helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lmms"))

from lmms_helpers import BUILD_TINY, offline_env, run_cli


@pytest.fixture(scope="session")
def tiny_qwen3_vl_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 170k-parameter random Qwen3-VL saved to disk, built offline (as in tests/lmms)."""
    out = tmp_path_factory.mktemp("tinyqwen") / "tiny-qwen3-vl"  # no 'A<n>B' in the path (MoE class)
    run_cli([sys.executable, str(BUILD_TINY), str(out)], offline_env(out.parent), timeout=300)
    return out
