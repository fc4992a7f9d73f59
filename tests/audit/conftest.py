"""Fixtures of the audit-report tests: one small calibration run, its report, a browser."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.audit_runs import calibration_run, make_hostile
from support.browser import browser_fixture

from edct_task.audit.report import write_audit
from edct_task.run.outputs import LoadedRun, load_run


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return calibration_run(tmp_path_factory.mktemp("audit") / "run")


@pytest.fixture(scope="session")
def loaded(run_dir: Path) -> LoadedRun:
    return load_run(run_dir)


@pytest.fixture(scope="session")
def report_dir(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "report"
    write_audit(load_run(run_dir), out, source=str(run_dir))
    return out


@pytest.fixture(scope="session")
def hostile_report(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LoadedRun]:
    """The report of a copy of the run whose first sample's every text is hostile markup."""
    base = tmp_path_factory.mktemp("hostile")
    copy = base / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("cache"))
    make_hostile(copy)
    run = load_run(copy)
    write_audit(run, base / "report", source=str(copy))
    return base / "report", run


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    # one Playwright at a time per process: a module's browser closes before the next one starts
    yield from browser_fixture()
