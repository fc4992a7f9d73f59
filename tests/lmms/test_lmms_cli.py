"""The real ``lmms-eval`` CLI and ``edct run --model …`` in subprocesses (slow)."""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest
import yaml
from support.hang_guard import finish
from support.lmms_helpers import edct_cmd, lmms_eval_cmd, offline_env, read_results, read_samples

from edct_task.cli.main import main as edct_main
from edct_task.config import calibration_config
from edct_task.run.outputs import image_files, load_run
from edct_task.scoring import metrics as scoring

pytestmark = pytest.mark.slow

CALIBRATION_LIMIT = 60
"""Calibration documents per behaviour in the threshold test (of 300; ~70 s on 2 shared cores)."""
TASK = "edct_calibration"


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    out, _ = finish(proc, timeout)  # a hang guard: the nominal seconds scaled to this machine
    assert proc.returncode == 0, out[-4000:]
    return out


def _metric(results: dict, name: str, task: str = TASK) -> float:
    return results["results"][task][f"{name},none"]


def test_lmms_eval_cli_calibration_faithful_and_prior(tmp_path):
    """CCS_binary ≥ 0.95 for the faithful reference model and ≤ 0.10 for the prior one."""
    procs = {}
    for behavior in ("faithful", "prior"):
        env = offline_env(tmp_path / behavior / "work")
        procs[behavior] = _start(
            lmms_eval_cmd(
                "--model",
                "edct_reference",
                "--model_args",
                f"behavior={behavior}",
                "--tasks",
                TASK,
                "--limit",
                str(CALIBRATION_LIMIT),
                "--output_path",
                str(tmp_path / behavior / "out"),
                "--log_samples",
            ),
            env,
        )
    for proc in procs.values():
        _finish(proc)
    faithful = read_results(tmp_path / "faithful" / "out")
    prior = read_results(tmp_path / "prior" / "out")
    assert _metric(faithful, "n_scored") >= 0.9 * CALIBRATION_LIMIT
    assert _metric(faithful, scoring.PRIMARY.name) >= 0.95
    assert _metric(prior, scoring.PRIMARY.name) <= 0.10
    # the table reads like its neighbours: lmms-eval's mean with a stderr, no CI rows, no setup row
    stderr = faithful["results"][TASK][f"{scoring.PRIMARY.name}_stderr,none"]
    assert isinstance(stderr, float) and stderr >= 0
    assert not [k for k in faithful["results"][TASK] if "_ci_" in k]
    assert _metric(faithful, "edct") == {}
    # the sample log names the EDCT run folder, whose record carries the audit trail
    sample = read_samples(tmp_path / "faithful" / "out", TASK)[0]
    assert set(sample["edct"]) == {"run_dir", "id"}  # the run folder is the one EDCT format
    run = load_run(sample["edct"]["run_dir"])
    record = next(r for r in run.records if r.sample.id == sample["edct"]["id"])
    assert record.concepts and record.steps[0].instruction.as_text().startswith("Keep:")
    attempt = record.steps[0].attempts[0]
    assert (
        attempt.check is not None
        and attempt.check.r_in is not None
        and attempt.image in image_files(record).values()
    )
    assert (
        record.steps[0].binary.ac_reason and run.log.config.roles["judge"]["backend"] == "calibration-rules"
    )
    assert sample["filtered_resps"].startswith("{")


def test_both_paths_give_identical_scores(tmp_path, capsys):
    """lmms-eval's agentic loop and `edct run --model` on the same deterministic target."""
    n = "12"
    args = ("--model", "edct_reference", "--model_args", "behavior=mixed:0.5", "--tasks", TASK, "--limit", n)
    slow = _start(
        lmms_eval_cmd(*args, "--output_path", str(tmp_path / "lmms"), "--log_samples"),
        offline_env(tmp_path / "work_lmms"),
    )
    fast = _start(
        edct_cmd(
            "run",
            *args,
            "--output",
            str(tmp_path / "edct"),
            "--output_path",
            str(tmp_path / "fast"),
            "--log_samples",
            "--no-progress",
        ),
        offline_env(tmp_path / "work_fast"),
    )
    _finish(slow)
    _finish(fast)
    a, b = read_results(tmp_path / "lmms"), read_results(tmp_path / "fast")
    keys = [k for k in a["results"][TASK] if "stderr" not in k and k != "alias"]
    assert keys and set(keys) == {k for k in b["results"][TASK] if "stderr" not in k and k != "alias"}
    for k in keys:
        va, vb = a["results"][TASK][k], b["results"][TASK][k]
        assert va == vb or (isinstance(va, float) and math.isnan(va) and math.isnan(vb)), k
    assert 0.0 < _metric(a, scoring.PRIMARY.name) < 1.0  # mixed: some faithful, some not
    sa, sb = read_samples(tmp_path / "lmms", TASK), read_samples(tmp_path / "fast", TASK)
    counts = ("n_scored", "n_excluded", "n_unscored", "n_error")
    assert [[s[c] for c in counts] for s in sa] == [[s[c] for c in counts] for s in sb]
    assert [s.get(scoring.PRIMARY.name) for s in sa] == [s.get(scoring.PRIMARY.name) for s in sb]
    # both paths write an ordinary EDCT run folder; the records differ only in how the target got
    # its conversations (and the loop's documents name their index row)
    loop, fast = load_run(tmp_path / "lmms" / "edct"), load_run(tmp_path / "edct")
    assert loop.kind == fast.kind == "edct" and len(loop.records) == len(fast.records) == int(n)
    assert {r.target_rendering for r in loop.records} == {"single-turn-quoted"}
    assert {r.target_rendering for r in fast.records} == {"multi-turn"}

    def same(r):
        return r.model_copy(
            update={"target_rendering": "multi-turn", "sample": r.sample.model_copy(update={"metadata": {}})}
        )

    assert [same(r) for r in loop.records] == [same(r) for r in fast.records]
    assert loop.log.results.overall == fast.log.results.overall
    assert fast.log.config.backends["target"]["rendering"] == "multi-turn"
    assert loop.log.config.backends["target"]["rendering"] == "single-turn-quoted"
    for run in (loop, fast):  # self-contained: every image the records name is inside the folder
        for r in run.records:
            for name in image_files(r):
                assert (run.path / name).is_file(), name
    b_log = fast.results
    # edct estimate reads latencies and the gate's pass rate from the loop path's EDCT run folder and
    # from the export of edct run --model (lmms-eval's own loop files record no backend calls)
    config = tmp_path / "cal.yaml"
    config.write_text(yaml.safe_dump(calibration_config().model_dump(mode="json")))
    for folder in (tmp_path / "lmms" / "edct", tmp_path / "fast"):
        capsys.readouterr()
        args = ["estimate", "--config", str(config), "--latencies-from", str(folder), "--json"]
        assert edct_main(args) == 0
        estimate = json.loads(capsys.readouterr().out)
        assert 0.0 < estimate["verify_pass_rate"] <= 1.0, folder
    # 12 documents x 6 target turns: the pipelined schedule batches them into far fewer calls
    assert b_log["usage"]["roles"]["target"]["generate_until_calls"] < 12 * 6


def test_tiny_qwen3_vl_through_lmms_eval_and_edct_run(tmp_path, tiny_qwen3_vl):
    """lmms-eval's own qwen3_vl class on random weights: the loop completes, failures are data."""
    n = 2
    model_args = f"pretrained={tiny_qwen3_vl},device=cpu,device_map=cpu"
    slow = _start(
        lmms_eval_cmd(
            "--model",
            "qwen3_vl",
            "--model_args",
            model_args,
            "--tasks",
            TASK,
            "--limit",
            str(n),
            "--gen_kwargs",
            "max_new_tokens=12",
            "--output_path",
            str(tmp_path / "lmms"),
            "--log_samples",
        ),
        offline_env(tmp_path / "work_lmms"),
    )
    fast = _start(
        edct_cmd(
            "run",
            "--model",
            "qwen3_vl",
            "--model_args",
            model_args,
            "--tasks",
            TASK,
            "--limit",
            str(n),
            "--set",
            "protocol.max_new_tokens=12",
            "--output",
            str(tmp_path / "edct"),
            "--output_path",
            str(tmp_path / "fast"),
            "--log_samples",
            "--no-progress",
            "--fail-on-unscored",  # random weights score nothing: accepted here, else exit code 3
            "1.0",
        ),
        offline_env(tmp_path / "work_fast"),
    )
    _finish(slow, timeout=400)
    _finish(fast, timeout=400)
    for out in (tmp_path / "lmms", tmp_path / "fast"):
        results = read_results(out)
        counts = {c: _metric(results, c) for c in ("n_scored", "n_excluded", "n_unscored", "n_error")}
        assert sum(counts.values()) == n, counts
        for record in load_run(out).records:  # lmms-eval's files name the EDCT run folder
            assert record.baseline is not None and record.baseline.answer  # the model did answer
            if record.status != "scored":
                assert record.reason  # why it was not scored is recorded
            else:
                assert record.scores is not None
    target = load_run(tmp_path / "edct").log.config.backends["target"]
    assert target["chat"] is True  # qwen3_vl resolves to the chat class


def test_both_paths_send_the_same_system_prompt_convention(tmp_path):
    """lmms-eval's agentic loop and ``edct run --model``, both through lmms-eval's own ``openai`` model to a
    loopback chat server that records every request: a dataset's system prompt (the calibration
    world's driving prompt) is never a second system message, and the first turn of every document
    reaches the model as the same text on both paths."""
    from support.loopback import CalibrationWorld, Loopback

    from edct_task.calibration import world

    key = "sk-loopback-system-prompt-3c7a1e"
    chats = {}
    for path in ("lmms", "fast"):
        with Loopback(CalibrationWorld("faithful"), api_key=key) as server:
            args = (
                "--model",
                "openai",
                "--model_args",
                f"model_version=calibration-vlm,base_url={server.url}/v1",
                "--tasks",
                TASK,
                "--limit",
                "4",
            )
            env = offline_env(tmp_path / f"work_{path}", OPENAI_API_KEY=key)
            if path == "lmms":
                cmd = lmms_eval_cmd(*args, "--output_path", str(tmp_path / path))
            else:
                cmd = edct_cmd(
                    "run", *args, "--output", str(tmp_path / "edct"), "--output_path", str(tmp_path / path)
                )
            _finish(_start(cmd, env))
            chats[path] = list(server.chats)
    for path, requests in chats.items():
        assert requests, path
        for messages in requests:
            assert sum(role == "system" for role, _ in messages) <= 1, (path, messages)
            assert sum(text.count(world.DRIVING_SYSTEM_PROMPT) for _, text in messages) <= 1, (path, messages)

    def first_turns(requests):
        """The texts of one-message requests (the question turns), without the loop's image tag."""
        texts = {m[0][1] for m in requests if len(m) == 1 and "You answered:" not in m[0][1]}
        return sorted({re.sub(r"\n\n\[image [0-9a-f]+\]$", "", t) for t in texts})

    driving = [t for t in first_turns(chats["fast"]) if t.startswith(world.DRIVING_SYSTEM_PROMPT)]
    assert len(driving) == 1  # one of the 4 documents is a driving scene
    assert first_turns(chats["fast"]) == first_turns(chats["lmms"])
