"""`edct estimate`'s predicted wall time vs the measured wall time of the same run.

For each latency mix the calibration benchmark runs for real (``run.runner.run``: the
pipelined driver with threads, simulated latencies through the calibration backends'
``latency_s``, verification for real on the CPU), and ``edct estimate`` predicts it twice:

- ``config``: from the config alone (its ``latency_s`` values; verification at the default
  0.1 s a check);
- ``calibrated``: with ``--latencies-from`` a short warm-up run of the same config
  (``--warmup`` items), as a lab would calibrate on a small run before the big one.

The measured time is the driver's (first request to last record, ``run_samples``), which is what
the estimate simulates; the whole ``run()`` (rendering the calibration images, writing outputs)
is printed beside it. Mix ``lmms`` is ``bench_lmms.py``'s latency setting (target 0.2 s a batch,
text roles 0.2 s, editor 0.5 s, default limits: what `edct run --model` uses). The machine's
load average is printed with each measurement: wall times on a shared machine are noisy.

    python benchmarks/bench_estimate.py [--mixes lmms,editor,target] [--n 150]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from edct_task.config import calibration_config, config_from_dict
from edct_task.estimate.latency import from_run
from edct_task.estimate.plan import estimate
from edct_task.run import runner

MIXES: dict[str, dict[str, Any]] = {
    "lmms": {"latency": {"target": 0.2, "text": 0.2, "editor": 0.5}, "limits": {}, "n": 150},
    "editor": {
        "latency": {"target": 0.1, "text": 0.1, "editor": 1.5},
        "limits": {"editor_concurrency": 4},
        "n": 60,
    },
    "target": {
        "latency": {"target": 0.8, "text": 0.3, "editor": 0.3},
        "limits": {"target_batch_size": 8},
        "n": 60,
    },
    # text-bound; the calibration world repeats prompts, so how many text calls a run makes
    # depends on how many items it has (a 30-item warm-up undercounts the repeats of 60 items)
    "text": {
        "latency": {"target": 0.5, "text": 0.6, "editor": 0.2},
        "limits": {"text_concurrency": 4, "target_batch_size": 16},
        "n": 60,
    },
}
DEFAULT_MIXES = ("lmms", "editor", "target")


def _config(folder: Path, n: int, mix: dict[str, Any]) -> Any:
    raw = calibration_config("faithful", n=n, output_dir=folder).model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    raw["limits"] = dict(mix["limits"])
    lat = mix["latency"]
    raw["roles"]["target"]["latency_s"] = lat["target"]
    for role in ("extractor", "judge", "edit_parser"):
        raw["roles"][role]["latency_s"] = lat["text"]
    raw["roles"]["editor"]["latency_s"] = lat["editor"]
    return config_from_dict(raw)


def _measure(config: Any) -> dict[str, float]:
    driver: dict[str, float] = {}
    original = runner.run_samples

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            driver["s"] = time.perf_counter() - start

    load_before = os.getloadavg()[0]
    runner.run_samples = timed  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        runner.run(config)
        total = time.perf_counter() - start
    finally:
        runner.run_samples = original  # type: ignore[assignment]
    return {
        "driver_s": driver["s"],
        "run_s": total,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mixes", default=",".join(DEFAULT_MIXES), help="comma-separated: " + ", ".join(MIXES))
    p.add_argument("--n", type=int, default=None, help="items per mix (default: per mix, 150 or 60)")
    p.add_argument("--warmup", type=int, default=30, help="items of the calibration run (30)")
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_estimate_") as tmp_name:
        tmp = Path(tmp_name)
        for name in a.mixes.split(","):
            mix = MIXES[name]
            n = a.n or mix["n"]
            warm = tmp / f"{name}-warmup"
            warm_measured = _measure(_config(warm, a.warmup, mix))
            config = _config(tmp / name, n, mix)
            t0 = time.perf_counter()
            plain = estimate(config, n, what_if=False)
            calibrated = estimate(config, n, run=from_run(warm), what_if=False)
            estimate_s = time.perf_counter() - t0
            measured = _measure(config)
            m = measured["driver_s"]
            rows.append(
                {
                    "mix": name,
                    "n": n,
                    "latency_s": mix["latency"],
                    "limits": mix["limits"],
                    "measured_driver_s": round(m, 1),
                    "measured_run_s": round(measured["run_s"], 1),
                    "predicted_config_s": round(plain.wall_s, 1),
                    "error_config": f"{(plain.wall_s - m) / m:+.1%}",
                    "predicted_calibrated_s": round(calibrated.wall_s, 1),
                    "error_calibrated": f"{(calibrated.wall_s - m) / m:+.1%}",
                    "bottleneck": calibrated.bottleneck,
                    "busy": {k: round(v, 2) for k, v in calibrated.busy.items()},
                    "verify_pass_rate_from_warmup": round(calibrated.verify_pass_rate, 3),
                    "estimate_cpu_s_both": round(estimate_s, 2),
                    "warmup_run_s": round(warm_measured["run_s"], 1),
                    "load_avg_1min": [round(measured["load_before"], 2), round(measured["load_after"], 2)],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print(f"cores: {len(os.sched_getaffinity(0))}")


if __name__ == "__main__":
    main()
