"""`edct run --model …` (the one driver, pipelined) vs `lmms-eval` (agentic loop, one request at a time).

Both run the edct_calibration task on the reference model with simulated latencies: the target
sleeps ``--target-latency`` per generate_until call (per batch, like a batched server), the text
roles and the editor sleep per call (their latency_s option, through an EDCT config file).

    .venv/bin/python benchmarks/bench_lmms.py --n 300

Prints both wall times, the ratio (lmms-eval / edct run), and the floor the edct run is measured
against: max(critical path of one sample at these latencies, CPU seconds of the same edct run
with every latency 0 ÷ cores) (``benchmarks/floor.py``), with the zero-latency run's CPU seconds
per stage and the fixed cost (its CPU seconds outside every stage: imports, the task, the
documents, writing results); beside it the least time the editor and text pools need at their
concurrency limits (``role_throughput_s``), the editor pool's bound with the chains before the
first and after the last edit (``editor_path_s``), and ``floor_with_pools_s``, the largest of all
these lower bounds: 300 edits at 0.5 s with 8 in flight take 18.75 s whatever the CPU does. A run
of ``edct run --model`` cannot call its model before lmms-eval is imported: ``startup_s`` times that
import on its own (``floor.STARTUP``) and ``run_floor_s`` = max(floor with pools, start-up +
editor path) is the least time such a run can take on this machine.
``--editor-concurrency`` raises that limit; ``--lmms-eval-s`` reuses lmms-eval's wall time measured
earlier in the same sitting (to time an older commit's ``edct run`` against the same loop, with
``PYTHONPATH`` pointing at its checkout). Results files land in --out.

Every run starts from empty stage caches: what an earlier run left under ``--out`` (its caches
and outputs) is removed first, so a second run with the same ``--out`` measures the same work
again, not cache hits. ``--resume`` keeps them, and the output then says ``"caches": "reused"``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from floor import (
    cores,
    cpu_seconds,
    critical_path_s,
    editor_path_s,
    per_stage_cpu,
    role_throughput_s,
    slot_cpu_s,
    startup_s,
)

from edct_task.engine.driver import Limits
from edct_task.run.outputs import load_run

BIN = Path(sys.executable).parent
LIMITS = Limits()
BATCH_WINDOW_S = LIMITS.batch_window_s


def config_file(
    folder: Path, text_latency: float, editor_latency: float, editor_concurrency: int | None = None
) -> Path:
    roles = {
        "extractor": {"backend": "calibration-rules", "latency_s": text_latency},
        "judge": {"backend": "calibration-rules", "latency_s": text_latency},
        "edit_parser": {"backend": "calibration-rules", "latency_s": text_latency},
        "editor": {"backend": "calibration-editor", "latency_s": editor_latency},
        "detector": {"backend": "calibration-oracle"},
    }
    config: dict = {"output_dir": str(folder / "edct"), "progress": False, "roles": roles}
    if editor_concurrency is not None:
        config["limits"] = {"editor_concurrency": editor_concurrency}
    path = folder / "edct_bench_config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


RUNS = ("zero", "fast", "lmms")
"""The benchmark's runs: each writes ``<out>/<run>`` and keeps its stage cache in ``<out>/work_<run>``."""


def fresh_folders(out: Path, *, resume: bool) -> str:
    """Remove the caches and outputs an earlier run left under ``out`` (unless ``resume``).

    Returns ``"empty"`` when every run starts from empty caches, ``"reused"`` when ``resume``
    kept caches that were there."""
    found = [out / name for run in RUNS for name in (run, f"work_{run}") if (out / name).exists()]
    found += [p for p in (out / "edct", out / "zero" / "edct") if p.exists()]
    if resume:
        return "reused" if found else "empty"
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return "empty"


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one subprocess, run in ``cwd``: not the
    checkout, whose folder ``python -m`` would put before ``PYTHONPATH`` (an older checkout named
    there for ``--lmms-eval-s`` would not be the code that runs)."""
    start, cpu = time.perf_counter(), cpu_seconds()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return time.perf_counter() - start, cpu_seconds() - cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=300, help="calibration documents (300)")
    p.add_argument("--target-latency", type=float, default=0.2, help="seconds per generate_until call")
    p.add_argument("--text-latency", type=float, default=0.2, help="seconds per extractor/judge/parser call")
    p.add_argument("--editor-latency", type=float, default=0.5, help="seconds per edit")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--resume", action="store_true", help="keep the caches an earlier run left under --out")
    p.add_argument(
        "--editor-concurrency",
        type=int,
        default=None,
        help=f"edits in flight (default: the config default, {LIMITS.editor_concurrency})",
    )
    p.add_argument(
        "--lmms-eval-s",
        type=float,
        default=None,
        help="lmms-eval's wall time measured earlier in the same sitting (e.g. for a run of an older "
        "commit): lmms-eval is not run again and the ratio uses this time",
    )
    a = p.parse_args()
    editor_concurrency = a.editor_concurrency or LIMITS.editor_concurrency
    out = a.out or Path(tempfile.mkdtemp(prefix="bench_lmms_"))
    out.mkdir(parents=True, exist_ok=True)
    caches = fresh_folders(out, resume=a.resume)
    cfg = config_file(out, a.text_latency, a.editor_latency, a.editor_concurrency)

    def common(target_latency: float) -> list[str]:
        return [
            "--model",
            "edct_reference",
            "--model_args",
            f"behavior=faithful,latency_s={target_latency}",
            "--tasks",
            "edct_calibration",
            "--limit",
            str(a.n),
        ]

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

    def edct_run(name: str, config: Path, target_latency: float) -> tuple[float, float]:
        # the module, not the installed `edct` script: an older checkout on PYTHONPATH (for
        # --lmms-eval-s) runs its own entry point, whatever the script was installed from
        edct = [str(BIN / "python"), "-m", "edct_task.cli.main"]
        args = [*edct, "run", "--config", str(config), *common(target_latency)]
        args += ["--output_path", str(out / name), "--no-progress"]
        return timed(
            args, {**env, "EDCT_CONFIG": str(config), "EDCT_WORK_DIR": str(out / f"work_{name}")}, out
        )

    (out / "zero").mkdir(exist_ok=True)
    zero_cfg = config_file(out / "zero", 0.0, 0.0, a.editor_concurrency)
    _, cpu_zero = edct_run("zero", zero_cfg, 0.0)
    t_fast, _ = edct_run("fast", cfg, a.target_latency)
    runs = ["zero", "fast"]
    if a.lmms_eval_s is None:
        t_slow, _ = timed(
            [str(BIN / "lmms-eval"), *common(a.target_latency), "--output_path", str(out / "lmms")],
            {**env, "EDCT_CONFIG": str(cfg), "EDCT_WORK_DIR": str(out / "work_lmms")},
            out,
        )
        runs.append("lmms")
    else:
        t_slow = a.lmms_eval_s
    results = {sub: json.loads(sorted((out / sub).rglob("*_results.json"))[-1].read_text()) for sub in runs}
    zero_calls = load_run(out / "zero").calls  # the run folder its export's logs name
    verify_s = zero_calls["seconds"].get("verify", 0.0) / max(1, zero_calls["calls"].get("verify", 1))
    path = critical_path_s(2, a.target_latency, a.text_latency, a.editor_latency, verify_s, BATCH_WINDOW_S)
    floor = max(path, cpu_zero / cores())
    pools = role_throughput_s(
        zero_calls, a.text_latency, a.editor_latency, LIMITS.text_concurrency, editor_concurrency
    )
    edits = zero_calls["calls"].get("edit", 0)
    edit_cpu = slot_cpu_s(zero_calls, "edit")
    editor_path = editor_path_s(
        edits,
        editor_concurrency,
        a.target_latency,
        a.text_latency,
        a.editor_latency,
        edit_cpu,
        verify_s,
        BATCH_WINDOW_S,
    )
    floor_with_pools = max(floor, *pools.values(), editor_path)
    startup = startup_s(str(BIN / "python"), env)
    run_floor = max(floor_with_pools, startup + editor_path)
    stages_cpu = per_stage_cpu(zero_calls)
    print(
        json.dumps(
            {
                "n": a.n,
                "caches": caches,
                "cores": cores(),
                "load_avg_1min": round(os.getloadavg()[0], 2),
                "latency_s": {"target": a.target_latency, "text": a.text_latency, "editor": a.editor_latency},
                "edct_run_s": round(t_fast, 1),
                "lmms_eval_s": round(t_slow, 1),
                "lmms_eval": "run" if a.lmms_eval_s is None else "given (--lmms-eval-s)",
                "editor_concurrency": editor_concurrency,
                "ratio": round(t_slow / t_fast, 1),
                "zero_latency_cpu_s": round(cpu_zero, 1),
                "critical_path_s": round(path, 2),
                "floor_s": round(floor, 1),
                "edct_run_over_floor": round(t_fast / floor, 2),
                "role_throughput_s": pools,
                "editor_path_s": round(editor_path, 2),
                "floor_with_pools_s": round(floor_with_pools, 1),
                "edct_run_over_floor_with_pools": round(t_fast / floor_with_pools, 2),
                "startup_s": round(startup, 2),
                "run_floor_s": round(run_floor, 1),
                "edct_run_over_run_floor": round(t_fast / run_floor, 2),
                "cpu_s_per_stage_zero_latency": stages_cpu,
                "fixed_cpu_s_zero_latency": round(cpu_zero - sum(stages_cpu.values()), 1),
                "ccs_binary": {
                    sub: results[sub]["results"]["edct_calibration"]["ccs_binary,none"]
                    for sub in runs
                    if sub != "zero"
                },
                "output": str(out),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
