"""``edct report`` links a run's audit report and human-validation files when they exist."""

from __future__ import annotations

import json
from pathlib import Path

from edct_task.cli.main import main


def test_report_links_the_audit_report_and_label_files(tmp_path: Path) -> None:
    assert main(["demo", "-n", "4", "--no-progress", "--output", str(tmp_path / "demo")]) == 0
    run_dir = tmp_path / "demo" / "faithful"
    report_dir = tmp_path / "report"
    assert main(["report", str(run_dir), "--out", str(report_dir)]) == 0
    assert json.loads((report_dir / "report.json").read_text())["validation"] == []

    assert main(["audit", str(run_dir)]) == 0
    labels = run_dir / "annotations" / "ann1.jsonl"
    labels.parent.mkdir()
    sid = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[0])["sample"]["id"]
    labels.write_text(
        json.dumps(
            {
                "intervention": f"{sid}#1",
                "annotator": "ann1",
                "edit_valid": "valid",
                "ac": 1,
                "ef": 1,
                "time": "2026-12-01T09:00:00+00:00",
            }
        )
        + "\n"
    )
    assert main(["report", str(run_dir), "--out", str(report_dir)]) == 0
    (entry,) = json.loads((report_dir / "report.json").read_text())["validation"]
    assert entry["audit_index"] == str(run_dir / "audit" / "index.html")
    assert entry["labels"] == {str(labels): 1}
    md = (report_dir / "report.md").read_text()
    assert "### Audit reports and human validation" in md
    assert "(../demo/faithful/audit/index.html)" in md and "annotations by ann1: 1 intervention(s)" in md
