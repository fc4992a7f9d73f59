"""Known-answer controls in ``edct report`` and the audit pages (issue 44): an unreliable run is
announced first, with its reasons, and every run's controls are tabled; a run made before
controls says "controls: not run" and is not marked unreliable."""

from __future__ import annotations

import json
from pathlib import Path

from support.edct_runs import control_records, records, write_edct_run

from edct_task.audit.report import write_audit
from edct_task.reporting.report import build_report
from edct_task.run.outputs import load_run

EVIL = '<script>alert("x")</script>&'


def test_report_opens_with_the_unreliable_notice_and_tables_the_controls(tmp_path: Path) -> None:
    bad, good, old = tmp_path / "bad", tmp_path / "good", tmp_path / "old"
    write_edct_run(
        bad,
        records(0.9, n=8),
        target={"backend": "openai-chat", "model": "org/bad"},
        controls=control_records(4),
    )
    write_edct_run(
        good,
        records(0.5, n=8),
        target={"backend": "openai-chat", "model": "org/good"},
        controls=control_records(16),
    )
    write_edct_run(old, records(0.5, n=8), target={"backend": "openai-chat", "model": "org/old"})
    report = build_report([bad, good, old], tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    head = md.split("\n\n", 2)[1]  # the block after the title
    assert head.startswith("> **UNRELIABLE RUN**")
    assert str(bad) in head and "binary judge: 4/16 known-answer controls right" in head
    assert str(good) not in head and str(old) not in head
    assert report["unreliable"] == [
        {"model": "org/bad", "source": str(bad), "reasons": report["unreliable"][0]["reasons"]}
    ]
    assert "controls" in report["tables"]
    table = (tmp_path / "report" / "controls.md").read_text()
    assert "binary judge" in table and "[0." in table and "BELOW THE BAR" in table
    assert "controls: not run" in table
    runs = {r["source"]: r for m in report["models"] for r in m["runs"]}
    assert runs[str(old)]["controls_status"] == "not run" and runs[str(old)]["unreliable"] == []
    assert runs[str(good)]["controls_status"] == "passed"
    assert runs[str(bad)]["controls_status"] == "below the bar"


def test_reliable_runs_have_no_notice(tmp_path: Path) -> None:
    good = tmp_path / "good"
    write_edct_run(good, records(0.5, n=8), controls=control_records(16))
    build_report([good], tmp_path / "report")
    assert "UNRELIABLE" not in (tmp_path / "report" / "report.md").read_text()


def test_audit_index_shows_the_banner_escaped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_edct_run(run, records(0.5, n=4), controls=control_records(4))
    results = json.loads((run / "results.json").read_text())
    results["controls"]["unreliable"].append(EVIL)
    (run / "results.json").write_text(json.dumps(results))
    write_audit(load_run(run), tmp_path / "audit", source=str(run))
    index = (tmp_path / "audit" / "index.html").read_text()
    body = index.split("</noscript>", 1)[1].split('<main id="app">', 1)[0]
    assert "UNRELIABLE RUN" in body and "binary judge: 4/16" in body
    assert "<script>alert" not in index and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in body
    assert "<td>binary judge</td><td>judge</td><td>16</td><td>4</td>" in body


def test_audit_of_a_reliable_or_older_run_has_no_banner(tmp_path: Path) -> None:
    for name, controls in (("good", control_records(16)), ("old", None)):
        write_edct_run(tmp_path / name, records(0.5, n=4), controls=controls)
        write_audit(load_run(tmp_path / name), tmp_path / f"audit-{name}")
        assert "UNRELIABLE" not in (tmp_path / f"audit-{name}" / "index.html").read_text()
