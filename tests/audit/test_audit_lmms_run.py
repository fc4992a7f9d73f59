"""An lmms-eval output folder (``edct run --model … --log_samples``) audits as the EDCT run folder
its logs name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.lmms_helpers import edct_cmd, offline_env, run_cli

from edct_task.audit.report import write_audit
from edct_task.run.outputs import load_run

pytestmark = pytest.mark.slow


def test_lmms_eval_output_with_logged_samples_gets_a_full_report(tmp_path: Path):
    args = ("--model", "edct_reference", "--model_args", "behavior=mixed:0.5", "--tasks", "edct_calibration")
    run_cli(
        edct_cmd(
            "run",
            *args,
            "--limit",
            "6",
            "--output",
            str(tmp_path / "edct"),
            "--output_path",
            str(tmp_path / "lmms"),
            "--log_samples",
            "--no-progress",
        ),
        offline_env(tmp_path / "work"),
    )
    loaded = load_run(tmp_path / "lmms")
    assert loaded.path.resolve() == (tmp_path / "edct").resolve() and len(loaded.records) == 6
    summary = write_audit(loaded, tmp_path / "report")
    assert summary.samples == 6 and summary.missing_images == 0
    html = (tmp_path / "report" / "samples" / "0001.html").read_text(encoding="utf-8")
    (payload,) = re.findall(r'<script type="application/json" id="edct-data">(.*?)</script>', html, re.S)
    sample = json.loads(payload)["sample"]
    attempt = sample["steps"][0]["attempts"][0]
    assert sample["original"] is not None and attempt["image"] is not None
    assert attempt["check"]["r_in"] == loaded.records[0].steps[0].attempts[0].check.r_in
    assert attempt["figures"] is not None  # the gate's maps are found in the run's image store
    # the index names the model and gives the overall CCS of the run folder's own results.json
    index = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    (payload,) = re.findall(r'<script type="application/json" id="edct-data">(.*?)</script>', index, re.S)
    run = json.loads(payload)["run"]
    assert run["model"] == "edct_reference"
    assert loaded.log is not None
    expected = loaded.log.results.overall.metrics["ccs_binary"]
    assert run["metrics"]["ccs_binary"]["estimate"] == pytest.approx(expected.estimate)
    assert run["metrics"]["ccs_binary"]["low"] == pytest.approx(expected.low)
