"""The driver of every ``edct run``: the run's ``Limits``, its dispatcher, and ``run_samples``.

``Limits`` holds the concurrency per role, the target batch size, the window of samples in
progress and the schedule; ``build_dispatcher`` puts the handler table behind the stage cache
with the run's observers; ``run_samples`` runs the samples on the schedule the limits name:
``engine.pipeline.run_pipelined`` (the default: each sample moves on as soon as its own replies
are in) or ``engine.lockstep.run_lockstep`` (all samples advance round by round, the schedule
the pipelined one is checked against). Both give the same records; each finished call is
committed to the stage cache before its reply is used, so a run killed at any point resumes
without repeating a finished call.

With every concurrency limit and the window at 1 (``Limits.sequential()``) the same driver runs
one sample at a time, which is the baseline of ``benchmarks/bench_driver.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.engine.dispatch import CallLog, Concurrency, Dispatcher, Observer, Progress
from edct_task.engine.handlers import Backends, PixelCache, handler_table
from edct_task.engine.lockstep import run_lockstep
from edct_task.engine.pipeline import run_pipelined
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.stage_cache import ImageStore, StageCache
from verification.gate import GateParams

__all__ = ["Limits", "build_dispatcher", "run_samples"]


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
    roles: Backends,
    images: ImageStore,
    cache: StageCache | None,
    *,
    protocol: ProtocolConfig,
    gate: GateParams,
    limits: Limits,
    call_log: Path | None = None,
    progress: bool = False,
    run_name: str = "",
    pixels: PixelCache | None = None,
) -> Dispatcher:
    """The dispatcher of one run: the handler table behind the cache, with its observers
    (``progress``: per-stage bars on a terminal, a heartbeat line naming ``run_name`` otherwise),
    its handlers sharing ``pixels`` (``handler_table``)."""
    observers: list[Observer] = []
    if progress:
        observers.append(Progress(name=run_name))
    if call_log is not None:
        observers.append(CallLog(call_log))
    handlers = handler_table(
        roles, images, protocol, gate, target_batch_size=limits.target_batch_size, pixels=pixels
    )
    return Dispatcher(
        handlers,
        cache,
        concurrency=limits.concurrency(),
        observers=observers,
        batch_window_s=limits.batch_window_s,
    )


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
        on_record=on_record,
    )
