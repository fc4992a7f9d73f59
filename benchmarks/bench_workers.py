"""Sweep throughput on 1, 2 and 4 local workers (Ray tasks) for a latency-bound mix.

    python benchmarks/bench_workers.py [--n 4] [--jobs 4] [--workers 1 2 4] [--local-too]

A sweep of ``--jobs`` equal jobs (as many models with the same target, ``--n`` calibration items
each) runs on a local Ray cluster of N worker CPUs (each job asks for one), so N jobs run at once.
Equal jobs measure the workers; the hash slices of one small run are unequal (16 items in 4
slices: 2, 6, 5 and 3), so their makespan would measure the largest slice.
The calibration backends sleep per call (``latency_s``: target 3 s per batch, text models 1.5 s,
editor 3 s) with one call in flight per role, so a job's wall time is its models' latency, not
this machine's cores (a job's process uses a few CPU-seconds in a minute). Printed per N: the
jobs' wall time (from the first submission to the last job's end; the Ray cluster's start and its
N worker processes' start are outside it), items per second and the speed-up over N = 1, all
from the one sitting. Every N's merged run is checked byte-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import yaml

from edct_task.config import calibration_config
from edct_task.scale.execute import LocalExecutor, RayExecutor, merge_groups, run_jobs
from edct_task.scale.sweep import expand

LATENCY = {"target": 3.0, "text": 1.5, "editor": 3.0}


def write_sweep(folder: Path, n: int, jobs: int) -> Path:
    raw = calibration_config("mixed:0.5", n=n).model_dump(mode="json")
    raw.pop("output_dir")
    for role in ("extractor", "judge", "edit_parser"):
        raw["roles"][role]["latency_s"] = LATENCY["text"]
    raw["roles"]["editor"]["latency_s"] = LATENCY["editor"]
    raw["limits"].update(
        text_concurrency=1,
        editor_concurrency=1,
        target_concurrency=1,
        target_batch_size=2,
        verify_concurrency=1,
    )
    (folder / "latency.yaml").write_text(yaml.safe_dump(raw))
    target = {"backend": "calibration-reference", "behavior": "mixed:0.5", "latency_s": LATENCY["target"]}
    models = {f"m{i}": target for i in range(jobs)}
    spec = {"output": "out", "configs": {"latency": "latency.yaml"}, "models": models, "shards": 1}
    (folder / "sweep.yaml").write_text(yaml.safe_dump(spec))
    return folder / "sweep.yaml"


def _ready() -> int:
    import edct_task.scale.execute  # noqa: F401  (what a job's task imports)

    time.sleep(2)  # all N at once: N distinct worker processes
    return os.getpid()


def warm(executor: RayExecutor, workers: int) -> None:
    """Start the cluster's N worker processes before the clock starts (Ray starts them lazily)."""
    ray = executor.ray
    ready = ray.remote(num_cpus=1)(_ready)
    pids = ray.get([ready.remote() for _ in range(workers)])
    assert len(set(pids)) == workers, pids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="calibration items of each job")
    ap.add_argument("--jobs", type=int, default=4, help="equal jobs in the sweep")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker counts to measure")
    ap.add_argument("--local-too", action="store_true", help="also time the sequential local executor")
    args = ap.parse_args()
    rows, samples = [], {}
    with tempfile.TemporaryDirectory(prefix="edct-bench-workers-") as tmp:
        for workers in [*args.workers, *(["local"] if args.local_too else [])]:
            folder = Path(tmp) / f"w{workers}"
            folder.mkdir()
            sweep = expand(write_sweep(folder, args.n, args.jobs))
            executor = LocalExecutor() if workers == "local" else RayExecutor(num_cpus=workers)
            if workers != "local":
                warm(executor, workers)
            started = time.perf_counter()
            run_jobs(sweep.jobs, executor, retries=0, say=lambda _line: None)
            wall = time.perf_counter() - started
            merge_groups(sweep, say=lambda _line: None)
            samples[workers] = {(g.output / "samples.jsonl").read_bytes() for g in sweep.groups}
            rows.append((workers, wall))
            print(f"workers={workers}: {len(sweep.jobs)} jobs, {wall:.1f} s", flush=True)
    base = rows[0][1]
    items = args.n * args.jobs
    print(f"\n{args.jobs} jobs of {args.n} items, latency-bound mix {json.dumps(LATENCY)}")
    print(f"{'workers':>8} {'wall s':>8} {'items/s':>8} {'speed-up':>9} {'≥0.9·N':>7}")
    for workers, wall in rows:
        speed = base / wall
        ok = "" if workers == "local" else ("yes" if speed >= 0.9 * int(workers) else "NO")
        print(f"{workers!s:>8} {wall:8.1f} {items / wall:8.2f} {speed:9.2f} {ok:>7}")
    same = len({b for found in samples.values() for b in found}) == 1
    print("every job's samples.jsonl identical, at every worker count:", same)


if __name__ == "__main__":
    main()
