"""A built EDCT-Bench dataset through the ``edct_bench`` lmms-eval task, on real photographs.

The sources are written with scikit-image's bundled photos. The calibration editor cannot edit a
photograph, so every chain ends in a recorded edit failure: the samples are *excluded* with the
reason, never scored 0 — what the task must do when a backend fails on real data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.lmms_helpers import lmms_eval_cmd, offline_env, read_results, read_samples, run_cli
from support.loopback import CalibrationWorld, Loopback, served_roles_config
from support.sources_fixture import photo_image, write_sources

from edct_task.bench_data import ENV_DATA, BuildRequest, build_bench
from edct_task.core.records import SampleRecord
from edct_task.lmms import documents
from edct_task.lmms import hooks as lmms_hooks
from edct_task.lmms import results as lmms_results
from edct_task.lmms import settings as lmms_settings
from edct_task.run.outputs import load_records

COUNTS = {"okvqa": 1, "drivelm": 1, "3dsr": 1}
HOOKS = {"okvqa": documents.docs_okvqa, "drivelm": documents.docs_drivelm, "3dsr": documents.docs_3dsr}


@pytest.fixture(scope="module")
def photo_bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("photo_bench")
    src = write_sources(root / "sources", photo_image)
    build_bench(BuildRequest(out=root / "bench", **src.kwargs(), counts=dict(COUNTS)))
    return root / "bench"


KEY_ENV, KEY = "EDCT_LOOPBACK_KEY", "sk-loopback-bench-task-2b9e4f"


@pytest.fixture()
def hook_settings(tmp_path, monkeypatch, photo_bench):
    """Real data needs real roles: text roles and editor served by a loopback server (the
    calibration-only backends refuse photographs at task load)."""
    with Loopback(CalibrationWorld("faithful"), api_key=KEY) as server:
        monkeypatch.setenv(KEY_ENV, KEY)
        monkeypatch.setenv(
            "EDCT_CONFIG", str(served_roles_config(tmp_path / "roles.yaml", server.url, KEY_ENV))
        )
        monkeypatch.setenv(ENV_DATA, str(photo_bench))
        monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
        yield lmms_settings.settings()
        lmms_settings.release()


def test_calibration_roles_refuse_the_photographs_at_task_load(tmp_path, monkeypatch, photo_bench):
    import datasets

    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(ENV_DATA, str(photo_bench))
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    with pytest.raises(documents.TaskLoadError, match="calibration-only backends") as err:
        documents.docs_okvqa(stub)
    assert err.value.code == 2 and "EDCT_CONFIG" in str(err.value)
    assert not (tmp_path / "work").exists()  # refused before the engine (cache, roles) was built


def test_compat_driver_completes_on_photographs(hook_settings):
    """lmms-eval's agentic loop, as the task runs it, with a scripted target in place of the model."""
    import datasets

    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    for domain, hook in HOOKS.items():
        (doc,) = list(hook(stub))
        text, outputs, info = lmms_hooks.doc_to_text(doc), [], None
        assert doc["question"] in text
        for round_idx in range(1, 13):
            outputs.append("A dog." if round_idx % 2 else "1. The brown fur of the dog.\n2. The red collar.")
            _visuals, text, terminal, updated, info = lmms_hooks.doc_to_text(
                doc, previous_output=outputs, round_idx=round_idx, previous_round_info=info
            )
            if terminal:
                outputs = updated
                break
        result = lmms_hooks.process_results(doc, [outputs[-1]])
        record = kept(result["edct"])
        assert record.sample.domain == domain and record.baseline.answer == "A dog."
        assert record.status == "excluded" and result["n_excluded"] == 1
        assert "not a calibration image" in record.reason  # the served editor's failure, recorded
        assert "ccs_binary" not in result  # excluded: left out of the metric, not scored 0
        assert json.loads(doc["metadata"])["image_sha256"]


def kept(logged: dict) -> SampleRecord:
    """The record an EDCT task's logged ``edct`` names: the last of its id in that run folder."""
    records = load_records(Path(logged["run_dir"]) / "samples.jsonl")
    return [r for r in records if r.sample.id == logged["id"]][-1]


@pytest.mark.slow
def test_lmms_eval_edct_bench_with_tiny_qwen3_vl(tmp_path, photo_bench, tiny_qwen3_vl):
    """The real lmms-eval CLI: ``edct_bench`` loads the built dataset from $EDCT_BENCH_DATA, and a
    user's task YAML that includes ours names it with dataset_path (the task argument)."""
    from task_configs import TASK_DIR

    out = tmp_path / "lmms"
    server = Loopback(CalibrationWorld("faithful"), api_key=KEY).__enter__()
    roles = served_roles_config(tmp_path / "roles.yaml", server.url, KEY_ENV)
    env = offline_env(
        tmp_path / "work", **{ENV_DATA: str(photo_bench), "EDCT_CONFIG": str(roles), KEY_ENV: KEY}
    )
    user_tasks = tmp_path / "user_tasks"
    user_tasks.mkdir()
    (user_tasks / "my_okvqa.yaml").write_text(
        f"task: my_edct_okvqa\ninclude: {TASK_DIR / 'edct_bench_okvqa.yaml'}\n"
        f"dataset_path: {photo_bench}\ndataset_kwargs:\n  load_from_disk: true\ntest_split: test\n"
    )
    args = [
        "--model",
        "qwen3_vl",
        "--model_args",
        f"pretrained={tiny_qwen3_vl},device=cpu,device_map=cpu",
    ]
    args += ["--include_path", str(user_tasks), "--tasks", "edct_bench,my_edct_okvqa", "--limit", "1"]
    args += ["--gen_kwargs", "max_new_tokens=12", "--output_path", str(out), "--log_samples"]
    try:
        run_cli(lmms_eval_cmd(*args), env, timeout=400)
    finally:
        server.__exit__(None, None, None)
    results = read_results(out)
    tasks = {f"edct_bench_{d}": d for d in COUNTS} | {"my_edct_okvqa": "okvqa"}
    for task, domain in tasks.items():
        counts = {c: results["results"][task][f"{c},none"] for c in lmms_results.COUNT_NAMES}
        assert sum(counts.values()) == 1, (task, counts)
        (sample,) = read_samples(out, task)
        record = kept(sample["edct"])  # lmms-eval's log names the run folder that keeps the record
        assert record.sample.domain == domain
        assert record.baseline is not None and record.baseline.answer  # the model answered
        if record.status != "scored":
            assert record.reason  # why it was not scored is recorded
        for step in record.steps:
            assert step.verified or all(a.failure for a in step.attempts)
