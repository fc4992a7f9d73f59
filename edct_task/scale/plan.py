"""A sweep's wall time on N workers, before anything runs.

Each job's wall time is ``edct_task.estimate.plan.estimate`` of its config for the items of its
slice (the real pipelined scheduler on a virtual clock, the roles' latency models, the job's own
limits); the jobs are then placed on N workers in sweep order, each job on the worker that frees
first (what a Ray cluster with N one-job slots or a Slurm array throttled to ``%N`` does). A job's
process start (≈ 2 CPU-seconds of imports) is not modelled.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from edct_task.scale.sweep import Job


@dataclass(frozen=True)
class SweepEstimate:
    workers: int
    jobs: dict[str, float]
    """Job name → its predicted wall seconds."""
    wall_s: float

    @property
    def busy_s(self) -> float:
        return sum(self.jobs.values())


def slice_items(items: int, shards: int) -> int:
    """Items of one slice, rounded up (slices by hash are balanced within a few items)."""
    return math.ceil(items / shards)


def schedule(durations: Sequence[float], workers: int) -> float:
    """The makespan of ``durations`` started in order, each on the first worker to be free."""
    free = [0.0] * min(workers, max(1, len(durations)))
    heapq.heapify(free)
    end = 0.0
    for d in durations:
        start = heapq.heappop(free)
        heapq.heappush(free, start + d)
        end = max(end, start + d)
    return end


def estimate_sweep(jobs: Sequence[Job], workers: int, job_wall: Callable[[Job], float]) -> SweepEstimate:
    """``job_wall`` predicts one job (``estimate(config, n).wall_s``); the sweep on ``workers``."""
    walls = {job.name: job_wall(job) for job in jobs}
    return SweepEstimate(workers, walls, schedule(list(walls.values()), workers))
