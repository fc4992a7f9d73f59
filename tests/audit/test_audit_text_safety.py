"""Issue 19, rows 22 and 23: bidi and control characters are shown, never obeyed, in every output;
a malformed link fragment does not break the audit index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.browser import watched_page
from support.edct_runs import records, write_edct_run

from edct_task.audit.report import write_audit
from edct_task.cli.main import main
from edct_task.run.outputs import load_run

SPOOF = "invoice\u202egnp.exe"
"""Displays as 'invoiceexe.png' where the override is obeyed."""
NAME = SPOOF + "\n| evil | row |"


def _spoofed_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_edct_run(run, records(0.5, n=4), target={"backend": "openai-chat", "model": NAME})
    return run


def test_audit_pages_show_controls_instead_of_obeying_them(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("cache"))
    lines = (copy / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["baseline"]["answer"] = SPOOF
    lines[0] = json.dumps(record)
    (copy / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_audit(load_run(copy), tmp_path / "report")
    pages = [p.read_text(encoding="utf-8") for p in (tmp_path / "report").rglob("*.html")]
    assert any("invoice[U+202E]gnp.exe" in p for p in pages)
    assert not any("\u202e" in p for p in pages)
    css = (tmp_path / "report" / "assets" / "audit.css").read_text()
    assert "unicode-bidi: isolate" in css


def test_leaderboard_isolates_and_shows_controls(tmp_path: Path) -> None:
    run = _spoofed_run(tmp_path)
    assert main(["submit", str(run), "--out", str(tmp_path / "b.edct.zip")]) == 0
    assert main(["leaderboard", str(tmp_path / "b.edct.zip"), "--out", str(tmp_path / "board")]) == 0
    html = (tmp_path / "board" / "leaderboard.html").read_text(encoding="utf-8")
    assert "<bdi>invoice[U+202E]gnp.exe" in html and "\u202e" not in html
    md = (tmp_path / "board" / "leaderboard.md").read_text(encoding="utf-8")
    rows = [line for line in md.splitlines() if "invoice" in line and line.startswith("|")]
    assert len(rows) == 1 and "\u202e" not in md and r"\| evil \| row \|" in rows[0]
    header = next(line for line in md.splitlines() if line.startswith("| Rank"))
    assert rows[0].count(" | ") == header.count(" | ")  # the name did not add a cell
    csv_text = (tmp_path / "board" / "leaderboard.csv").read_text(encoding="utf-8")
    assert "\u202e" not in csv_text and "invoice[U+202E]gnp.exe" in csv_text


def test_report_tables_show_controls_and_keep_their_rows(tmp_path: Path) -> None:
    run = _spoofed_run(tmp_path)
    assert main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    for path in (tmp_path / "r").glob("*.*"):
        if path.suffix in (".md", ".csv", ".tex"):
            text = path.read_text(encoding="utf-8")
            assert "\u202e" not in text, path.name
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    for line in md.splitlines():
        if "invoice" in line and line.startswith("|"):
            assert line.endswith("|") and "\\| evil \\| row \\|" in line
    assert "[U+202E]" in (tmp_path / "r" / "table1.tex").read_text(encoding="utf-8")


@pytest.fixture
def page(browser):
    yield from watched_page(browser, 1280, 900)


def test_a_malformed_fragment_leaves_the_index_working(page, report_dir: Path) -> None:
    page.goto((report_dir / "index.html").as_uri() + "#q=%E0%A4%A&status=scored")
    page.wait_for_selector("#filter-text")
    assert page.errors == []
    assert page.input_value("#filter-text") == "%E0%A4%A"  # the malformed part, as typed
    page.fill("#filter-text", "")
    page.wait_for_selector("#samples tbody tr")
    assert int(page.text_content("#shown")) >= 1
