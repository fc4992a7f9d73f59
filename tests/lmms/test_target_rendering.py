"""What a real lmms-eval chat model receives on each path, and what the records say about it.

lmms-eval's own ``qwen3_vl`` class (a tiny random Qwen3-VL, in this process) is run on one
calibration document by ``edct run --model`` and by lmms-eval's own evaluator (the loop path); its
``generate_until`` is wrapped to record every request's messages as the model would read them.
"""

from __future__ import annotations

import json

import pytest
import yaml

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.lmms import settings as lmms_settings
from edct_task.reporting.sources import collect
from edct_task.run.outputs import load_run

pytestmark = pytest.mark.slow

MODEL_ARGS = "pretrained={},device=cpu,device_map=cpu"


def _recorded(monkeypatch) -> list[list[dict]]:
    """Every request's messages, as the chat model gets them from ``doc_to_messages``."""
    from lmms_eval.models import get_model

    cls = get_model("qwen3_vl")
    original = cls.generate_until
    seen: list[list[dict]] = []

    def generate_until(self, requests):
        for req in requests:
            _ctx, doc_to_messages, _kw, doc_id, task, split = req.args
            messages = doc_to_messages(self.task_dict[task][split][doc_id])
            seen.append(
                [
                    {
                        "role": m["role"],
                        "images": sum(c["type"] == "image" for c in m["content"]),
                        "text": "".join(c.get("text", "") for c in m["content"] if c["type"] == "text"),
                    }
                    for m in messages
                ]
            )
        return original(self, requests)

    monkeypatch.setattr(cls, "generate_until", generate_until)
    return seen


def _call_stages(path) -> set[str]:
    return {json.loads(line)["stage"] for line in path.read_text().splitlines() if line.strip()}


def test_the_two_paths_send_a_chat_model_what_their_records_say(tmp_path, monkeypatch, tiny_qwen3_vl):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model_args = MODEL_ARGS.format(tiny_qwen3_vl)
    seen = _recorded(monkeypatch)

    # edct run --model: the real conversation, the image on the first user turn
    fast_out = tmp_path / "edct"
    args = ["run", "--model", "qwen3_vl", "--model_args", model_args, "--tasks", "edct_calibration"]
    args += [
        "--limit",
        "1",
        "--set",
        "protocol.max_new_tokens=8",
        "--set",
        f"call_log={tmp_path / 'fast.jsonl'}",
    ]
    args += [
        "--set",
        f"cache_dir={tmp_path / 'cache-fast'}",
        "--output",
        str(fast_out),
        "--no-progress",
        "--log_samples",
    ]
    assert main([*args, "--fail-on-unscored", "1.0"]) == 0
    fast_requests, seen[:] = list(seen), []
    why = [m for m in fast_requests if len(m) == 3]
    assert why and all([t["role"] for t in m] == ["user", "assistant", "user"] for m in why)
    assert all(m[0]["images"] == 1 and m[2]["images"] == 0 for m in why)
    assert all("Earlier in this conversation" not in t["text"] for m in fast_requests for t in m)

    # lmms-eval's own evaluator on the task: one user turn per round, the history quoted in it
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager

    from task_configs import TASK_DIR

    config = calibration_config(output_dir=tmp_path / "unused").model_dump(mode="json")
    config["call_log"] = str(tmp_path / "loop.jsonl")
    config["protocol"]["max_new_tokens"] = 8
    (tmp_path / "edct.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv(lmms_settings.ENV_CONFIG, str(tmp_path / "edct.yaml"))
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    monkeypatch.setenv(lmms_settings.ENV_OUTPUT_DIR, str(tmp_path / "loop"))
    try:
        simple_evaluate(
            model="qwen3_vl",
            model_args=model_args,
            tasks=["edct_calibration"],
            limit=1,
            gen_kwargs="max_new_tokens=8",
            task_manager=TaskManager("WARNING", include_path=str(TASK_DIR), include_defaults=False),
        )
    finally:
        lmms_settings.release()
    loop_requests = list(seen)
    assert loop_requests and all([t["role"] for t in m] == ["user"] for m in loop_requests)
    quoted = [m[0]["text"] for m in loop_requests if "Earlier in this conversation" in m[0]["text"]]
    assert quoted and all("You answered:" in t and "\n> " in t for t in quoted)

    # the records, the run logs and the setup identities say which rendering each run had
    fast, loop = load_run(fast_out), load_run(tmp_path / "loop")
    assert [r.target_rendering for r in fast.records] == ["multi-turn"]
    assert [r.target_rendering for r in loop.records] == ["single-turn-quoted"]
    assert '"target_rendering"' not in (fast_out / "samples.jsonl").read_text()  # the default, not written
    assert fast.log.config.backends["target"]["rendering"] == "multi-turn"
    assert loop.log.config.backends["target"]["driver"] == "lmms-eval agentic loop"
    runs = [run for m in collect([fast_out, tmp_path / "loop"]).models.values() for run in m.edct]
    by_loop = {"loop" in run.source: run for run in runs}
    # one run, read once: the export inside the run folder is not a second run
    assert len(runs) == 2 and {run.kind for run in runs} == {"edct-run"}
    assert by_loop[True].setup["target_rendering"] == "single-turn-quoted"
    assert "target_rendering" not in by_loop[False].setup
    # the export (lmms-eval's files, read alone) is the same setup as the run itself
    (export,) = [run for m in collect([fast_out / "lmms"]).models.values() for run in m.edct]
    assert export.kind == "lmms-eval" and export.setup_id == by_loop[False].setup_id

    # the call log is written on both paths (the runner's composition root builds both dispatchers)
    assert {"concepts", "instructions"} <= _call_stages(tmp_path / "fast.jsonl")
    assert {"concepts", "instructions"} <= _call_stages(tmp_path / "loop.jsonl")
    assert "target" in _call_stages(tmp_path / "fast.jsonl")  # lmms-eval calls the target itself on the loop
