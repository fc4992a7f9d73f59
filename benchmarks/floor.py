"""The floor a benchmark run is measured against: max(critical path, CPU seconds ÷ cores).

A run cannot finish before one sample's chain of dependent calls (the critical path at the
simulated latencies), nor before the CPU work of all samples spread over the cores. Both
benchmarks print the floor next to the wall time.

Critical path of one sample with chain length k (what waits for what in
``edct_task.engine.protocol``): the baseline answer and why (2 target calls), concept extraction
and the instruction chain (2 text calls), then per edit the edit, its verification and the
re-query answer and why (the edit parser runs beside the edit; the judges of edit j beside edit
j+1), and the last step's judges (1 text call). Each target call also waits up to the batch
window of the pipelined schedule.

Neither term counts the roles' concurrency limits: with 300 edits at 0.5 s and 8 edits in flight
the editor alone needs 18.75 s, whatever the CPU. ``role_throughput_s`` gives that bound per pool
(printed beside the floor, not part of it), and ``editor_path_s`` the tighter one the editor pool
sets: no edit can start before the first sample has been answered, explained and its instruction
written, the pool then needs every edit's latency and the CPU it does in its slot at its
concurrency (``slot_cpu_s``: storing the edited image runs after the slot is freed), and after
the last edit its sample is verified, asked again and judged. An ``edct run --model`` run also
cannot ask its model anything before lmms-eval is imported (its model registry; ``startup_s``
measures that import on its own): ``bench_lmms.py`` adds it for the floor of such a run.
"""

from __future__ import annotations

import math
import os
import resource


def critical_path_s(k: int, target: float, text: float, editor: float, verify: float, window: float) -> float:
    target_calls = 2 + 2 * k
    return target_calls * (target + window) + 3 * text + k * (editor + verify)


def slot_cpu_s(calls: dict, stage: str) -> float:
    """CPU seconds per call of ``stage`` that held the role's slot: results.json ``calls``'
    ``cpu_seconds`` less its ``local_cpu_seconds`` (what ran after the backend answered, outside
    the slot: storing an edited image), over the calls."""
    n = calls.get("calls", {}).get(stage, 0)
    if not n:
        return 0.0
    cpu = calls.get("cpu_seconds", {}).get(stage, 0.0) - calls.get("local_cpu_seconds", {}).get(stage, 0.0)
    return max(0.0, cpu) / n


def editor_path_s(
    edits: int,
    concurrency: int,
    target: float,
    text: float,
    editor: float,
    edit_cpu: float,
    verify: float,
    window: float,
) -> float:
    """Least wall time of the samples' part of a run bound by its editor pool (module docstring):
    the chain before the first edit (answer, why, concepts, instructions), the pool's busy time —
    some slot runs ⌈``edits`` ÷ ``concurrency``⌉ edits of latency + CPU each — and the chain after
    the last edit (verify, answer, why, judge). 0 without edits: the pool bounds nothing then."""
    if edits <= 0:
        return 0.0
    before_first_edit = 2 * (target + window) + 2 * text
    after_last_edit = verify + 2 * (target + window) + text
    return before_first_edit + math.ceil(edits / concurrency) * (editor + edit_cpu) + after_last_edit


STARTUP = "import edct_task.cli.main, lmms_eval.models; print('ready', flush=True)"
"""What ``edct run --model`` must import before its first model call: its CLI and lmms-eval's model
registry (torch and transformers with it)."""


def startup_s(python: str, env: dict[str, str], tries: int = 2) -> float:
    """Least time over ``tries`` runs from starting ``python -c STARTUP`` until it has imported
    everything (its ``ready`` line; the interpreter's exit afterwards is not counted): the
    start-up no ``edct run --model`` run avoids."""
    import subprocess
    import time

    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        with subprocess.Popen([python, "-c", STARTUP], env=env, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            ready = time.perf_counter() - start
            if proc.wait() != 0 or line.strip() != "ready":
                raise RuntimeError(f"{python} -c {STARTUP!r} failed")
        best = min(best, ready)
    return best


def cpu_seconds() -> float:
    """User + system CPU of this process and its waited-for children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def per_stage_cpu(calls: dict) -> dict[str, float]:
    """results.json ``calls.cpu_seconds``: CPU seconds per stage, largest first."""
    cpu = calls.get("cpu_seconds", {})
    return {k: round(v, 2) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])}


TEXT_STAGES = ("concepts", "instructions", "edit_parse", "judge")


def role_throughput_s(
    calls: dict, text: float, editor: float, text_concurrency: int, editor_concurrency: int
) -> dict:
    """Seconds the text and editor pools need at least: their backend calls (results.json
    ``calls.calls``; cache hits and twins in flight cost nothing) × latency ÷ concurrency."""
    made = calls.get("calls", {})
    text_calls = sum(made.get(stage, 0) for stage in TEXT_STAGES)
    return {
        "editor": round(made.get("edit", 0) * editor / editor_concurrency, 2),
        "text": round(text_calls * text / text_concurrency, 2),
    }
