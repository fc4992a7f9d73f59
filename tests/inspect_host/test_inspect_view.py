"""``inspect view`` on an EDCT sample, in Debian's chromium: each turn with its image (the original
and every edited one), and on the Scoring tab the judges' verdicts with their reasons.

The screenshot of the Scoring tab is written to the test's folder, and to ``$EDCT_SCREENSHOT_DIR``
when set (docs/img/inspect-view.png was taken so)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import browser_fixture, watched_page
from support.hang_guard import hang_limit, wait_for
from support.inspect_extra import require_inspect
from support.vllm_server import free_port

require_inspect()

from edct_task.run.outputs import load_run  # noqa: E402

pytestmark = pytest.mark.slow  # Inspect and its viewer in subprocesses, a browser: > 30 s

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two calibration samples of the ``prior`` reference model: (log folder, EDCT run folder)."""
    tmp = tmp_path_factory.mktemp("inspect-view")
    cmd = [
        sys.executable, "-m", "inspect_ai", "eval", "edct/edct_calibration", "--model", "edct/prior",
        "--limit", "2", "--log-dir", str(tmp / "logs"), "-T", f"output_dir={tmp / 'run'}",
        "-T", f"work_dir={tmp / 'work'}", "--display", "plain",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp, env=ENV, capture_output=True, text=True, timeout=hang_limit(300))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "logs", tmp / "run"


@pytest.fixture(scope="module")
def viewer(logged: tuple[Path, Path]) -> Iterator[str]:
    """``inspect view`` serving the log folder on a free loopback port; its URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "inspect_ai", "view", "start", "--log-dir", str(logged[0])]
    proc = subprocess.Popen([*cmd, "--host", "127.0.0.1", "--port", str(port)], env=ENV)
    url = f"http://127.0.0.1:{port}/"

    def up() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return True
        except OSError:
            return False

    try:
        assert wait_for(up, 120), "inspect view did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=hang_limit(30))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    yield from browser_fixture()


def test_the_viewer_shows_each_turn_the_edited_images_and_the_verdicts(
    logged: tuple[Path, Path], viewer: str, browser: object, tmp_path: Path
) -> None:
    record = next(r for r in load_run(logged[1]).records if r.steps)
    (log,) = logged[0].glob("*.eval")
    for page in watched_page(browser, 1400, 1400):
        page.goto(f"{viewer}#/logs/{log.name}/samples/sample/{record.sample.id}/1/")
        page.get_by_text("Why did you give that answer").first.wait_for()
        requeried = [s for s in record.steps if s.requery is not None]
        # the transcript: every model call with its image, the original and each edited one
        images = page.locator('img[src^="data:image/png"]')
        assert wait_for(lambda: images.count() >= 1 + len(requeried), 30)  # noqa: B023
        for s in requeried:
            page.get_by_text(s.requery.explanation.splitlines()[0]).first.wait_for()
        page.get_by_role("tab", name="Scoring").first.click()
        for s in record.steps:
            if s.binary is not None:
                page.get_by_text(f"AC: {s.binary.ac_reason}").first.wait_for()
                page.get_by_text(f"EF: {s.binary.ef_reason}").first.wait_for()
        page.get_by_text(
            f"Judge AC={record.steps[0].binary.ac}, EF={record.steps[0].binary.ef}"
        ).first.wait_for()
        shot = tmp_path / "inspect-view.png"
        page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        assert page.errors == []
        if os.environ.get("EDCT_SCREENSHOT_DIR"):
            shutil.copy(shot, Path(os.environ["EDCT_SCREENSHOT_DIR"]) / shot.name)
