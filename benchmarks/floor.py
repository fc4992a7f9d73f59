"""The floor a benchmark run is measured against: max(critical path, CPU seconds ÷ cores).

A run cannot finish before one sample's chain of dependent calls (the critical path at the
simulated latencies), nor before the CPU work of all samples spread over the cores. Both
benchmarks print the floor next to the wall time.

Critical path of one sample with chain length k (SPEC §2; what waits for what in
``edct_task.engine.protocol``): the baseline answer and why (2 target calls), concept extraction
and the instruction chain (2 text calls), then per edit the edit, its verification and the
re-query answer and why (the edit parser runs beside the edit; the judges of edit j beside edit
j+1), and the last step's judges (1 text call). Each target call also waits up to the batch
window of the pipelined schedule.

Neither term counts the roles' concurrency limits: with 300 edits at 0.5 s and 8 edits in flight
the editor alone needs 18.75 s, whatever the CPU. ``role_throughput_s`` gives that bound per pool
(printed beside the floor, not part of it).
"""

from __future__ import annotations

import os
import resource


def critical_path_s(k: int, target: float, text: float, editor: float, verify: float, window: float) -> float:
    target_calls = 2 + 2 * k
    return target_calls * (target + window) + 3 * text + k * (editor + verify)


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
