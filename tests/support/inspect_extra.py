"""The Inspect tests (tests/inspect_host, tests/vllm's Inspect runtime) need the ``inspect`` extra
(the test extra has it): without it they skip on a developer's machine and fail in CI (``CI``
set), where they must run."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_inspect() -> None:
    if importlib.util.find_spec("inspect_ai") is None:
        message = "inspect_ai is not installed: pip install -e '.[test]' (or the inspect extra)"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run the Inspect tests)", pytrace=False)
        pytest.skip(message, allow_module_level=True)
