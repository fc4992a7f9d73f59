"""``edct report`` and ``edct submit`` on what the real ``lmms-eval`` CLI wrote (a subprocess)."""

from __future__ import annotations

import json

import pytest
from support.lmms_helpers import lmms_eval_cmd, offline_env, run_cli

from edct_task.cli.main import main
from edct_task.leaderboard.verify import Verified, verify_bundle

pytestmark = pytest.mark.slow

LIMIT = 8


def test_report_and_bundle_of_a_real_lmms_eval_run(tmp_path):
    out = tmp_path / "out"
    run_cli(
        lmms_eval_cmd(
            "--model",
            "edct_reference",
            "--model_args",
            "behavior=mixed:0.5",
            "--tasks",
            "edct_calibration",
            "--limit",
            str(LIMIT),
            "--output_path",
            str(out),
            "--log_samples",
        ),
        offline_env(tmp_path / "work"),
        timeout=600,
    )
    (results_file,) = out.glob("*_results.json")  # no pretrained=: no model folder
    raw = json.loads(results_file.read_text())["results"]["edct_calibration"]
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (model,) = report["models"]
    assert model["name"] == "edct_reference(behavior=mixed:0.5)"
    assert model["runs"][0]["flags"] == []  # the logged records reproduce lmms-eval's own values
    for metric in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1"):
        assert model["edct"][metric]["estimate"] == pytest.approx(raw[f"{metric},none"], abs=1e-12)
        assert (
            model["edct"][metric]["low"] <= model["edct"][metric]["estimate"] <= model["edct"][metric]["high"]
        )
    assert model["counts"]["total"] == LIMIT
    assert report["setups"][0]["setup"]["roles"]["judge"] == {"backend": "calibration-rules"}
    bundle = tmp_path / "mixed.edct.zip"
    assert main(["submit", str(out), "--out", str(bundle)]) == 0
    assert isinstance(verify_bundle(bundle), Verified)
