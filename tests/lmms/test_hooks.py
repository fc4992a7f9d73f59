"""The lmms-eval hooks without a subprocess: turns, metric names, discovery, the compat driver."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from edct_task.config import calibration_config
from edct_task.core.requests import Message
from edct_task.engine.driver import build_dispatcher
from edct_task.engine.lockstep import run_lockstep
from edct_task.lmms import documents, turns
from edct_task.lmms import hooks as lmms_hooks
from edct_task.lmms import results as lmms_results
from edct_task.lmms import settings as lmms_settings
from edct_task.lmms.hooks import Session
from edct_task.lmms.turns import parse_turn
from edct_task.roles import build_roles
from edct_task.run.outputs import load_records, load_run
from edct_task.scoring import metrics as scoring
from model_adapters.lmms_eval_target import render_quoted
from task_configs import TASK_DIR


@pytest.fixture()
def hook_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    yield lmms_settings.settings()
    lmms_settings.release()


def test_render_and_parse_turn_round_trip():
    system = "You are the driving assistant of the ego vehicle."
    conv = (
        Message("system", system),
        Message("user", "What should the ego vehicle do?", ("ref",)),
        Message("assistant", "Stop.\nThe light is red."),
        Message("user", "Why did you give that answer?"),
    )
    text = render_quoted(conv, tag=turns.image_tag("ab" * 32))
    assert text.startswith(system + "\n\n") and text.endswith("[image abababababab]")
    assert parse_turn(text, [system]) == [(m.role, m.text) for m in conv]
    single = render_quoted(conv[:2])
    assert single == f"{system}\n\nWhat should the ego vehicle do?"
    assert parse_turn(single, [system]) == [("system", system), ("user", "What should the ego vehicle do?")]


def test_yaml_metric_list_is_the_hooks_metric_list():
    raw = (TASK_DIR / "_edct_template_yaml").read_text()
    yaml.add_constructor(
        "!function", lambda loader, node: loader.construct_scalar(node), Loader=yaml.SafeLoader
    )
    config = yaml.safe_load(raw)
    assert [m["metric"] for m in config["metric_list"]] == lmms_results.metric_names()
    assert set(scoring.metric_names()) <= set(lmms_results.metric_names())
    assert config["output_type"] == "generate_until_agentic"
    assert config["generation_kwargs"]["max_agentic_steps"] >= lmms_settings.rounds_needed(
        calibration_config().protocol.k
    )


def test_entry_point_registers_model_and_task_folder():
    import lmms_eval.evaluator  # noqa: F401 - loads the entry points, as the CLI does
    from lmms_eval.models import get_model
    from lmms_eval.tasks import TaskManager

    tasks = set(TaskManager("WARNING").all_tasks)  # no include_path
    assert {
        "edct_bench",
        "edct_bench_okvqa",
        "edct_bench_drivelm",
        "edct_bench_3dsr",
        "edct_calibration",
    } <= tasks
    assert get_model("edct_reference").__name__ == "EdctReference"


def test_bench_tasks_say_how_to_configure_data_before_building_anything(monkeypatch, tmp_path):
    import datasets

    monkeypatch.delenv(documents.ENV_DATA, raising=False)
    monkeypatch.delenv(lmms_settings.ENV_WORK_DIR, raising=False)
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    with pytest.raises(documents.TaskLoadError, match="EDCT_BENCH_DATA") as err:
        documents.docs_okvqa(stub)
    assert err.value.code == 2
    # no roles built, no stage cache opened: no empty ./runs/edct-lmms/cache left behind
    assert list(tmp_path.iterdir()) == []


def test_the_stage_cache_folder_is_announced(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(lmms_settings.ENV_WORK_DIR, raising=False)
    config = calibration_config(n=2, output_dir=tmp_path / "default")
    lmms_settings.build_settings(config).close()
    err = capsys.readouterr().err
    assert f"stage cache and edited images in {tmp_path / 'default' / 'cache'}" in err
    assert "set EDCT_WORK_DIR to put them elsewhere" in err
    run_folder = tmp_path / "default" / "cache" / "run"
    assert f"the EDCT run folder (samples.jsonl, images/, results.json) is {run_folder}" in err
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "mine"))
    monkeypatch.setenv(lmms_settings.ENV_OUTPUT_DIR, str(tmp_path / "out"))
    lmms_settings.build_settings(config).close()
    err = capsys.readouterr().err
    assert f"in {tmp_path / 'mine'} ($EDCT_WORK_DIR)" in err and f"is {tmp_path / 'out'} " in err


def test_bench_tasks_filter_a_built_dataset(tmp_path, monkeypatch, hook_settings):
    from support.loopback import served_roles_config

    # real data needs real roles (no call is made while documents load: any address will do)
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", "sk-unused")
    roles = served_roles_config(tmp_path / "roles.yaml", "http://127.0.0.1:9", "EDCT_LOOPBACK_KEY")
    monkeypatch.setenv("EDCT_CONFIG", str(roles))
    # other roles are another setup: their own run folder (the fixture's holds the calibration roles')
    monkeypatch.setenv(lmms_settings.ENV_OUTPUT_DIR, str(tmp_path / "served-run"))
    docs = documents.calibration_docs([{"index": i, "seed": 0} for i in range(3)])
    bench = docs.map(lambda d, i: {"domain": ["okvqa", "drivelm", "3dsr"][i]}, with_indices=True)
    bench.save_to_disk(tmp_path / "bench")
    monkeypatch.setenv(documents.ENV_DATA, str(tmp_path / "bench"))
    import datasets

    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    assert documents.docs_drivelm(stub)["domain"] == ["drivelm"]
    assert documents.docs_3dsr(stub)["id"] == [docs[2]["id"]]


def test_unparseable_final_response_is_an_error_not_a_zero(hook_settings):
    doc = {"id": "x", "domain": "knowledge", "question": "q?"}
    out = lmms_hooks.process_results(doc, ['{"success": false, "error": "max_agentic_steps_reached"}'])
    assert out["n_error"] == 1 and out["n_scored"] == 0
    # lmms-eval's log names the run folder; the record, with the reason, is kept there
    (record,) = load_records(Path(out["edct"]["run_dir"]) / "samples.jsonl")
    assert out["edct"]["id"] == record.sample.id == "x"
    assert "max_agentic_steps_reached" in record.reason and record.status == "error"
    assert set(out["edct"]) == {"run_dir", "id"}  # no second copy of the record
    # a metric the sample does not count for is left out, so lmms-eval's `mean` skips it
    assert not set(scoring.metric_names()) & set(out)


def test_the_run_folder_keeps_every_task_of_a_group_whichever_aggregates_first(hook_settings):
    """lmms-eval scores every document of a group, then aggregates task by task: finishing the
    run folder for the first task keeps the records of the tasks not aggregated yet (it used to
    rewrite samples.jsonl with the first task's records only, losing the others')."""
    from edct_task.lmms import aggregation

    stop = '{"success": false, "error": "max_agentic_steps_reached"}'
    tasks = {"a": ["a1", "a2"], "b": ["b1"]}
    doc = {"domain": "knowledge", "question": "q?"}
    score = lmms_hooks.process_results
    items = {t: [score({**doc, "id": i}, [stop])["edct"] for i in ids] for t, ids in tasks.items()}
    for task in ("a", "b"):
        assert aggregation.finish_run_folder(items[task]) == {}  # no table row
        run = load_run(hook_settings.run.path)
        assert [r.sample.id for r in run.records] == ["a1", "a2", "b1"]
        assert run.log is not None and run.log.results.overall.counts.error == 3


def test_compat_driver_reproduces_the_batched_driver(hook_settings):
    """The agentic callback (one target turn per round, history in the text) and the lockstep
    driver give the same records for a deterministic target."""
    from edct_task.calibration import ReferenceVLM
    from edct_task.lmms.plugin import messages_to_chat
    from model_adapters.contracts import GenerationParams

    docs = documents.calibration_docs([{"index": i, "seed": 0} for i in range(6)])
    model = ReferenceVLM("mixed:0.5")
    from edct_task.calibration import world

    agentic = []
    for doc in docs:  # what lmms-eval's _run_generate_until_agentic does, with a chat model
        text, visuals, outputs, info = lmms_hooks.doc_to_text(doc), documents.doc_to_visual(doc), [], None
        for round_idx in range(1, 13):
            msg = [
                {
                    "role": "user",
                    "content": [
                        *({"type": "image", "url": v} for v in visuals),
                        {"type": "text", "text": text},
                    ],
                }
            ]
            conv = messages_to_chat(msg, (world.DRIVING_SYSTEM_PROMPT,))
            outputs.append(model.generate([conv], GenerationParams())[0].text)
            step = lmms_hooks.doc_to_text(
                doc, previous_output=outputs, round_idx=round_idx, previous_round_info=info
            )
            new_visuals, text, terminal, updated, info = step
            if terminal:
                outputs = updated
                break
            visuals = new_visuals if new_visuals is not None else visuals
        agentic.append(lmms_results.parse_final(doc, outputs[-1]))

    s = hook_settings
    roles = build_roles(
        {**calibration_config().role_specs()}
        | {
            "target": type(calibration_config().role_specs()["target"])(
                "calibration-reference", {"behavior": "mixed:0.5"}
            )
        }
    )
    dispatcher = build_dispatcher(
        roles,
        s.images,
        s.cache,
        protocol=s.protocol,
        gate=s.config.verification,
        limits=s.config.limits,
    )
    samples = [documents.sample_of(d, s.images.put(documents.doc_image(d))) for d in docs]
    batched = run_lockstep(samples, s.protocol, dispatcher)
    dispatcher.close()
    assert [r.status for r in agentic] == [r.status for r in batched]
    assert [r.scores for r in agentic] == [r.scores for r in batched]
    assert [r.baseline for r in agentic] == [r.baseline for r in batched]
    assert {r.status for r in batched} >= {"scored"}


def test_session_rounds_are_unique_texts(hook_settings):
    docs = documents.calibration_docs([{"index": 0, "seed": 0}])
    s = hook_settings
    session = Session(
        documents.sample_of(docs[0], s.images.put(documents.doc_image(docs[0]))), s.protocol, s.dispatcher
    )
    texts = []
    first = True
    while session.pending is not None:
        texts.append(turns.turn_text(session.pending, first=first))
        first = False
        session.answer("Tennis." if session.pending.purpose.endswith("answer") else "1. The ball is yellow.")
    assert len(texts) == len(set(texts)) >= 2


def test_a_stale_cache_fails_the_task_load_with_one_message(monkeypatch, tmp_path):
    import sqlite3

    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path))
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:  # a cache written by schema 1
        conn.execute("PRAGMA user_version=1")
    with pytest.raises(documents.TaskLoadError, match="schema version 1") as err:
        documents.calibration_docs([{"index": 0, "seed": 0}])
    assert err.value.code == 2
    lmms_settings.release()


def test_process_results_is_safe_in_lmms_evals_four_thread_pool(tmp_path, monkeypatch):
    """lmms-eval 0.7.3 runs ``process_results`` in 4 threads (``process_docs_parallel``): the
    settings are built once, and every document scores as it does alone."""
    from concurrent.futures import ThreadPoolExecutor

    from edct_task.lmms import settings as lmms_settings_module

    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    builds = []
    real_build = lmms_settings_module.build_settings
    monkeypatch.setattr(lmms_settings_module, "build_settings", lambda *a: builds.append(1) or real_build(*a))
    docs = [{"id": f"d{i}", "domain": "knowledge", "question": "q?"} for i in range(32)]
    bad = '{"success": false, "error": "max_agentic_steps_reached"}'
    try:
        with ThreadPoolExecutor(4) as pool:
            out = list(pool.map(lambda d: lmms_hooks.process_results(d, [bad]), docs))
        assert len(builds) == 1
        alone = lmms_hooks.process_results(docs[0], [bad])
        assert all(o["n_error"] == 1 and o["edct"]["run_dir"] == alone["edct"]["run_dir"] for o in out)
        assert [o["edct"]["id"] for o in out] == [d["id"] for d in docs]
    finally:
        lmms_settings.release()


def _run_generate_until_agentic(doc, metadata):  # named as lmms-eval 0.7.3's loop: its frame is read
    req = SimpleNamespace(metadata=metadata)  # noqa: F841 - the hook reads this frame's `req`
    return lmms_hooks.doc_to_text(doc, previous_output=["A dog."], round_idx=1, previous_round_info=None)


def test_a_padding_request_costs_none_of_our_backends(hook_settings):
    """Multi-rank runs pad short ranks with clones tagged ``__padding_only__`` that lmms-eval's
    agentic loop runs anyway: the hook ends them after the model's first reply."""
    (doc,) = documents.calibration_docs([{"index": 0, "seed": 0}])
    _visuals, _text, terminal, outputs, info = _run_generate_until_agentic(doc, {"__padding_only__": True})
    assert terminal and info == {"state": {"padding": True}}
    assert hook_settings.dispatcher.stats.calls == {} and hook_settings.dispatcher.stats.cache_hits == {}
    assert lmms_hooks.process_results(doc, [outputs[-1]])["n_error"] == 1  # if it were ever scored
    _visuals, _text, terminal, _outputs, info = _run_generate_until_agentic(doc, {"task": "t"})
    assert not terminal and info["edct_session"].rounds == 1  # a real request runs the protocol
    assert info["state"]["next"] == "baseline.why"
