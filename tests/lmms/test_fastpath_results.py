"""The fast path's lmms-eval results are lmms-eval's: the same documents and final responses given
to lmms-eval's own ``evaluate`` (its agentic loop replaced by the responses the fast path
produced) give the same results dict — metrics, stderr, groups, higher_is_better, n-samples."""

from __future__ import annotations

import json
import math

import pytest

from edct_task.config import calibration_config
from edct_task.lmms import settings as lmms_settings
from edct_task.lmms.fastpath import build_model, run_fastpath
from edct_task.lmms.results import final_response

pytestmark = pytest.mark.slow
LIMIT = 6


def _same(a, b, path=""):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (path, sorted(set(a) ^ set(b)))
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
        return
    assert a == b, (path, a, b)


@pytest.mark.parametrize("tasks", ["edct_calibration"])
def test_fast_path_results_equal_lmms_evals_own_evaluate(tmp_path, monkeypatch, tasks):
    import lmms_eval.evaluator as evaluator
    from lmms_eval.tasks import TaskManager, get_task_dict

    from edct_task.lmms.plugin import task_dir

    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    config = calibration_config(output_dir=tmp_path / "run").model_copy(update={"progress": False})
    lm = build_model("edct_reference", "behavior=mixed:0.5")
    fast = run_fastpath(
        "edct_reference",
        "behavior=mixed:0.5",
        tasks,
        config=config,
        output_path=tmp_path / "fast",
        limit=LIMIT,
        lm=lm,
    )
    by_id = {r.sample.id: r for r in fast.records}

    def replay(lm, requests, **_kwargs):  # lmms-eval's loop, answered with the fast path's responses
        docs = {name: task.eval_docs for name, task in task_dict.items()}
        return [
            final_response(by_id[str(docs[r.metadata["task"]][r.metadata["doc_id"]]["id"])]) for r in requests
        ]

    monkeypatch.setattr(evaluator, "_run_generate_until_agentic", replay)
    manager = TaskManager("WARNING", include_path=task_dir(), model_name="edct_reference")
    task_dict = get_task_dict(manager.match_tasks([tasks]), manager)
    try:
        own = evaluator.evaluate(lm=lm, task_dict=task_dict, limit=LIMIT, log_samples=True)
    finally:
        lmms_settings.release()
    for key in ("results", "groups", "group_subtasks", "versions", "n-shot", "higher_is_better", "n-samples"):
        assert (key in own) == (key in fast.results), key
        if key in own:
            _same(
                json.loads(json.dumps(own[key], default=str)),
                json.loads(json.dumps(fast.results[key], default=str)),
                key,
            )
    for task, samples in own["samples"].items():
        mine = {s["doc_id"]: s for s in fast.samples[task]}
        for s in samples:  # every logged per-document metric, the audit digest included
            for key in s:
                # not compared: what the model was sent and its token counts (no model ran here);
                # doc_hash: lmms-eval 0.7.3 hashes an agentic request's `doc`, which is None for
                # every document, where the fast path hashes the document itself
                if key not in ("arguments", "token_counts", "input_media", "resps", "doc_hash"):
                    _same(s[key], mine[s["doc_id"]][key], f"{task}.{s['doc_id']}.{key}")
