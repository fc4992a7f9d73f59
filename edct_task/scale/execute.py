"""A sweep's jobs run as Ray tasks (or one after another in this process's machine), then merged.

Each job is an ``edct run`` subprocess, the same command a Slurm array task runs: a job's GPU is
the one Ray (or Slurm) gives its process, a killed job leaves its stage cache behind, and a rerun
resumes from it. Exit 0 and 3 (done; too many unscored) finish a job; exit 2 (a user error: the
same command fails the same way) stops the sweep; anything else (a crash, a kill, a storage
error) is retried up to ``retries`` times, by the driver, so the progress lines show every try.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from edct_task.core.errors import UserError
from edct_task.scale.merge import Merged, merge_shards, write_merged
from edct_task.scale.sweep import Job, Sweep
from edct_task.scoring.results import Results
from edct_task.scoring.table import runs_table

DONE_CODES = (0, 3)
"""``edct run`` exit codes of a job that wrote its output folder."""
REFUSED_CODE = 2
RAY_ENV = {"RAY_raylet_start_wait_time_s": "120"}
"""Set for Ray unless already set: how long a driver waits for its node's raylet to register
(Ray's default suits an idle machine; a loaded one, or one with 2 cores, can take longer)."""
RAY_CONNECT_S = 180.0
"""How long connecting to a running cluster (``--address``) may take before the sweep stops with
one line: at an address that accepts connections but never answers, ``ray.init`` waits without end
(Ray 2.60 on a silent listener: still waiting after 40 s, where ours gave up)."""


class SweepError(UserError):
    """A job of the sweep was refused, or failed more often than ``retries`` allows."""

    prefix = "sweep stopped: "


@dataclass(frozen=True)
class Outcome:
    """One try of one job."""

    job: str
    returncode: int
    seconds: float
    tail: str


def job_command(job: Job) -> list[str]:
    """The job's process: this Python running the ``edct`` command line."""
    return [sys.executable, "-m", "edct_task.cli.main", *job.argv]


def run_job(job: Job) -> Outcome:
    """Run one job to its end (a subprocess) and say how it ended."""
    started = time.perf_counter()
    done = subprocess.run(job_command(job), capture_output=True, text=True, env=dict(os.environ))
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return Outcome(job.name, done.returncode, round(time.perf_counter() - started, 3), tail[0])


class LocalExecutor:
    """Jobs one after another in subprocesses of this process (no Ray needed)."""

    name = "local"

    def __init__(self) -> None:
        self._pending: list[tuple[Job, int]] = []

    def submit(self, job: Job, attempt: int) -> None:
        self._pending.append((job, attempt))

    def next_done(self) -> tuple[Job, int, Outcome]:
        job, attempt = self._pending.pop(0)
        return job, attempt, run_job(job)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def close(self) -> None:
        return None


class RayExecutor:
    """Jobs as Ray tasks: ``ray.init()`` on this machine, or a running cluster at ``address``; each
    task asks for its job's CPUs, GPUs and custom resources."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        for name, value in RAY_ENV.items():
            os.environ.setdefault(name, value)  # before Ray reads its config; the user's value wins
        import ray

        self.ray = ray
        kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
        if address is None and num_cpus is not None:
            kwargs["num_cpus"] = num_cpus  # the local cluster's worker slots
        try:
            if address is None:  # a local node: its processes die with the thread that started
                ray.init(**kwargs)  # them (PR_SET_PDEATHSIG), so the main thread; Ray bounds the wait
            else:
                _bounded(lambda: ray.init(**kwargs), RAY_CONNECT_S)
        except Exception as exc:  # Ray raises a bare Exception when its node times out
            hint = (
                "is the cluster running?"
                if address
                else "its local node waits 30 s for its raylet: on a loaded machine start it first with "
                "`ray start --head --num-cpus N` and pass --address auto"
            )
            raise SweepError(
                f"Ray did not start{f' at {address}' if address else ''}: {str(exc).splitlines()[0]} "
                f"({hint}; or run with --local)"
            ) from None
        self._task = ray.remote(run_job)
        self._pending: dict[Any, tuple[Job, int]] = {}

    def submit(self, job: Job, attempt: int) -> None:
        ref = self._task.options(
            num_cpus=job.num_cpus,
            num_gpus=job.num_gpus,
            resources=job.custom or None,
            max_retries=0,  # the driver retries, so each try shows in the progress
            name=job.name,
        ).remote(job)
        self._pending[ref] = (job, attempt)

    def next_done(self) -> tuple[Job, int, Outcome]:
        (ref,), _ = self.ray.wait(list(self._pending), num_returns=1)
        job, attempt = self._pending.pop(ref)
        try:
            outcome = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:  # the worker died (killed, out of memory)
            outcome = Outcome(job.name, -1, 0.0, f"ray task failed: {type(exc).__name__}")
        return job, attempt, outcome

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def close(self) -> None:
        self.ray.shutdown()


def _bounded(call: Callable[[], Any], seconds: float) -> Any:
    """``call()`` in a daemon thread: its value or exception, or ``TimeoutError`` once ``seconds``
    pass (the thread is left to the interpreter's exit, which does not wait for it)."""
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    thread = threading.Thread(target=target, name="ray-init", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in done:
        raise done["error"]
    return done.get("value")


def make_executor(kind: str, address: str | None = None, workers: int | None = None) -> Any:
    """``ray`` (Ray must be installed), ``local``, or ``auto``: Ray when it is installed."""
    if kind == "auto":
        try:
            import ray  # noqa: F401
        except ImportError:
            kind = "local"
        else:
            kind = "ray"
    if kind == "local":
        if address is not None:
            raise SweepError("--address names a Ray cluster; it needs Ray (pip install 'edct-bench[ray]')")
        return LocalExecutor()
    try:
        return RayExecutor(address, workers)
    except ImportError:
        raise SweepError("Ray is not installed: pip install 'edct-bench[ray]', or run with --local") from None


def run_jobs(
    jobs: Sequence[Job], executor: Any, retries: int, say: Callable[[str], None] = print
) -> list[Outcome]:
    """Every job to its end on ``executor``, failed tries retried; one progress line per try."""
    outcomes: list[Outcome] = []
    for job in jobs:
        executor.submit(job, 1)
    finished, total, started = 0, len(jobs), time.perf_counter()
    try:
        while executor.busy:
            job, attempt, outcome = executor.next_done()
            outcomes.append(outcome)
            elapsed = time.perf_counter() - started
            if outcome.returncode in DONE_CODES:
                finished += 1
                say(f"[{finished}/{total} jobs, {elapsed:.0f} s] {job.name}: done in {outcome.seconds:.1f} s")
                continue
            if outcome.returncode == REFUSED_CODE:
                raise SweepError(f"{job.name} was refused: {outcome.tail}")
            if attempt > retries:
                raise SweepError(
                    f"{job.name} failed {attempt} time(s) (exit {outcome.returncode}): {outcome.tail}"
                )
            say(
                f"[{finished}/{total} jobs, {elapsed:.0f} s] {job.name}: exit {outcome.returncode} "
                f"({outcome.tail}); try {attempt + 1} of {retries + 1}, resuming from its cache"
            )
            executor.submit(job, attempt + 1)
    finally:
        executor.close()
    return outcomes


def merge_groups(sweep: Sweep, say: Callable[[str], None] = print) -> dict[str, Results]:
    """Each run's shards merged into its folder; ``group → results`` of every run."""
    from edct_task.run.outputs import RESULTS_FILE, load_run

    out: dict[str, dict[str, Any]] = {}
    unfinished = [j.name for j in sweep.jobs if not (j.output / RESULTS_FILE).is_file()]
    if unfinished:
        more = f" and {len(unfinished) - 3} more" if len(unfinished) > 3 else ""
        raise SweepError(f"{len(unfinished)} job(s) have not finished: {', '.join(unfinished[:3])}{more}")
    for group in sweep.groups:
        if group.sharded:
            merged: Merged = merge_shards([j.output for j in group.jobs])
            write_merged(merged, group.output)
            say(f"merged {len(group.jobs)} shards of {group.name} into {group.output}")
            out[group.name] = merged.log.results
        else:
            log = load_run(group.output).log
            assert log is not None
            out[group.name] = log.results
    return out


def summary_table(results: dict[str, Results]) -> str:
    """Every run's overall CCS with its CI and counts, then AC/EF: one row per model/config/seed."""
    return runs_table(results)
