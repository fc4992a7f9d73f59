"""The calibration benchmark as --shard jobs on a local Ray cluster, merged, against one run.

    python benchmarks/shards_ray.py [--n 300] [--shards 4] [--kill-after 150] [--single DIR]

1. The unsharded run (``edct run``; or ``--single DIR``, a finished run of the same setup).
2. A sweep of one model into ``--shards`` jobs as Ray tasks, merged: ``samples.jsonl`` compared
   byte for byte, ``results.json``'s statistics compared.
3. The same sweep in a fresh folder while shard 1's process is killed (SIGKILL) once its stage
   cache holds ``--kill-after`` finished calls: the sweep retries it, the retry resumes from the
   stage cache the killed try left (its calls and cache hits are printed beside those of the
   unkilled shard 1), and the merge is compared again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

from edct_task.config import calibration_config
from edct_task.scale.execute import LocalExecutor, RayExecutor, merge_groups, run_jobs
from edct_task.scale.sweep import Job, expand

COMPARED = ("results", "judge_agreement", "judge_health", "config", "usage")


def cached_calls(job: Job) -> int:
    """Finished calls in the job's stage cache (0 before it exists)."""
    path = job.output / "cache" / "stages.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM entries").fetchone()[0]
    except sqlite3.Error:
        return 0


def kill_when_running(job: Job, after_calls: int, report: dict) -> threading.Thread:
    """A watcher that SIGKILLs the process running ``job`` (found by its output folder) once its
    stage cache holds ``after_calls`` finished calls; what it killed goes into ``report``."""

    def watch() -> None:
        marker = str(job.output)
        while True:
            for p in psutil.process_iter(["pid", "cmdline"]):
                cmd = p.info["cmdline"] or []
                if marker in cmd and "run" in cmd:
                    while (done := cached_calls(job)) < after_calls and p.is_running():
                        time.sleep(0.05)
                    if p.is_running():
                        p.send_signal(signal.SIGKILL)
                        report.update(pid=p.info["pid"], calls_cached_when_killed=done)
                    return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def compare(single: Path, merged: Path) -> dict:
    a, b = (
        json.loads((single / "results.json").read_text()),
        json.loads((merged / "results.json").read_text()),
    )
    one, got = (single / "samples.jsonl").read_bytes(), (merged / "samples.jsonl").read_bytes()
    return {
        "samples_sha256": {
            "single": hashlib.sha256(one).hexdigest(),
            "merged": hashlib.sha256(got).hexdigest(),
        },
        "samples_identical": one == got,
        "results_equal": {k: a[k] == b[k] for k in COMPARED},
        "ccs_binary": b["results"]["overall"]["metrics"]["ccs_binary"],
    }


def sweep_once(folder: Path, config: Path, shards: int, kill_after: int | None, local: bool = False) -> dict:
    target = {"backend": "calibration-reference", "behavior": "mixed:0.5"}
    spec = {"output": "out", "configs": {"cal": str(config)}, "models": {"mixed": target}, "shards": shards}
    (folder / "sweep.yaml").write_text(yaml.safe_dump(spec))
    sweep = expand(folder / "sweep.yaml")
    killed: dict = {}
    if kill_after is not None:
        kill_when_running(sweep.jobs[1], kill_after, killed)
    executor = LocalExecutor() if local else RayExecutor(num_cpus=shards)
    started = time.perf_counter()
    run_jobs(sweep.jobs, executor, retries=2, say=lambda line: print("  " + line, flush=True))
    wall = time.perf_counter() - started
    merge_groups(sweep, say=lambda line: print("  " + line, flush=True))
    shard_logs = [json.loads((j.output / "results.json").read_text()) for j in sweep.jobs]
    out = {
        "wall_s": round(wall, 1),
        "items_per_shard": [len(s["config"]["data"]["shard"]["positions"]) for s in shard_logs],
        "merged": sweep.groups[0].output,
    }
    if kill_after is not None:
        if not killed:
            raise SystemExit(
                f"shard 1 finished before {kill_after} of its calls were cached: lower --kill-after"
            )
        out["killed"] = killed
    calls = shard_logs[1]["calls"]  # the retry's, when killed: fewer calls, the rest cache hits
    out["shard1"] = {"calls": sum(calls["calls"].values()), "cache_hits": sum(calls["cache_hits"].values())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--kill-after", type=int, default=150, help="shard 1's cached calls when it is killed")
    ap.add_argument("--single", type=Path, default=None, help="a finished unsharded run of this setup")
    ap.add_argument("--local", action="store_true", help="the jobs one after another, without Ray")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edct-shards-ray-") as tmp:
        base = Path(tmp)
        raw = calibration_config("mixed:0.5", n=args.n).model_dump(mode="json")
        raw.pop("output_dir")
        config = base / "cal.yaml"
        config.write_text(yaml.safe_dump(raw))
        single = args.single
        if single is None:
            single = base / "single"
            started = time.perf_counter()
            cmd = [
                sys.executable,
                "-m",
                "edct_task.cli.main",
                "run",
                "--config",
                str(config),
                "--no-progress",
            ]
            subprocess.run([*cmd, "--output", str(single)], check=True, capture_output=True)
            print(f"single run: {time.perf_counter() - started:.1f} s", flush=True)
        for kill in (None, args.kill_after):
            folder = base / ("killed" if kill else "plain")
            folder.mkdir()
            print(
                f"{args.shards} shards as {'local jobs' if args.local else 'Ray tasks'}"
                + (f", shard 1 killed after {kill} calls" if kill else ""),
                flush=True,
            )
            got = sweep_once(folder, config, args.shards, kill, args.local)
            got.update(compare(single, got.pop("merged")))
            print(json.dumps(got, indent=1, default=str), flush=True)


if __name__ == "__main__":
    main()
