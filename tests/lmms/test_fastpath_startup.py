"""What the fast path does before its first model call, and no more: it indexes the EDCT task
folder alone (lmms-eval's own tasks are named in the error, unknown names too), builds only the
documents ``--limit`` asks for — the same documents — while the results still count the task's
every document, and leaves lmms-eval's unused ``evaluate`` import until something uses it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

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
from task_configs import CALIBRATION_INDEX, TASK_DIR

INDEX_ROWS = sum(1 for line in (TASK_DIR / CALIBRATION_INDEX).read_text().splitlines() if line)


pytestmark = pytest.mark.slow  # lmms-eval imported in subprocesses: make test, not make test-fast


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


def _run_5(tmp_path, config):
    """The fast path on the first 5 calibration documents, with the faithful reference model."""
    lm = build_model("edct_reference", "behavior=faithful")
    return run_fastpath(
        "edct_reference",
        "behavior=faithful",
        "edct_calibration",
        config=config,
        output_path=tmp_path / "fast",
        limit=5,
        lm=lm,
    )


def test_a_limit_5_run_builds_5_documents_from_the_edct_folder_alone(
    tmp_path, fast_env, counted, monkeypatch
):
    import edct_task.lmms.fastpath as fastpath

    ahead_rows, aheads = [], []
    real_ahead = documents.RenderAhead

    def recorded_ahead(work_dir, rows):
        ahead_rows.append(list(rows))
        aheads.append(real_ahead(work_dir, rows))
        return aheads[-1]

    monkeypatch.setattr(fastpath.documents, "RenderAhead", recorded_ahead)
    out = _run_5(tmp_path, fast_env)
    assert ahead_rows == [[(i, 0) for i in range(5)]]
    assert counted["samples"] + aheads[0].provided == 5  # here, or in the render-ahead process
    edct_yaml_files = sum(1 for p in TASK_DIR.rglob("*") if p.suffix == ".yaml" or p.name.endswith("_yaml"))
    assert 0 < counted["yaml"] <= 2 * edct_yaml_files  # lmms-eval's own 3,000+ were not read
    assert [r.sample.id for r in out.records] == [calibration.calibration_sample(i).id for i in range(5)]
    assert out.results["n-samples"]["edct_calibration"] == {"original": INDEX_ROWS, "effective": 5}
    assert {r.status for r in out.records} == {"scored"}


def test_scoped_documents_are_the_first_documents_of_the_full_build(tmp_path, fast_env):
    index = _index(12)
    full = documents.calibration_docs(index)  # as lmms-eval builds it: every row
    scope = documents.DocumentScope(ImageStore(tmp_path / "store"), fast_env.role_specs(), limit=4)
    with documents.document_scope(scope):
        part = documents.calibration_docs(index)
    assert len(full) == 12 and len(part) == 4
    assert scope.rows(part) == 12 and scope.rows(full) == 12
    assert [part[i] for i in range(4)] == [full[i] for i in range(4)]  # image bytes included
    assert documents._SCOPE.get() is None


def _index(rows: int) -> datasets.Dataset:
    return datasets.load_dataset("json", data_files=str(TASK_DIR / CALIBRATION_INDEX), split="train").select(
        range(rows)
    )


def test_documents_built_ahead_are_the_hooks_own_and_rows_not_built_ahead_are_built_in_place(
    tmp_path, fast_env, counted
):
    index = _index(6)
    full = documents.calibration_docs(index)
    assert counted["samples"] == 6
    ahead = documents.RenderAhead(tmp_path / "store", documents.calibration_rows(3))
    ahead.wait()
    scope = documents.DocumentScope(
        ImageStore(tmp_path / "store"), fast_env.role_specs(), limit=5, ahead=ahead
    )
    try:
        with documents.document_scope(scope):
            part = documents.calibration_docs(index)
    finally:
        ahead.close()
    assert [part[i] for i in range(5)] == [full[i] for i in range(5)]  # image bytes included
    assert counted["samples"] == 6 + 2 and ahead.provided == 3  # rows 3 and 4 here, 0-2 in the worker
    assert scope.rows(part) == 6


def _built_here():
    """A ``build`` for ``RenderAhead.collect`` that records the rows it built (a stand-in document)."""
    built: list[int] = []

    def build(index, seed):
        built.append(index)
        return {"id": f"here-{index}"}

    return built, build


def test_a_failed_build_ahead_is_built_in_place_and_raises_there(tmp_path, fast_env, counted):
    ahead = documents.RenderAhead(tmp_path / "store", [(-1, 0), (0, 0)])
    built_here, build = _built_here()
    try:
        ahead.wait()
        docs = ahead.collect([(-1, 0), (0, 0), (1, 0)], build)
    finally:
        ahead.close()
    # -1 raised in the worker, 1 was not asked of it: both built here; 0 is the worker's
    assert built_here == [-1, 1] and ahead.provided == 1
    assert [d["id"] for d in docs] == ["here--1", calibration.calibration_sample(0).id, "here-1"]
    scope = documents.DocumentScope(ImageStore(tmp_path / "store"), fast_env.role_specs(), ahead=None)
    with documents.document_scope(scope), pytest.raises(documents.TaskLoadError, match="index must be >= 0"):
        documents.calibration_docs([{"index": -1, "seed": 0}])


def test_the_index_rows_predicted_are_the_tasks_index_file():
    yaml_text = (TASK_DIR / "edct_calibration.yaml").read_text()
    assert f"data_files: {CALIBRATION_INDEX}" in yaml_text
    rows = documents.calibration_rows(None)
    assert len(rows) == INDEX_ROWS
    assert rows[:3] == [(r["index"], r["seed"]) for r in _index(3)]
    assert documents.calibration_rows(7) == rows[:7]


def test_other_task_names_are_refused_before_the_model_and_any_document(
    tmp_path, fast_env, counted, capsys, monkeypatch
):
    import edct_task.lmms.fastpath as fastpath

    monkeypatch.setattr(fastpath, "build_model", lambda *a, **k: pytest.fail("the model was built"))
    monkeypatch.setattr(
        fastpath.documents, "RenderAhead", lambda *a, **k: pytest.fail("documents were built ahead")
    )
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


def test_documents_the_worker_has_not_started_are_built_by_the_caller_from_the_back(tmp_path, counted):
    rows = documents.calibration_rows(40)
    ahead = documents.RenderAhead(tmp_path / "store", rows)
    built_here = []

    def build(index, seed):
        built_here.append(index)
        return documents.calibration_doc(index, seed, ImageStore(tmp_path / "store"))

    try:
        docs = ahead.collect(rows, build)  # at once: the worker process is still starting
    finally:
        ahead.close()
    assert counted["samples"] == len(built_here) > 0  # rendered in this process: only those
    assert ahead.provided + len(built_here) == 40
    assert built_here == sorted(built_here, reverse=True)  # from the back…
    assert built_here[0] == 39 and built_here[-1] >= ahead.provided  # …meeting the worker's front
    assert [d["id"] for d in docs] == [calibration.calibration_sample(i).id for i in range(40)]


def test_the_documents_images_reach_the_model_without_being_read_back(tmp_path, fast_env, monkeypatch):
    reads = []
    real_get = ImageStore.get

    def get(self, ref):
        reads.append(ref)
        return real_get(self, ref)

    monkeypatch.setattr(ImageStore, "get", get)
    out = _run_5(tmp_path, fast_env)
    documents_images = {r.sample.image for r in out.records}
    assert len(documents_images) == 5 and {r.status for r in out.records} == {"scored"}
    assert not documents_images & set(reads)  # decoded once, for the sample, and kept decoded


def test_the_worker_is_let_go_once_its_documents_are_collected(tmp_path, fast_env, counted):
    ahead = documents.RenderAhead(tmp_path / "store", [(0, 0), (1, 0)])
    built_here, build = _built_here()
    try:
        ahead.wait()
        workers = list(ahead._pool._processes.values())
        assert workers and ahead.collect([(0, 0), (1, 0)], build)[1]["id"] != "here-1"
        for worker in workers:  # it exits during the run, not when the run closes it
            # not join(): the executor's own thread reaps the process too, and the loser of that
            # race sees no exit status yet (join returns, is_alive() still says True for a moment)
            deadline = time.monotonic() + 60
            while worker.exitcode is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert worker.exitcode is not None
        assert ahead.collect([(1, 0)], build) == [{"id": "here-1"}] and built_here == [1]
    finally:
        ahead.close()


def test_the_first_target_batch_goes_out_while_later_documents_are_decoded(tmp_path, fast_env, monkeypatch):
    import threading

    import edct_task.lmms.fastpath as fastpath

    asked = threading.Event()
    events: list[str] = []
    decode, generate = documents.doc_image_and_notes, fastpath.LmmsTarget.generate

    def decode_after_the_first_batch(doc):
        if len(events) >= 2:  # the third document waits for a target call (30 s at most)
            events.append("asked" if asked.wait(30) else "not asked")
        events.append(f"decoded {doc['id']}")
        return decode(doc)

    def first_call(self, conversations, params):
        asked.set()
        return generate(self, conversations, params)

    monkeypatch.setattr(documents, "doc_image_and_notes", decode_after_the_first_batch)
    monkeypatch.setattr(fastpath.LmmsTarget, "generate", first_call)
    limits = fast_env.limits.model_copy(update={"target_batch_size": 2})
    out = _run_5(tmp_path, fast_env.model_copy(update={"limits": limits}))
    decoded = [f"decoded {calibration.calibration_sample(i).id}" for i in range(5)]
    assert events == [*decoded[:2], *(e for d in decoded[2:] for e in ("asked", d))]
    assert [r.sample.id for r in out.records] == [calibration.calibration_sample(i).id for i in range(5)]
    assert {r.status for r in out.records} == {"scored"}


def test_no_document_image_is_decoded_before_the_samples_are_drawn(tmp_path, fast_env, monkeypatch):
    """lmms-eval's documents decode their image on access: the refusal check before the first
    model call reads the rows without it, and each row is read once, as its sample is drawn."""
    import edct_task.engine.driver as lockstep

    decodes: list[int] = []
    at_start: list[int] = []
    real_decode, real_run = datasets.Image.decode_example, lockstep.run_samples

    def counted(self, value, token_per_repo_id=None):
        decodes.append(1)
        return real_decode(self, value, token_per_repo_id=token_per_repo_id)

    def run_samples(*args, **kwargs):
        at_start.append(len(decodes))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(datasets.Image, "decode_example", counted)
    monkeypatch.setattr(lockstep, "run_samples", run_samples)
    out = _run_5(tmp_path, fast_env)
    lmms_evals_own = 1  # lmms-eval's Task reads its first document once, when it is built
    assert at_start == [lmms_evals_own] and len(decodes) == lmms_evals_own + 5
    assert {r.status for r in out.records} == {"scored"}
