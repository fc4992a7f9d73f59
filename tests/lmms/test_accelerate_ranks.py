"""lmms-eval's own data parallelism: ``accelerate launch --num_processes 2`` on CPU (gloo).

lmms-eval shards the documents over the ranks (rank r takes documents r, r+2, …), each rank runs
our agentic task for its share, and rank 0 gathers and writes the results. Both ranks share one
stage cache (``EDCT_WORK_DIR``: SQLite in WAL mode plus content-addressed images). The scores and
every logged sample must equal those of one process.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from support.lmms_helpers import VENV_BIN, offline_env, read_results, read_samples, run_cli
from support.vllm_server import free_port

from edct_task.run.outputs import load_run

pytestmark = pytest.mark.slow
LIMIT = 8
TASK = "edct_calibration"
ARGS = ["--model", "edct_reference", "--model_args", "behavior=mixed:0.5", "--tasks", TASK]
ARGS += ["--limit", str(LIMIT), "--log_samples"]
# accelerate's --cpu needs MPI for more than one process; its torchrun-based launcher works on
# CPU-only machines, where lmms-eval then joins the ranks over gloo
ACCELERATE = ["launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
ACCELERATE += ["--mixed_precision", "no", "--dynamo_backend", "no"]


def _comparable(sample: dict, work_dir: Path) -> str:
    """A logged sample with its run's work dir (image paths) masked."""
    return json.dumps(sample, sort_keys=True).replace(str(work_dir), "<work>")


def test_two_ranks_give_the_scores_and_samples_of_one_process(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    started = time.perf_counter()
    # `python -m`, as accelerate runs it: this checkout's code first on sys.path in both runs
    run_cli(
        [sys.executable, "-m", "lmms_eval", *ARGS, "--output_path", str(one / "out")], offline_env(one), 600
    )
    single_s = time.perf_counter() - started
    started = time.perf_counter()
    launch = [str(VENV_BIN / "accelerate"), *ACCELERATE, "--main_process_port", str(free_port())]
    ranks = run_cli(
        [*launch, "-m", "lmms_eval", *ARGS, "--output_path", str(two / "out")], offline_env(two), 600
    )
    double_s = time.perf_counter() - started
    # printed for the reader, never asserted: a busy machine decides it (docs/guides/multi-process.md)
    print(
        f"\nlmms-eval, {LIMIT} documents: 1 process {single_s:.1f} s, accelerate 2 processes {double_s:.1f} s"
    )
    log = ranks.stdout + ranks.stderr
    assert "Running on rank 0" in log and "Running on rank 1" in log

    r1, r2 = read_results(one / "out"), read_results(two / "out")
    assert r1["results"] == r2["results"]
    assert r2["n-samples"][TASK]["effective"] == LIMIT
    row = r1["results"][TASK]
    assert row["n_scored,none"] + row["n_excluded,none"] == LIMIT and 0 < row["ccs_binary,none"] < 1

    s1, s2 = read_samples(one / "out", TASK), read_samples(two / "out", TASK)
    assert sorted(s["doc_id"] for s in s2) == list(range(LIMIT))
    assert [s["doc_id"] for s in s2] != list(range(LIMIT))  # gathered rank by rank: it was sharded
    by_doc = {s["doc_id"]: s for s in s2}
    assert [_comparable(s, one) for s in s1] == [_comparable(by_doc[s["doc_id"]], two) for s in s1]
    # the two ranks share one EDCT run folder, which every logged sample names: it holds them all
    (run_dir,) = {s["edct"]["run_dir"] for s in s2}
    assert run_dir == str((two / "out" / "edct").resolve())
    loop_one, loop_two = load_run(one / "out" / "edct"), load_run(run_dir)
    assert sorted(r.sample.id for r in loop_two.records) == sorted(r.sample.id for r in loop_one.records)
    assert len(loop_two.records) == LIMIT
