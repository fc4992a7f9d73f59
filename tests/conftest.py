"""Suite-wide settings: nothing reaches a hub, nothing is read from the home folder, and every
xdist worker keeps to one core."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# A fresh machine's home: HOME and every cache folder the libraries default to under it (Hugging
# Face hub and datasets, lmms-eval, matplotlib, pip) start empty in every session, so what passes
# here passes on a new clone; set before anything imports those libraries, inherited by every
# subprocess a test starts, removed at exit.
_HOME = tempfile.mkdtemp(prefix="edct-test-home-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
for _name, _sub in {
    "HOME": "",
    "XDG_CACHE_HOME": ".cache",
    "XDG_CONFIG_HOME": ".config",
    "HF_HOME": ".cache/huggingface",
}.items():
    os.environ[_name] = os.path.join(_HOME, _sub) if _sub else _HOME
for _name in ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "EDCT_WORK_DIR"):
    os.environ.pop(_name, None)


# Property tests check properties, not speed: on a loaded machine (two xdist workers on two
# cores) input generation can be slow, which must not fail a test.
settings.register_profile("edct", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("edct")

for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # pytest -n 2 on 2 cores: one compute thread per worker (OpenMP pools that outgrow the
    # machine spin instead of working when two workers run torch at once)
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 170k-parameter random Qwen3-VL saved to disk, built offline from configs."""
    from support.lmms_helpers import BUILD_TINY, offline_env, run_cli

    out = tmp_path_factory.mktemp("tinyqwen") / "tiny-qwen3-vl"  # no 'A<n>B' in the path (MoE class)
    run_cli([sys.executable, str(BUILD_TINY), str(out)], offline_env(out.parent), timeout=300)
    return out
