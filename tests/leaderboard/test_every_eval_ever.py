"""`edct submit --every-eval-ever DIR`: Every Eval Ever records, validated by the `every-eval-ever`
package's own validator and JSON Schema (tests/support/eee.py), their numbers those of results.json,
and partial, unscored and unreliable runs flagged as such."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.edct_runs import control_records, records, write_edct_run
from support.eee import assert_valid, validate
from support.lmms_output import EdctTask, Group, write_lmms_output

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.leaderboard.bundle import read_bundle
from edct_task.leaderboard.eval_results import schema_problems
from edct_task.leaderboard.every_eval_ever import llm_scoring, model_id, path_component
from edct_task.lmms import settings as lmms_settings
from edct_task.reporting.setup import setup_id
from edct_task.run.runner import run
from edct_task.scoring.metrics import GRADED, metric_names


def _records(folder: Path) -> list[Path]:
    return sorted((folder / "data").glob("*/*/*/*.json"))


def _submit(run_dir: Path, bundle: Path, eee: Path, *extra: str) -> tuple[dict[str, Any], Path]:
    """``edct submit RUN --every-eval-ever EEE``; the record of this bundle and its path."""
    argv = ["submit", str(run_dir), "--output", str(bundle), "--every-eval-ever", str(eee), *extra]
    assert main(argv) == 0
    digest = read_bundle(bundle).meta["digest"]
    found = [(json.loads(p.read_text()), p) for p in _records(eee)]
    (mine,) = [
        (r, p) for r, p in found if r["source_metadata"]["additional_details"]["bundle_digest"] == digest
    ]
    return mine


def _by_id(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["evaluation_result_id"]: r for r in record["evaluation_results"]}


def _assert_numbers_are_the_runs(record: dict[str, Any], results: dict[str, Any]) -> None:
    """Every metric of every scope (overall, each domain) is results.json's, field for field; a
    metric without an estimate is absent and named."""
    found = _by_id(record)
    scopes = {"overall": results["results"]["overall"], **results["results"]["per_domain"]}
    missing = []
    for scope, block in scopes.items():
        for metric in metric_names():
            m = block["metrics"][metric]
            key = f"{scope}.{metric}"
            if m["estimate"] is None:
                assert key not in found
                missing += [metric] if scope == "overall" else []
                continue
            entry = found.pop(key)
            details = entry["score_details"]
            assert details["score"] == m["estimate"]
            ci = details["uncertainty"]["confidence_interval"]
            assert (ci["lower"], ci["upper"], ci["method"]) == (m["low"], m["high"], m["method"])
            assert ci["confidence_level"] == 0.95
            assert details["uncertainty"]["num_samples"] == m["n"]
            assert details["details"] == {k: str(v) for k, v in block["counts"].items()}
            assert entry["metric_config"]["metric_id"] == f"edct-bench.{metric}"
    assert found == {}, "records of no metric in results.json"
    source = record["source_metadata"]["additional_details"]
    assert source.get("metrics_without_estimate", "") == ",".join(missing)
    for key, value in results["results"]["overall"]["counts"].items():
        if f"samples_{key}" in source:
            assert source[f"samples_{key}"] == str(value)


def _judge_controls(record: dict[str, Any], metric: str) -> dict[str, str]:
    (judge,) = _by_id(record)[f"overall.{metric}"]["metric_config"]["llm_scoring"]["judges"]
    return judge["additional_details"]


@pytest.fixture(scope="module")
def calibration_runs(tmp_path_factory) -> dict[str, Path]:
    """The faithful and the prior reference model on the same 4 calibration items per domain."""
    root = tmp_path_factory.mktemp("eee")
    out = {}
    for behavior in ("faithful", "prior"):
        config = calibration_config(behavior, n=4, output_dir=root / behavior)
        run(config.model_copy(update={"progress": False}))
        out[behavior] = root / behavior
    return out


def test_calibration_runs_give_records_the_package_validates_with_the_runs_numbers(
    calibration_runs, tmp_path, capsys
):
    eee = tmp_path / "eee"
    got = {}
    for behavior, run_dir in calibration_runs.items():
        hub = tmp_path / f"hub-{behavior}"
        record, path = _submit(
            run_dir,
            tmp_path / f"{behavior}.edct.zip",
            eee,
            *("--eval-results", str(hub), "--dataset-id", "my-org/edct-bench"),
            *("--organization", "EDCT test", "--source-url", f"https://example.org/{behavior}"),
        )
        assert f"wrote the Every Eval Ever record {path}" in capsys.readouterr().out
        # the Hub files of the same call are still the Hub's (one per metric, valid)
        hub_files = sorted((hub / ".eval_results").glob("*.yaml"))
        assert len(hub_files) == len(metric_names())
        assert all(schema_problems(yaml.safe_load(f.read_text())) == [] for f in hub_files)
        results = json.loads((run_dir / "results.json").read_text())
        meta = read_bundle(tmp_path / f"{behavior}.edct.zip").meta
        _assert_numbers_are_the_runs(record, results)
        assert record["model_info"]["id"] == f"calibration-reference/{behavior}"
        assert path.parent == eee / "data" / "edct-bench" / "calibration-reference" / behavior
        library = record["eval_library"]
        assert (library["name"], library["version"]) == ("edct-bench", results["versions"]["edct-bench"])
        setup = {k: v for k, v in meta["setup"].items() if k != "target"}
        assert library["additional_details"]["setup_id"] == setup_id(setup)
        assert json.loads(library["additional_details"]["setup"]) == setup
        source = record["source_metadata"]
        assert source["source_organization_name"] == "EDCT test"
        assert source["additional_details"]["bundle_digest"] == meta["digest"]
        assert source["additional_details"]["bundle_url"] == f"https://example.org/{behavior}"
        assert (source["additional_details"]["partial"], source["additional_details"]["controls"]) == (
            "false",
            "passed",
        )
        first = _by_id(record)["overall.ccs_binary"]["source_data"]["additional_details"]
        assert first["benchmark"] == "EDCT-Bench" and first["benchmark_version"] == library["version"]
        for metric in metric_names():  # the judge of each metric, with its known-answer controls
            role = "judge_graded" if metric == GRADED.name else "judge_binary"
            tally = results["controls"]["roles"][role]["judge"]
            controls = _judge_controls(record, metric)
            assert controls["controls_role"] == role
            assert (controls["controls_correct"], controls["controls_n"]) == (
                str(tally["correct"]),
                str(tally["n"]),
            )
            assert controls["controls_accuracy"] == str(tally["accuracy"])
            assert controls["controls_below_bar"] == "false"
        got[behavior] = _by_id(record)["overall.ccs_binary"]["score_details"]["score"]
    assert got == {"faithful": 1.0, "prior": 0.0}
    assert_valid(*_records(eee))
    # submitting the same run again replaces its record (the same file), never adds a second
    _submit(calibration_runs["faithful"], tmp_path / "again.edct.zip", eee)
    assert len(_records(eee)) == 2


def test_the_validator_harness_fails_a_broken_record(calibration_runs, tmp_path):
    eee = tmp_path / "eee"
    record, path = _submit(calibration_runs["prior"], tmp_path / "p.edct.zip", eee)
    del record["evaluation_results"][0]["metric_config"]["lower_is_better"]
    record["model_info"]["additional_details"]["deployment_type"] = "somewhere"
    path.write_text(json.dumps(record))
    misplaced = eee / "data" / "edct-bench" / "other" / "model" / path.name
    misplaced.parent.mkdir(parents=True)
    path.rename(misplaced)
    (report,) = validate(misplaced)
    assert not report["valid"]
    assert any("lower_is_better" in e for e in report["schema_errors"])
    assert any("deployment_type" in e for e in report["schema_errors"])


def test_partial_unscored_and_unreliable_run_is_flagged(tmp_path):
    recs = records(0.5, n=6, excluded=2)
    for i, r in enumerate(recs):  # two scored samples per domain become unscored (a broken judge)
        if r.status == "scored" and i % 6 in (2, 3):
            recs[i] = r.model_copy(
                update={"status": "unscored", "scores": None, "reason": "judge reply unparseable"}
            )
    target = {"backend": "openai-chat", "model": "my model:v1.", "base_url": "http://127.0.0.1:8000/v1"}
    run_dir = tmp_path / "run"
    write_edct_run(run_dir, recs, target=target, controls=control_records(3, recs), bar=0.8)
    results = json.loads((run_dir / "results.json").read_text())
    results["config"]["data"]["partial"] = {  # as edct merge --allow-missing writes it
        "missing_slices": ["1/2"],
        "items": 18,
        "of_items": 36,
        "merged_from": ["runs/s0"],
    }
    (run_dir / "results.json").write_text(json.dumps(results))

    record, path = _submit(run_dir, tmp_path / "r.edct.zip", tmp_path / "eee")
    assert_valid(path)
    _assert_numbers_are_the_runs(record, results)
    counts = results["results"]["overall"]["counts"]
    assert counts["unscored"] > 0 and counts["excluded"] > 0
    flags = record["source_metadata"]["additional_details"]
    assert flags["partial"] == "true"
    assert (flags["partial_missing_slices"], flags["partial_items"]) == ("1/2", "18/36")
    assert flags["controls"] == "below the bar"
    assert flags["controls_unreliable"] == "; ".join(results["controls"]["unreliable"])
    assert "binary judge" in flags["controls_unreliable"]
    assert (flags["samples_unscored"], flags["samples_excluded"]) == (
        str(counts["unscored"]),
        str(counts["excluded"]),
    )
    assert _judge_controls(record, "ccs_binary")["controls_below_bar"] == "true"
    assert _judge_controls(record, "ac_k1")["controls_correct"] == "3"
    assert _judge_controls(record, GRADED.name)["controls_below_bar"] == "false"
    model = record["model_info"]
    assert (model["name"], model["id"]) == ("my model:v1.", "openai-chat/my-model-v1")
    assert model["additional_details"]["deployment_type"] == "self_deployed"  # a local server


def test_an_lmms_eval_output_gives_a_valid_record_of_its_own_numbers(tmp_path, monkeypatch):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    recs = records(0.7, n=6)
    tasks = [
        EdctTask(f"edct_bench_{d}", [r for r in recs if r.sample.domain == d]) for d in ("okvqa", "3dsr")
    ]
    group = Group("edct_bench", tasks, aggregate=[(m, "none") for m in metric_names()])
    write_lmms_output(tmp_path / "out", model="qwen3_vl", model_args="pretrained=org/alpha-vl", tasks=[group])
    try:
        record, path = _submit(tmp_path / "out", tmp_path / "a.edct.zip", tmp_path / "eee")
    finally:
        lmms_settings.release()
    assert_valid(path)
    meta = read_bundle(tmp_path / "a.edct.zip").meta
    claimed = meta["claimed"]["overall"]["metrics"]
    found = _by_id(record)
    for metric in metric_names():
        assert found[f"overall.{metric}"]["score_details"]["score"] == claimed[metric]["estimate"]
    assert record["model_info"]["id"] == "org/alpha-vl"
    assert record["model_info"]["additional_details"]["deployment_type"] == "self_deployed"
    assert record["eval_library"]["additional_details"]["host"] == "lmms-eval"
    assert record["source_metadata"]["additional_details"]["controls"] == "not run"


def test_a_run_with_nothing_scored_has_no_scores_and_says_so(tmp_path):
    recs = records(0.5, n=3, excluded=3)
    write_edct_run(tmp_path / "run", recs, target={"backend": "openai-chat", "model": "org/m"})
    record, path = _submit(tmp_path / "run", tmp_path / "n.edct.zip", tmp_path / "eee")
    assert_valid(path)
    assert record["evaluation_results"] == []
    flags = record["source_metadata"]["additional_details"]
    assert flags["metrics_without_estimate"] == ",".join(metric_names())
    assert (flags["samples_scored"], flags["samples_excluded"]) == ("0", str(len(recs)))
    assert flags["controls"] == "not run"  # a run without controls is not a passed one


def test_every_judge_of_a_panel_is_listed_with_its_own_controls():
    setup = {
        "roles": {
            "judge": [
                {"backend": "openai-chat", "model": "org/j1"},
                {"backend": "openai-chat", "model": "j2"},
            ]
        },
        "protocol": {"judge_temperature": 0.0, "judge_samples": 1, "panel_tie": "unscored"},
        "prompt_versions": {},
    }
    tally = {"n": 10, "correct": 9, "accuracy": 0.9, "ci": [0.6, 0.98], "unanswered": 0, "below_bar": False}
    low = {**tally, "correct": 2, "accuracy": 0.2, "ci": [0.06, 0.51], "below_bar": True}
    controls = {
        "requested": 10,
        "bar": 0.8,
        "calls": 40,
        "roles": {"judge_binary": {"judge0": tally, "judge1": low}, "judge_graded": {"judge0": tally}},
        "unreliable": ["binary judge (judge1): 2/10"],
    }
    binary = llm_scoring("ac_k2", setup, controls)
    assert binary["aggregation_method"] == "majority_vote"
    assert [j["model_info"]["id"] for j in binary["judges"]] == ["org/j1", "openai-chat/j2"]
    assert [j["additional_details"]["controls_below_bar"] for j in binary["judges"]] == ["false", "true"]
    assert binary["judges"][1]["additional_details"]["controls_accuracy"] == "0.2"
    graded = llm_scoring(GRADED.name, setup, controls)
    assert graded["aggregation_method"] == "average"
    assert graded["judges"][1]["additional_details"] == {"controls": "none for this judge"}
    assert llm_scoring("ccs_binary", setup, None)["judges"][0]["additional_details"] == {
        "controls": "not run"
    }


@pytest.mark.parametrize(
    ("name", "backend", "expected"),
    [
        ("Qwen/Qwen3-VL-8B-Instruct", "lmms-eval", "Qwen/Qwen3-VL-8B-Instruct"),
        ("gpt-4o", "openai-chat", "openai-chat/gpt-4o"),
        ("org/team/model", "x", "org/team/model"),
        ("data", "CON", "x-CON/x-data"),
        ("  ", "calibration-reference", "calibration-reference/model"),
        ("a b:c?.", "my backend", "my-backend/a-b-c"),
    ],
)
def test_model_ids_are_hub_style_and_portable(name, backend, expected):
    assert model_id(name, backend) == expected
    for part in expected.split("/"):
        assert part == path_component(part)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--organization", "x"],
            "--organization and --evaluator-relationship go with --every-eval-ever DIR",
        ),
        (["--source-url", "https://x"], "--source-url goes with --eval-results DIR or --every-eval-ever DIR"),
        (["--dataset-id", "a/b"], "--dataset-id and --dataset-revision go with --eval-results DIR"),
    ],
)
def test_options_without_their_output_are_one_line_errors(tmp_path, capsys, extra, message):
    write_edct_run(tmp_path / "run", records(0.5, n=2))
    assert main(["submit", str(tmp_path / "run"), "--output", str(tmp_path / "b.edct.zip"), *extra]) == 2
    err = capsys.readouterr().err
    assert err == f"edct: configuration error: {message}\n"
    assert not (tmp_path / "b.edct.zip").exists()
