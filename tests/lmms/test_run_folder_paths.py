"""``--output_path`` means one place on both commands, and a run folder holding another setup's
run is refused on both (real ``edct run --model`` and ``lmms-eval`` subprocesses; slow)."""

from __future__ import annotations

import subprocess

import pytest
from support.hang_guard import hang_limit
from support.lmms_helpers import edct_cmd, lmms_eval_cmd, offline_env, read_results

pytestmark = pytest.mark.slow

ARGS = ("--tasks", "edct_calibration", "--limit", "3")


def _run(args: list[str], env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=hang_limit(300))


def test_output_path_is_one_place_and_another_setup_is_refused_on_both_paths(tmp_path):
    env = offline_env(tmp_path / "work")
    x = tmp_path / "results"
    faithful = ("--model", "edct_reference", "--model_args", "behavior=faithful", *ARGS)
    # 1. edct run --model … --output_path X: the run folder in X/edct, lmms-eval's files in X
    first = _run(edct_cmd("run", *faithful, "--output_path", str(x), "--no-progress"), env, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (x / "edct" / "results.json").is_file() and (x / "edct" / "samples.jsonl").is_file()
    assert read_results(x)["edct"]["run_dir"] == str((x / "edct").resolve())
    assert not (tmp_path / "runs").exists()  # nothing outside X
    kept = (x / "edct" / "results.json").read_bytes()
    # 2. lmms-eval's loop of another setup into the same --output_path: refused in one line, exit 2
    prior = ("--model", "edct_reference", "--model_args", "behavior=prior", *ARGS)
    loop = _run(lmms_eval_cmd(*prior, "--output_path", str(x)), env, tmp_path)
    assert loop.returncode == 2, (loop.stdout + loop.stderr)[-3000:]
    refusals = [line for line in loop.stderr.splitlines() if "holds a run of another setup" in line]
    assert len(refusals) == 1 and "$EDCT_OUTPUT_DIR, or another --output_path" in refusals[0]
    assert (x / "edct" / "results.json").read_bytes() == kept
    # 3. the same setup again (its folder named by --output): resumed with 0 new calls, and its own
    # export folder holds this run's export only
    stale = x / "edct" / "lmms" / "edct_reference" / "20200101_000000_results.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    again = _run(edct_cmd("run", *faithful, "--output", str(x / "edct"), "--no-progress"), env, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert " calls reused from the stage cache, 0 new" in again.stdout
    assert not stale.exists()
    assert read_results(x / "edct" / "lmms")["edct"]["run_dir"] == str((x / "edct").resolve())
