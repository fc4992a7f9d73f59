"""Fixtures of the annotation tests: one small calibration run and a browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.audit_runs import calibration_run
from support.browser import browser_fixture

from edct_task.run.outputs import LoadedRun, load_run


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return calibration_run(tmp_path_factory.mktemp("annotation") / "run")


@pytest.fixture(scope="session")
def loaded(run_dir: Path) -> LoadedRun:
    return load_run(run_dir)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    # one Playwright at a time per process: a module's browser closes before the next one starts
    yield from browser_fixture()
