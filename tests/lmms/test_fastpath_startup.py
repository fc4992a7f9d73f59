"""What the fast path does before its first model call, and no more: it indexes the EDCT task
folder alone (lmms-eval's own tasks are named in the error, unknown names too), builds only the
documents ``--limit`` asks for — the same documents — while the results still count the task's
every document, and leaves lmms-eval's unused ``evaluate`` import until something uses it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import datasets
import lmms_eval.utils
import pytest
from support.lmms_helpers import offline_env

import edct_task.calibration as calibration
from edct_task.cli.main import main as edct_main
from edct_task.config import calibration_config
from edct_task.engine.stage_cache import ImageStore
from edct_task.lmms import documents
from edct_task.lmms import settings as lmms_settings
from edct_task.lmms.fastpath import build_model, run_fastpath
from task_configs import TASK_DIR

INDEX_ROWS = sum(1 for line in (TASK_DIR / "edct_calibration_index.jsonl").read_text().splitlines() if line)


@pytest.fixture()
def counted(monkeypatch):
    """Counts of calibration samples rendered and of task YAML files lmms-eval parsed."""
    counts = {"samples": 0, "yaml": 0}
    sample, load_yaml = calibration.calibration_sample, lmms_eval.utils.load_yaml_config

    def one_sample(*args, **kwargs):
        counts["samples"] += 1
        return sample(*args, **kwargs)

    def one_yaml(*args, **kwargs):
        counts["yaml"] += 1
        return load_yaml(*args, **kwargs)

    monkeypatch.setattr(calibration, "calibration_sample", one_sample)
    monkeypatch.setattr(lmms_eval.utils, "load_yaml_config", one_yaml)
    return counts


@pytest.fixture()
def fast_env(tmp_path, monkeypatch):
    monkeypatch.delenv(lmms_settings.ENV_CONFIG, raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_datasets"))
    yield calibration_config(output_dir=tmp_path / "run").model_copy(update={"progress": False})
    lmms_settings.release()


def test_a_limit_5_run_builds_5_documents_from_the_edct_folder_alone(tmp_path, fast_env, counted):
    lm = build_model("edct_reference", "behavior=faithful")
    out = run_fastpath(
        "edct_reference",
        "behavior=faithful",
        "edct_calibration",
        config=fast_env,
        output_path=tmp_path / "fast",
        limit=5,
        lm=lm,
    )
    assert counted["samples"] == 5
    edct_yaml_files = sum(1 for p in TASK_DIR.rglob("*") if p.suffix == ".yaml" or p.name.endswith("_yaml"))
    assert 0 < counted["yaml"] <= 2 * edct_yaml_files  # lmms-eval's own 3,000+ were not read
    assert [r.sample.id for r in out.records] == [calibration.calibration_sample(i).id for i in range(5)]
    assert out.results["n-samples"]["edct_calibration"] == {"original": INDEX_ROWS, "effective": 5}
    assert {r.status for r in out.records} == {"scored"}


def test_scoped_documents_are_the_first_documents_of_the_full_build(tmp_path, fast_env):
    index = datasets.load_dataset(
        "json", data_files=str(TASK_DIR / "edct_calibration_index.jsonl"), split="train"
    ).select(range(12))
    full = documents.calibration_docs(index)  # as lmms-eval builds it: every row
    scope = documents.DocumentScope(ImageStore(tmp_path / "store"), fast_env.role_specs(), limit=4)
    with documents.document_scope(scope):
        part = documents.calibration_docs(index)
    assert len(full) == 12 and len(part) == 4
    assert scope.rows(part) == 12 and scope.rows(full) == 12
    assert [part[i] for i in range(4)] == [full[i] for i in range(4)]  # image bytes included
    assert documents._SCOPE.get() is None


def test_other_task_names_are_refused_before_the_model_and_any_document(
    tmp_path, fast_env, counted, capsys, monkeypatch
):
    import edct_task.lmms.fastpath as fastpath

    monkeypatch.setattr(fastpath, "build_model", lambda *a, **k: pytest.fail("the model was built"))
    code = edct_main(
        [
            "run",
            "--model",
            "edct_reference",
            "--tasks",
            "edct_calibration,mme,no_such_task",
            "--limit",
            "2",
            "--output_path",
            str(tmp_path / "fast"),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "mme: lmms-eval task(s), not EDCT tasks" in err
    assert "unknown task(s) no_such_task" in err
    assert "EDCT tasks: edct_bench" in err
    assert counted["samples"] == 0


def test_lmms_evals_evaluate_is_imported_on_first_use(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        from edct_task.lmms.deferred import is_deferred
        from edct_task.lmms.fastpath import build_model
        build_model("edct_reference", "behavior=faithful")
        assert is_deferred("evaluate"), "evaluate was imported"
        assert "transformers.pipelines" not in sys.modules
        import lmms_eval.api.registry as registry
        load = registry.hf_evaluate.load  # what lmms-eval calls for a metric it does not know
        import evaluate
        assert load is evaluate.load and not is_deferred("evaluate")
        assert type(sys.modules["evaluate"]).__name__ == "module"
        print("ok")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=offline_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
