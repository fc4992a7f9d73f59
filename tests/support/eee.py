"""The ``every-eval-ever`` package's validator, run in the environment that has it.

every-eval-ever 0.3.0 needs Python >= 3.12 and older huggingface_hub/rich than the main
environment, so it lives in its own (``make eee-env``: ``.venv-eee``). Its Python is
``EDCT_EEE_PYTHON`` (``make test`` sets it; a set path that does not exist fails the test), else
``.venv-eee/bin/python`` of this checkout; without either the tests that need it are skipped with
the command that makes it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.hang_guard import hang_limit

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("eee_validate.py")


def validator_python() -> Path:
    """The Python of the environment with every-eval-ever; skips the test when there is none."""
    named = os.environ.get("EDCT_EEE_PYTHON")
    if named:
        assert Path(named).is_file(), f"EDCT_EEE_PYTHON={named} does not exist (make eee-env)"
        return Path(named)
    local = ROOT / ".venv-eee" / "bin" / "python"
    if not local.is_file():
        pytest.skip("the every-eval-ever validator is not installed: make eee-env")
    return local


def validate(*files: Path) -> list[dict[str, Any]]:
    """One report per file: the package's validator (``valid``, ``errors``, ``warnings``) and JSON
    Schema against its shipped ``eval.schema.json`` (``schema_errors``)."""
    done = subprocess.run(
        [str(validator_python()), str(SCRIPT), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=hang_limit(300),
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def assert_valid(*files: Path) -> None:
    """Every file valid with no error, no warning and no schema error."""
    assert files, "no record to validate"
    for report in validate(*files):
        assert report["valid"], report
        assert report["errors"] == [] and report["warnings"] == [] and report["schema_errors"] == [], report
        assert report["schema_version"] == "0.3.0"
