"""Fixtures for the lmms-eval plugin tests: a tiny random Qwen3-VL built offline."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lmms_helpers import BUILD_TINY, offline_env, run_cli


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 170k-parameter random Qwen3-VL saved to disk (built offline from configs)."""
    out = tmp_path_factory.mktemp("tinyqwen") / "tiny-qwen3-vl"  # no 'A<n>B' in the path (MoE class)
    env = offline_env(out.parent)
    run_cli([sys.executable, str(BUILD_TINY), str(out)], env, timeout=300)
    return out
