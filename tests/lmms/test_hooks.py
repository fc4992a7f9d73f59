"""The lmms-eval hooks without a subprocess: turns, metric names, discovery, the compat driver."""

from __future__ import annotations

import pytest
import yaml

from edct_task.config import calibration_config
from edct_task.engine.lockstep import build_dispatcher, run_lockstep
from edct_task.engine.requests import Message
from edct_task.lmms import documents, turns
from edct_task.lmms import hooks as lmms_hooks
from edct_task.lmms.hooks import Session
from edct_task.lmms.turns import parse_turn, render_turn
from edct_task.roles import build_roles
from edct_task.scoring import metrics as scoring
from task_configs import TASK_DIR


@pytest.fixture()
def hook_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    s = lmms_hooks.build_settings(calibration_config(n=12), work_dir=tmp_path / "work")
    lmms_hooks.install_settings(s)
    yield s
    lmms_hooks.install_settings(None)


def test_render_and_parse_turn_round_trip():
    system = "You are the driving assistant of the ego vehicle."
    conv = (
        Message("system", system),
        Message("user", "What should the ego vehicle do?", ("ref",)),
        Message("assistant", "Stop.\nThe light is red."),
        Message("user", "Why did you give that answer?"),
    )
    text = render_turn(conv, tag=turns.image_tag("ab" * 32))
    assert text.startswith(system + "\n\n") and text.endswith("[image abababababab]")
    assert parse_turn(text, [system]) == [(m.role, m.text) for m in conv]
    single = render_turn(conv[:2])
    assert single == f"{system}\n\nWhat should the ego vehicle do?"
    assert parse_turn(single, [system]) == [("system", system), ("user", "What should the ego vehicle do?")]


def test_yaml_metric_list_is_the_hooks_metric_list():
    raw = (TASK_DIR / "_edct_template_yaml").read_text()
    yaml.add_constructor(
        "!function", lambda loader, node: loader.construct_scalar(node), Loader=yaml.SafeLoader
    )
    config = yaml.safe_load(raw)
    assert [m["metric"] for m in config["metric_list"]] == lmms_hooks.metric_names()
    assert set(scoring.METRIC_NAMES) <= set(lmms_hooks.metric_names())
    assert config["output_type"] == "generate_until_agentic"
    assert config["generation_kwargs"]["max_agentic_steps"] >= lmms_hooks.rounds_needed(
        calibration_config().protocol
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
    monkeypatch.delenv(lmms_hooks.ENV_WORK_DIR, raising=False)
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    lmms_hooks.install_settings(None)
    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    with pytest.raises(documents.TaskLoadError, match="EDCT_BENCH_DATA") as err:
        documents.okvqa_docs(stub)
    assert err.value.code == 2
    # no roles built, no stage cache opened: no empty ./runs/edct-lmms/cache left behind
    assert lmms_hooks._settings is None and list(tmp_path.iterdir()) == []


def test_the_stage_cache_folder_is_announced(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(lmms_hooks.ENV_WORK_DIR, raising=False)
    config = calibration_config(n=2, output_dir=tmp_path / "default")
    lmms_hooks.build_settings(config).close()
    err = capsys.readouterr().err
    assert f"stage cache and edited images in {tmp_path / 'default' / 'cache'}" in err
    assert "set EDCT_WORK_DIR to put them elsewhere" in err
    monkeypatch.setenv(lmms_hooks.ENV_WORK_DIR, str(tmp_path / "mine"))
    lmms_hooks.build_settings(config).close()
    assert f"in {tmp_path / 'mine'} ($EDCT_WORK_DIR)" in capsys.readouterr().err


def test_bench_tasks_filter_a_built_dataset(tmp_path, monkeypatch, hook_settings):
    docs = documents.calibration_docs([{"index": i, "seed": 0} for i in range(3)])
    bench = docs.map(lambda d, i: {"domain": ["okvqa", "drivelm", "3dsr"][i]}, with_indices=True)
    bench.save_to_disk(tmp_path / "bench")
    monkeypatch.setenv(documents.ENV_DATA, str(tmp_path / "bench"))
    import datasets

    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    assert documents.drivelm_docs(stub)["domain"] == ["drivelm"]
    assert documents.threedsr_docs(stub)["id"] == [docs[2]["id"]]


def test_unparseable_final_response_is_an_error_not_a_zero(hook_settings):
    doc = {"id": "x", "domain": "knowledge", "question": "q?"}
    out = lmms_hooks.process_results(doc, ['{"success": false, "error": "max_agentic_steps_reached"}'])
    assert out["n_error"] == 1 and out["n_scored"] == 0
    assert "max_agentic_steps_reached" in out["edct"]["reason"]
    # a metric the sample does not count for is left out, so lmms-eval's `mean` skips it
    assert not set(scoring.METRIC_NAMES) & set(out)


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
        agentic.append(lmms_hooks.parse_final(doc, outputs[-1]))

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

    monkeypatch.setenv(lmms_hooks.ENV_WORK_DIR, str(tmp_path))
    lmms_hooks.install_settings(None)
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:  # a cache written by schema 1
        conn.execute("PRAGMA user_version=1")
    with pytest.raises(documents.TaskLoadError, match="schema version 1") as err:
        documents.calibration_docs([{"index": 0, "seed": 0}])
    assert err.value.code == 2
    lmms_hooks.install_settings(None)
