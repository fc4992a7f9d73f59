"""Pipelined vs lockstep vs one sample at a time, on the calibration benchmark, against the floor.

Simulated latencies stand in for remote models: 200 ms per target call (a batch counts as one
call, as on a batching server), 300 ms per text-LLM call, 1 s per edit. Verification runs for
real. The floor is max(critical path of one sample, CPU seconds of a zero-latency run ÷ cores)
(``benchmarks/floor.py``). The one-at-a-time run costs the same for every sample (nothing
overlaps), so it is measured on ``--sequential-samples`` samples and scaled.

    python benchmarks/bench_driver.py [--samples 300] [--sequential-samples 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from floor import cores, cpu_seconds, critical_path_s, per_stage_cpu

from edct_task.config import calibration_config, config_from_dict
from edct_task.engine.driver import Limits
from edct_task.run.runner import run


def _config(tmp: Path, name: str, n: int, limits: dict, latencies: dict) -> Any:
    base = calibration_config("faithful", n=n, output_dir=tmp / name).model_dump(mode="json")
    base["progress"] = False
    base["limits"] = limits
    base["roles"]["target"]["latency_s"] = latencies["target"]
    for role in ("extractor", "judge", "edit_parser"):
        base["roles"][role]["latency_s"] = latencies["llm"]
    base["roles"]["editor"]["latency_s"] = latencies["editor"]
    return config_from_dict(base)


def _timed(config: Any) -> tuple[Any, float, float]:
    t0, c0 = time.perf_counter(), cpu_seconds()
    outcome = run(config)
    return outcome, time.perf_counter() - t0, cpu_seconds() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--sequential-samples", type=int, default=20)
    parser.add_argument("--target-latency", type=float, default=0.2)
    parser.add_argument("--llm-latency", type=float, default=0.3)
    parser.add_argument("--editor-latency", type=float, default=1.0)
    parser.add_argument("--text-concurrency", type=int, default=64)
    parser.add_argument("--editor-concurrency", type=int, default=32)
    args = parser.parse_args()
    latencies = {"target": args.target_latency, "llm": args.llm_latency, "editor": args.editor_latency}
    zero = {"target": 0.0, "llm": 0.0, "editor": 0.0}
    batched = {
        "target_batch_size": args.samples,
        "text_concurrency": args.text_concurrency,
        "editor_concurrency": args.editor_concurrency,
        "verify_concurrency": 2,
    }
    out: dict[str, Any] = {"samples": args.samples, "latencies_s": latencies, "cores": cores()}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        free, t_free, cpu_free = _timed(_config(tmp, "zero", args.samples, batched, zero))
        pipe, t_pipe, _ = _timed(_config(tmp, "pipelined", args.samples, batched, latencies))
        lock, t_lock, _ = _timed(
            _config(tmp, "lockstep", args.samples, {**batched, "schedule": "lockstep"}, latencies)
        )
        seq_limits = Limits.sequential().model_dump()
        _, t_seq, _ = _timed(_config(tmp, "sequential", args.sequential_samples, seq_limits, latencies))
    calls = free.results["calls"]
    verify_s = calls["seconds"].get("verify", 0.0) / max(1, calls["calls"].get("verify", 1))
    window = Limits().batch_window_s
    path = critical_path_s(2, latencies["target"], latencies["llm"], latencies["editor"], verify_s, window)
    floor = max(path, cpu_free / cores())
    t_seq_full = t_seq / args.sequential_samples * args.samples
    out.update(
        {
            "pipelined_wall_s": round(t_pipe, 1),
            "lockstep_wall_s": round(t_lock, 1),
            "sequential_wall_s_scaled": round(t_seq_full, 1),
            "zero_latency_wall_s": round(t_free, 1),
            "zero_latency_cpu_s": round(cpu_free, 1),
            "critical_path_s": round(path, 2),
            "floor_s": round(floor, 1),
            "pipelined_over_floor": round(t_pipe / floor, 2),
            "lockstep_over_floor": round(t_lock / floor, 2),
            "speedup_vs_sequential": round(t_seq_full / t_pipe, 1),
            "cpu_s_per_stage_zero_latency": per_stage_cpu(calls),
            "ccs_binary": {
                name: o.results["results"]["overall"]["metrics"]["ccs_binary"]["estimate"]
                for name, o in (("pipelined", pipe), ("lockstep", lock))
            },
        }
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
