"""Batched lockstep driver vs one sample at a time, on the calibration benchmark.

Simulated latencies stand in for remote models: 200 ms per target call (a batch counts as one
call, as on a batching server), 300 ms per text-LLM call, 1 s per edit. Verification runs for
real. The batched run covers all samples; the one-at-a-time run costs the same for every sample
(nothing overlaps), so it is measured on ``--sequential-samples`` samples and scaled to the full
count (both figures are printed).

    python benchmarks/bench_driver.py [--samples 300] [--sequential-samples 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from edct_task.config import calibration_config, config_from_dict
from edct_task.engine.lockstep import Limits
from edct_task.engine.runner import run


def _config(tmp: Path, name: str, n: int, limits: dict, latencies: dict) -> object:
    base = calibration_config("faithful", n=n, output_dir=tmp / name).model_dump(mode="json")
    base["progress"] = False
    base["limits"] = limits
    base["roles"]["target"]["latency_s"] = latencies["target"]
    for role in ("extractor", "judge", "edit_parser"):
        base["roles"][role]["latency_s"] = latencies["llm"]
    base["roles"]["editor"]["latency_s"] = latencies["editor"]
    return config_from_dict(base)


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
    batched_limits = {
        "target_batch_size": args.samples,
        "text_concurrency": args.text_concurrency,
        "editor_concurrency": args.editor_concurrency,
        "verify_concurrency": 2,
    }
    sequential_limits = Limits.sequential().model_dump()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        batched = run(_config(tmp, "batched", args.samples, batched_limits, latencies))
        t_batched = time.perf_counter() - t0
        t0 = time.perf_counter()
        sequential = run(_config(tmp, "sequential", args.sequential_samples, sequential_limits, latencies))
        t_seq = time.perf_counter() - t0
    per_sample = t_seq / args.sequential_samples
    t_seq_full = per_sample * args.samples
    print(
        json.dumps(
            {
                "samples": args.samples,
                "latencies_s": latencies,
                "batched_wall_s": round(t_batched, 2),
                "batched_calls": batched.results["calls"]["calls"],
                "sequential_measured_samples": args.sequential_samples,
                "sequential_measured_wall_s": round(t_seq, 2),
                "sequential_per_sample_s": round(per_sample, 3),
                "sequential_wall_s_scaled": round(t_seq_full, 1),
                "speedup": round(t_seq_full / t_batched, 1),
                "ccs_binary_batched": batched.results["results"]["overall"]["metrics"]["ccs_binary"][
                    "estimate"
                ],
                "ccs_binary_sequential": sequential.results["results"]["overall"]["metrics"]["ccs_binary"][
                    "estimate"
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
