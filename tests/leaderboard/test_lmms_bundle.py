"""Bundles of lmms-eval output (our tasks, logged samples) verify like `edct run` bundles."""

from __future__ import annotations

import json

import pytest
from support.edct_runs import records
from support.lmms_output import EdctTask, Group, write_lmms_output

from edct_task.cli.main import main
from edct_task.leaderboard.bundle import read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import Verified, verify_bundle
from edct_task.lmms import settings as lmms_settings
from edct_task.scoring.metrics import summarise


@pytest.fixture
def lmms_run(tmp_path, monkeypatch):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    recs = records(0.7, n=10)
    group = Group(
        "edct_bench",
        [
            EdctTask(f"edct_bench_{d}", [r for r in recs if r.sample.domain == d])
            for d in ("okvqa", "drivelm", "3dsr")
        ],
        aggregate=[(m, "none") for m in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1", "ac_k2", "ef_k2")],
    )
    write_lmms_output(tmp_path / "out", model="qwen3_vl", model_args="pretrained=org/alpha-vl", tasks=[group])
    yield tmp_path / "out", recs
    lmms_settings.release()


def test_lmms_output_bundle_verifies_and_a_changed_task_value_is_caught(lmms_run, tmp_path):
    out, recs = lmms_run
    bundle = tmp_path / "alpha.edct.zip"
    assert main(["submit", str(out), "--out", str(bundle)]) == 0
    result = verify_bundle(bundle)
    assert isinstance(result, Verified), getattr(result, "reason", "")
    assert result.model == "org/alpha-vl" and result.target == {
        "model": "qwen3_vl",
        "model_args": "pretrained=org/alpha-vl",
    }
    assert result.setup["roles"]["judge"] == {"backend": "calibration-rules"}
    expected = summarise(recs, seed=0).overall.metrics["ccs_binary"]
    assert result.summary.overall.metrics["ccs_binary"] == expected
    b = read_bundle(bundle)
    assert set(b.meta["lmms_claims"]) >= {"edct_bench_okvqa", "edct_bench_drivelm", "edct_bench_3dsr"}

    # lmms-eval's own per-task number changed in the packed results file (and resealed)
    def edit(members):
        raw = json.loads(members["results.json"])
        raw["results"]["edct_bench_okvqa"]["ccs_binary,none"] += 0.1
        members["results.json"] = json.dumps(raw).encode()

    members = dict(b.members)
    edit(members)
    forged = tmp_path / "forged.edct.zip"
    write_zip(forged, reseal(b.meta, members), members)
    rejected = verify_bundle(forged)
    assert rejected.code == "metric_mismatch" and "edct_bench_okvqa" in rejected.reason
