"""The batched driver of ``edct run``: the protocol of many samples advanced in lockstep.

Every round, the driver collects the pending requests of all active samples and hands them to
the ``Dispatcher`` at once (all target requests of the round go out as batches; text-LLM,
editor and verification requests run concurrently on per-role pools). Each finished call is
committed to the stage cache before its reply is used, so a run killed at any point resumes
without repeating a finished call.

With ``window=1`` and every concurrency limit at 1 (``Limits.sequential()``) the same driver runs
one sample at a time, which is the baseline of ``benchmarks/bench_driver.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from edct_task.engine.dispatch import CallLog, Concurrency, Dispatcher, Observer, Progress
from edct_task.engine.drive import SampleRun
from edct_task.engine.handlers import handler_table
from edct_task.engine.pipeline import run_pipelined
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.records import SampleInput, SampleRecord
from edct_task.engine.requests import Request
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.roles import Roles
from verification.gate import GateParams


class Limits(BaseModel):
    """Concurrency per role (requests in flight), the target batch size and the window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_batch_size: int = Field(64, ge=1, description="Conversations per target call.")
    target_concurrency: int = Field(
        1, ge=1, description="Target batches in flight at once (1 for an in-process model; more for servers)."
    )
    text_concurrency: int = Field(16, ge=1, description="Text-LLM calls in flight.")
    editor_concurrency: int = Field(8, ge=1, description="Editor calls in flight.")
    verify_concurrency: int = Field(2, ge=1, description="Verification checks in flight (CPU-bound).")
    window: int | None = Field(None, ge=1, description="Samples in progress at once; None = all.")
    schedule: Literal["pipelined", "lockstep"] = Field(
        "pipelined",
        description="pipelined: each sample moves on as soon as its replies are in (target requests "
        "micro-batched); lockstep: all samples advance round by round.",
    )
    batch_window_s: float = Field(
        0.02, ge=0, description="pipelined: how long a target batch waits for more requests before it goes."
    )

    @classmethod
    def sequential(cls) -> Limits:
        return cls(
            target_batch_size=1,
            target_concurrency=1,
            text_concurrency=1,
            editor_concurrency=1,
            verify_concurrency=1,
            window=1,
            schedule="lockstep",
        )

    def concurrency(self) -> Concurrency:
        return Concurrency(
            target=self.target_concurrency,
            text=self.text_concurrency,
            edit=self.editor_concurrency,
            verify=self.verify_concurrency,
        )


def build_dispatcher(
    roles: Roles,
    images: ImageStore,
    cache: StageCache | None,
    *,
    protocol: ProtocolConfig,
    gate: GateParams,
    limits: Limits,
    call_log: Path | None = None,
    progress: bool = False,
) -> Dispatcher:
    """The dispatcher of one run: the handler table behind the cache, with its observers."""
    observers: list[Observer] = []
    if progress:
        observers.append(Progress())
    if call_log is not None:
        observers.append(CallLog(call_log))
    handlers = handler_table(roles, images, protocol, gate, target_batch_size=limits.target_batch_size)
    return Dispatcher(handlers, cache, concurrency=limits.concurrency(), observers=observers)


def run_samples(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    dispatcher: Dispatcher,
    limits: Limits,
    *,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> list[SampleRecord]:
    """Run the samples on the schedule ``limits`` names (pipelined or lockstep)."""
    if limits.schedule == "lockstep":
        return run_lockstep(samples, protocol, dispatcher, window=limits.window, on_record=on_record)
    return run_pipelined(
        samples,
        protocol,
        dispatcher,
        window=limits.window,
        batch_window_s=limits.batch_window_s,
        on_record=on_record,
    )


def run_lockstep(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    dispatcher: Dispatcher,
    *,
    window: int | None = None,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> list[SampleRecord]:
    """Advance every sample's protocol in lockstep, ``window`` samples at a time (None = all)."""
    queue = list(samples)
    order = {s.id: i for i, s in enumerate(queue)}
    records: dict[str, SampleRecord] = {}
    active: dict[str, tuple[SampleRun, tuple[Request, ...]]] = {}
    limit = window or len(queue) or 1

    def settle(run: SampleRun, pending: tuple[Request, ...] | None) -> None:
        if pending is not None:
            active[run.sample.id] = (run, pending)
            return
        active.pop(run.sample.id, None)
        assert run.record is not None
        records[run.sample.id] = run.record
        if on_record is not None:
            on_record(run.record)

    def admit() -> None:
        while queue and len(active) < limit:
            run = SampleRun(queue.pop(0), protocol)
            settle(run, run.start())

    try:
        admit()
        while active:
            flat = [(sid, req) for sid, (_, reqs) in active.items() for req in reqs]
            replies = dispatcher.resolve([req for _, req in flat])
            by_sample: dict[str, list[object]] = {}
            for (sid, _), reply in zip(flat, replies, strict=True):
                by_sample.setdefault(sid, []).append(reply)
            for sid, sample_replies in by_sample.items():
                run, _ = active[sid]
                settle(run, run.send(tuple(sample_replies)))
            admit()
    finally:
        for run, _ in active.values():
            run.close()
    return sorted(records.values(), key=lambda r: order[r.sample.id])
