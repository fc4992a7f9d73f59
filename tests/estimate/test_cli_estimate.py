"""``edct estimate`` end to end: a shipped preset by name, prices, a finished run's latencies,
and user errors that exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.estimate.presets import PRESET_DIR
from edct_task.run.runner import run


def _run_with_calls(folder: Path, calls: dict) -> Path:
    """An ``edct run`` folder whose run log records these call statistics."""
    from support.edct_runs import records, write_edct_run

    write_edct_run(folder, records(1.0, n=2))
    results = json.loads((folder / "results.json").read_text())
    (folder / "results.json").write_text(json.dumps({**results, "calls": calls}))
    return folder


def _estimate(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["estimate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_shipped_preset_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    out = _estimate(capsys, "--config", "paper-qwen3-judge-flux2-max", "--n", "30", "--verify-pass-rate", "1")
    roles = {r["role"]: r for r in out["roles"]}
    assert out["n"] == 30 and out["statuses"] == {"scored": 30}
    assert roles["target"]["conversations"] == 30 * 6 and roles["target"]["images"] == 30 * 6
    assert roles["editor"]["calls"] == 60 and roles["detector"]["calls"] == 60
    # the samples' judge calls and the known-answer controls' (16 steps, binary and graded)
    assert roles["judge"]["calls"] == 30 * 2 * 2 + roles["judge"]["controls"] == 30 * 2 * 2 + 16 * 2
    assert out["bottleneck"] in out["busy_fraction"] and out["wall_s"] > 0
    assert [w["label"] for w in out["what_if"]][:2] == ["editor_concurrency 4", "editor_concurrency 16"]


def test_text_report_names_the_bottleneck(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--config", "local-vllm-cluster", "--n", "20", "--no-what-if"]) == 0
    text = capsys.readouterr().out
    assert "bottleneck: editor" in text  # one diffusers editor at 40 s an edit
    assert "cost: unknown (no prices:)" in text


def test_cost_from_the_roles_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = yaml.safe_load((PRESET_DIR / "paper-qwen3-judge-flux2-max.yaml").read_text())
    raw["roles"]["judge"] = {
        **raw["roles"]["judge"],
        "prices": {"input_per_million": 2.0, "output_per_million": 8.0},
    }
    path = tmp_path / "priced.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = _estimate(capsys, "--config", str(path), "--n", "10", "--no-what-if")
    judge = next(r for r in out["roles"] if r["role"] == "judge")
    assert judge["cost_usd"] == pytest.approx(
        (judge["prompt_tokens"] * 2.0 + judge["completion_tokens"] * 8.0) / 1e6
    )
    assert judge["max_cost_usd"] > judge["cost_usd"]
    assert out["cost_usd"] == pytest.approx(judge["cost_usd"], abs=0.006)  # the only priced role


def test_latencies_from_a_finished_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = calibration_config("faithful", n=6, output_dir=tmp_path / "run")
    raw = cfg.model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    raw["roles"]["editor"]["latency_s"] = 0.05
    config_path = tmp_path / "cfg.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    from edct_task.config import load_config

    outcome = run(load_config(config_path))
    calls = outcome.results["calls"]
    out = _estimate(
        capsys, "--config", str(config_path), "--latencies-from", str(tmp_path / "run"), "--n", "6"
    )
    editor = next(r for r in out["roles"] if r["role"] == "editor")
    assert "run: mean of" in editor["latency"]
    wall = calls["seconds"]["edit"] / calls["calls"]["edit"]
    # the CPU an edit does in the editor's slot: storing the image runs after the slot is freed
    assert calls["local_cpu_seconds"]["edit"] > 0
    cpu = (calls["cpu_seconds"]["edit"] - calls["local_cpu_seconds"]["edit"]) / calls["calls"]["edit"]
    assert f"{wall - cpu:.3g} s + {cpu * 1000:.3g} ms CPU" in editor["latency"]
    assert wall >= 0.05
    assert 0.0 < out["verify_pass_rate"] <= 1.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config", "no-such-preset"], "no shipped preset of that name"),
        (["--config", "paper-qwen3-judge-flux2-max", "--set", "limits.schedule=lockstep"], "pipelined"),
        (["--config", "paper-qwen3-judge-flux2-max", "--latency", "painter=3"], "the role must be one of"),
        (["--config", "paper-qwen3-judge-flux2-max", "--latencies-from", "/nonexistent"], "does not exist"),
    ],
)
def test_user_errors_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", *args, "--n", "2"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_runs_call_log_gives_the_latency_distribution(tmp_path: Path) -> None:
    from edct_task.estimate.latency import from_run

    run_dir = tmp_path / "run"
    calls = {"calls": {"edit": 6}, "seconds": {"edit": 6 * 2.0}, "cpu_seconds": {"edit": 0.0}}
    _run_with_calls(run_dir, calls)
    log = [{"key": str(i), "stage": "edit", "seconds": s} for i, s in enumerate([1, 1, 1, 1, 1, 7])]
    (run_dir / "calls.jsonl").write_text("".join(json.dumps(row) + "\n" for row in log))
    stats = from_run(run_dir)
    edit = stats.per_stage["edit"]
    assert edit.seconds == 2.0 and sorted(edit.observed) == [1, 1, 1, 1, 1, 7]
    import random

    draws = [edit.draw(random.Random(i))[0] for i in range(200)]
    assert set(draws) == {1.0, 7.0}  # resampled from the calls, not the mean


def test_without_n_a_dataset_config_counts_its_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.calibration_dataset import write_calibration_dataset

    write_calibration_dataset(tmp_path / "bench", 7)
    raw = calibration_config("faithful").model_dump(mode="json")
    raw["data"] = {"source": "dataset", "path": str(tmp_path / "bench"), "limit": 5}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert _estimate(capsys, "--config", str(path), "--no-what-if")["n"] == 5
    raw["data"].pop("limit")
    path.write_text(yaml.safe_dump(raw))
    assert _estimate(capsys, "--config", str(path), "--no-what-if")["n"] == 7


def test_a_judge_panel_with_self_consistency_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = calibration_config("faithful").model_dump(mode="json")
    raw["roles"]["judge"] = [{"backend": "calibration-rules"}] * 3
    raw["protocol"] = {"k": 2, "judge_samples": 3, "judge_temperature": 0.7}
    path = tmp_path / "panel.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = _estimate(capsys, "--config", str(path), "--n", "10", "--verify-pass-rate", "1", "--no-what-if")
    judge = next(r for r in out["roles"] if r["role"] == "judge")
    assert judge["members"] == 3
    # items x steps x judges x samples x (binary, graded), plus the known-answer controls
    # (protocol.controls, 16 by default): controls x judges x samples x (binary, graded)
    assert judge["controls"] == 16 * 3 * 3 * 2
    assert judge["calls"] == 10 * 2 * 3 * 3 * 2 + 16 * 3 * 3 * 2


def test_a_resumed_runs_cache_hits_are_not_taken_for_repeated_prompts(tmp_path: Path) -> None:
    from edct_task.estimate.latency import from_run

    calls = {"calls": {"target": 60, "judge": 10}, "seconds": {"target": 6.0, "judge": 10.0}}
    fresh = {**calls, "cache_hits": {"judge": 30}}
    resumed = {**calls, "cache_hits": {"judge": 30, "target": 40}}
    for name, block in (("fresh", fresh), ("resumed", resumed)):
        _run_with_calls(tmp_path / name, block)
    assert from_run(tmp_path / "fresh").hit_rates == {"judge": 0.75}
    assert from_run(tmp_path / "resumed").hit_rates == {}


def test_latencies_from_an_lmms_eval_output_folder_give_the_pass_rate(tmp_path: Path) -> None:
    """An lmms-eval output folder (our task's logged samples name the EDCT run folder, which holds
    the records and the calls) is read through ``load_run``: the old reader looked for an
    ``edct_record`` key that nothing writes and gave no pass rate."""
    from support.edct_runs import records
    from support.lmms_output import EdctTask, write_lmms_output

    from edct_task.estimate.latency import from_run

    recs = records(0.5, n=4)  # every step checked: passing steps pass, failing ones too (one fails)
    run_dir = tmp_path / "elsewhere" / "edct"
    write_lmms_output(
        tmp_path / "lmms",
        model="edct_reference",
        model_args="",
        tasks=[EdctTask("edct_calibration", recs)],
        run_dir=run_dir,
    )
    run = json.loads((run_dir / "results.json").read_text())
    run["calls"] = {"calls": {"edit": 4, "verify": 4}, "seconds": {"edit": 8.0, "verify": 0.4}}
    (run_dir / "results.json").write_text(json.dumps(run))
    stats = from_run(tmp_path / "lmms")
    checks = [a.check.passed for r in recs for s in r.steps for a in s.attempts if a.check is not None]
    assert checks and stats.verify_pass_rate == pytest.approx(sum(checks) / len(checks))
    assert stats.per_stage["edit"].seconds == 2.0


def _hostile(root: Path, case: str) -> Path:
    """A run folder that is broken in one way."""
    from support.edct_runs import records, write_edct_run

    folder = root / case
    if case == "missing":
        return folder
    write_edct_run(folder, records(1.0, n=2))
    results, samples = folder / "results.json", folder / "samples.jsonl"
    if case == "results-a-list":
        results.write_text("[1, 2]")
    elif case == "results-not-json":
        results.write_text("{not json")
    elif case == "results-bad-bytes":
        results.write_bytes(b'{"a": "\xff"}')
    elif case == "results-deep":
        results.write_text("[" * 100_000 + "]" * 100_000)
    elif case == "results-nan":
        results.write_text(results.read_text().replace('"wall_seconds": 1.0', '"wall_seconds": NaN'))
    elif case == "results-a-folder":
        results.unlink()
        results.mkdir()
    elif case == "results-a-link":
        target = folder / "elsewhere.json"
        results.rename(target)
        results.symlink_to(target)
    elif case == "results-a-fifo":
        results.unlink()
        import os

        os.mkfifo(results)
    elif case == "samples-bad-line":
        samples.write_text("{}\n")
    elif case == "samples-missing":
        samples.unlink()
    elif case == "calls-a-string":
        data = json.loads(results.read_text())
        results.write_text(json.dumps({**data, "calls": {"calls": "many"}}))
    elif case == "calls-bad-numbers":
        data = json.loads(results.read_text())
        results.write_text(json.dumps({**data, "calls": {"calls": {"edit": "6"}, "seconds": {"edit": -1}}}))
    elif case == "calls-huge":
        data = json.loads(results.read_text())
        results.write_text(json.dumps({**data, "calls": {"calls": {"edit": 10**400 // 10**399}}}))
        results.write_text(results.read_text().replace('"edit": 10', '"edit": 1' + "0" * 5000))
    elif case == "call-log-garbage":
        data = json.loads(results.read_text())
        results.write_text(json.dumps({**data, "calls": {"calls": {"edit": 1}, "seconds": {"edit": 1.0}}}))
        (folder / "calls.jsonl").write_bytes(b"\xff\xfe[[[\n{}\n")
    return folder


HOSTILE = [
    "missing",
    "results-a-list",
    "results-not-json",
    "results-bad-bytes",
    "results-deep",
    "results-nan",
    "results-a-folder",
    "results-a-link",
    "results-a-fifo",
    "samples-bad-line",
    "samples-missing",
    "calls-a-string",
    "calls-bad-numbers",
    "calls-huge",
    "call-log-garbage",
]


@pytest.mark.parametrize("case", HOSTILE)
def test_latencies_from_a_hostile_folder_is_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _hostile(tmp_path, case)
    rc = main(
        ["estimate", "--config", "paper-qwen3-judge-flux2-max", "--latencies-from", str(folder), "--n", "2"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert str(folder) in err or (case == "missing" and "does not exist" in err), err
