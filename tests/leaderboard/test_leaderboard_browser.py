"""The leaderboard page in headless Chromium: each metric with its CI on one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.browser import browser_fixture, watched_page
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main

pytestmark = pytest.mark.slow  # a real browser (Chromium): make test, not make test-fast


@pytest.fixture(scope="module")
def browser():
    yield from browser_fixture()


def test_ci_cells_stay_on_one_line(browser, tmp_path: Path) -> None:
    names = {"org/alpha-vl": 0.9, "org/beta-vl-with-a-rather-long-model-name-7b-instruct": 0.5}
    for i, (model, level) in enumerate(names.items()):
        write_edct_run(
            tmp_path / f"r{i}", records(level, n=12), target={"backend": "openai-chat", "model": model}
        )
        assert main(["submit", str(tmp_path / f"r{i}"), "--output", str(tmp_path / f"b{i}.edct.zip")]) == 0
    bundles = [str(tmp_path / f"b{i}.edct.zip") for i in range(2)]
    assert main(["leaderboard", *bundles, "--output", str(tmp_path / "board")]) == 0
    for page in watched_page(browser, 1280, 800):
        page.goto((tmp_path / "board" / "leaderboard.html").as_uri())
        cells = page.locator("table:not(.pairwise) tbody tr td.ci")  # the six metric columns
        assert cells.count() == 12  # 2 entries × 6 metrics
        assert all("[" in t for t in cells.all_text_contents())  # estimate [low, high]
        lines = cells.evaluate_all(
            "tds => tds.map(td => { const r = document.createRange(); r.selectNodeContents(td);"
            " return new Set(Array.from(r.getClientRects()).map(b => Math.round(b.top))).size; })"
        )
        assert lines == [1] * 12
        pair = page.locator("table.pairwise tbody tr td.ci")  # the one pair's difference [CI]
        assert pair.count() == 1 and "[" in pair.all_text_contents()[0]
        assert pair.evaluate_all(
            "tds => tds.map(td => { const r = document.createRange(); r.selectNodeContents(td);"
            " return new Set(Array.from(r.getClientRects()).map(b => Math.round(b.top))).size; })"
        ) == [1]
        assert not page.errors
