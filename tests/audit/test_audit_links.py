"""The default places of the audit, annotation and agreement outputs, found again for reports."""

from __future__ import annotations

import shutil
from pathlib import Path

from edct_task.annotation.interventions import judgeable_interventions
from edct_task.annotation.labels import LabelChoice, LabelLog
from edct_task.audit.links import markdown_lines, validation_outputs
from edct_task.cli.main import main
from edct_task.run.outputs import load_run


def test_outputs_written_at_their_defaults_are_found_and_linked(run_dir: Path, tmp_path: Path, capsys):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("cache"))
    assert not validation_outputs(run).any and markdown_lines(validation_outputs(run)) == []

    assert main(["audit", str(run)]) == 0
    items = judgeable_interventions(load_run(run).records)[:3]
    log = LabelLog(run / "annotations" / "alice.jsonl", "alice")
    for item in items:
        log.append(LabelChoice(intervention=item.id, edit_valid="valid", ac=1, ef=1))
    log.append(LabelChoice(intervention=items[0].id, edit_valid="invalid"))  # a correction: still 3
    assert main(["agreement", str(run / "annotations" / "alice.jsonl"), "--run", str(run)]) == 0
    capsys.readouterr()

    found = validation_outputs(run)
    assert found.audit_index == run / "audit" / "index.html"
    assert found.labels == {str(run / "annotations" / "alice.jsonl"): 3}
    assert found.agreement == run / "agreement" / "agreement.md"
    lines = markdown_lines(found, relative_to=tmp_path)
    assert lines[0] == "- audit report: [audit/index.html](run/audit/index.html)"
    assert "annotations by alice: 3 intervention(s) labelled" in lines[1]
    assert f"`edct annotate {run} --annotator alice`" in lines[1]
    assert lines[2] == "- human validation (Table 4): [agreement.md](run/agreement/agreement.md)"
    assert markdown_lines(found)[0].endswith(f"({(run / 'audit' / 'index.html').as_uri()})")
