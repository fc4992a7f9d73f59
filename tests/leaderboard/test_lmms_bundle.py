"""lmms-eval output and leaderboard bundles.

``edct submit <lmms-eval output folder>`` bundles the EDCT run folder lmms-eval's logs name, as an
ordinary kind ``edct`` bundle, and refuses when lmms-eval's own per-task numbers disagree with it.
Boards still hold kind ``lmms`` bundles made by edct-bench 0.2.0 (lmms-eval's results file, the
logged records and setup): built here by hand as 0.2.0 packed them, they still verify, and a
changed per-task value in them is still caught.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from support.edct_runs import records, run_config
from support.lmms_output import EdctTask, Group, write_lmms_output

from edct_task import prompts
from edct_task.cli.main import main
from edct_task.core.records import SampleRecord
from edct_task.leaderboard.bundle import FORMAT, FORMAT_VERSION, read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import Verified, verify_bundle
from edct_task.reporting.setup import dataset_manifest, host_of, setup_identity, target_rendering
from edct_task.run.outputs import image_files
from edct_task.scoring.metrics import metric_names, summarise
from edct_task.scoring.results import as_json

TARGET = {"model": "qwen3_vl", "model_args": "pretrained=org/alpha-vl"}


def _group(recs: list[SampleRecord]) -> Group:
    return Group(
        "edct_bench",
        [
            EdctTask(f"edct_bench_{d}", [r for r in recs if r.sample.domain == d])
            for d in ("okvqa", "drivelm", "3dsr")
        ],
        aggregate=[(m, "none") for m in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1", "ac_k2", "ef_k2")],
    )


def _lmms_output(tmp_path: Path, recs: list[SampleRecord]) -> Path:
    write_lmms_output(tmp_path / "out", **TARGET, tasks=[_group(recs)])
    return tmp_path / "out"


def test_submit_of_lmms_output_bundles_the_run_folder_its_logs_name(tmp_path):
    recs = records(0.7, n=10)
    out = _lmms_output(tmp_path, recs)
    bundle = tmp_path / "alpha.edct.zip"
    assert main(["submit", str(out), "--out", str(bundle)]) == 0
    b = read_bundle(bundle)
    assert b.meta["kind"] == "edct" and b.meta["lmms_claims"] is None
    assert "setup_source.json" not in b.members
    assert json.loads(b.members["results.json"])["schema_version"]  # the run folder's run log
    assert [r.sample.id for r in b.records()] == [r.sample.id for r in recs]
    result = verify_bundle(bundle)
    assert isinstance(result, Verified), getattr(result, "reason", "")
    assert result.kind == "edct" and result.model == "org/alpha-vl"
    assert result.target == {"backend": "lmms-eval", **TARGET}
    assert result.setup["roles"]["judge"] == {"backend": "calibration-rules"}
    assert (
        result.summary.overall.metrics["ccs_binary"] == summarise(recs, seed=0).overall.metrics["ccs_binary"]
    )


def test_submit_of_lmms_output_refuses_a_per_task_value_its_run_folder_does_not_give(tmp_path, capsys):
    out = _lmms_output(tmp_path, records(0.7, n=10))
    (file,) = out.rglob("*_results.json")
    raw = json.loads(file.read_text())
    raw["results"]["edct_bench_okvqa"]["ccs_binary,none"] += 0.1
    file.write_text(json.dumps(raw))
    assert main(["submit", str(out), "--out", str(tmp_path / "a.edct.zip")]) == 2
    err = capsys.readouterr().err
    assert "cannot bundle an inconsistent run" in err and "edct_bench_okvqa ccs_binary" in err
    assert not (tmp_path / "a.edct.zip").exists()


def _bundle_0_2_0(tmp_path: Path, recs: list[SampleRecord]) -> Path:
    """A kind ``lmms`` bundle as edct-bench 0.2.0's ``edct submit`` packed lmms-eval output:
    lmms-eval's results file, the logged records, the logged setup and lmms-eval's per-task claims."""
    file = write_lmms_output(tmp_path / "lmms", **TARGET, tasks=[_group(recs)], log_samples=False)
    results = json.loads(file.read_text())
    config = run_config({"backend": "lmms-eval", **TARGET})
    source = {
        "roles": {r: spec for r, spec in config["roles"].items() if r != "target"},
        "protocol": config["protocol"],
        "verification": config["verification"],
        "prompt_versions": prompts.prompt_versions(),
    }
    manifest = dataset_manifest(recs)
    members = {
        "results.json": json.dumps(results, indent=2).encode(),
        "samples.jsonl": "".join(r.model_dump_json() + "\n" for r in recs).encode(),
        "dataset_manifest.json": json.dumps(manifest, indent=2).encode(),
        "images.json": json.dumps(
            {"images": sorted({x for r in recs for x in image_files(r).values()})}
        ).encode(),
        "setup_source.json": json.dumps({**source, "run_dir": "/gone/edct"}, indent=2).encode(),
    }
    setup = setup_identity(
        roles=source["roles"],
        protocol=source["protocol"],
        verification=source["verification"],
        prompt_versions=source["prompt_versions"],
        dataset_digest=manifest["digest"],
        rendering=target_rendering(recs),
        host=host_of(TARGET),
    )
    claims = {
        task: {m: entry[f"{m},none"] for m in metric_names() if f"{m},none" in entry}
        for task, entry in results["results"].items()
    }
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc).isoformat(timespec="seconds"),
        "kind": "lmms",
        "task": "edct_bench",
        "model": {"key": "qwen3_vl(pretrained=org/alpha-vl)", "name": "org/alpha-vl", "identity": TARGET},
        "setup": {**setup, "target": TARGET},
        "backend_identities": None,
        "claimed": as_json(summarise(recs, seed=0, n_resamples=10_000)),
        "lmms_claims": {task: values for task, values in claims.items() if values},
        "scoring": {"seed": 0, "n_resamples": 10_000},
        "versions": {"edct-bench": "0.2.0"},
        "images_included": False,
    }
    bundle = tmp_path / "old.edct.zip"
    write_zip(bundle, reseal(meta, members), members)
    return bundle


def test_a_0_2_0_lmms_bundle_still_verifies_and_a_changed_task_value_is_caught(tmp_path):
    recs = records(0.7, n=10)
    bundle = _bundle_0_2_0(tmp_path, recs)
    result = verify_bundle(bundle)
    assert isinstance(result, Verified), getattr(result, "reason", "")
    assert result.kind == "lmms" and result.model == "org/alpha-vl" and result.target == TARGET
    assert result.setup["roles"]["judge"] == {"backend": "calibration-rules"}
    assert (
        result.summary.overall.metrics["ccs_binary"] == summarise(recs, seed=0).overall.metrics["ccs_binary"]
    )

    # lmms-eval's own per-task number changed in the packed results file (and resealed)
    b = read_bundle(bundle)
    members = dict(b.members)
    raw = json.loads(members["results.json"])
    raw["results"]["edct_bench_okvqa"]["ccs_binary,none"] += 0.1
    members["results.json"] = json.dumps(raw).encode()
    forged = tmp_path / "forged.edct.zip"
    write_zip(forged, reseal(b.meta, members), members)
    rejected = verify_bundle(forged)
    assert rejected.code == "metric_mismatch" and "edct_bench_okvqa" in rejected.reason

    # and the claim changed with it: lmms-eval's value is not what the records give per domain
    meta = dict(b.meta)
    meta["lmms_claims"] = {
        **meta["lmms_claims"],
        "edct_bench_okvqa": {"ccs_binary": raw["results"]["edct_bench_okvqa"]["ccs_binary,none"]},
    }
    write_zip(forged, reseal(meta, members), members)
    rejected = verify_bundle(forged)
    assert rejected.code == "metric_mismatch" and "differs from the sample records'" in rejected.reason
