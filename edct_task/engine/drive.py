"""The one owner of a sample's protocol generator (cf. httpx's ``_send_handling_auth``).

``SampleRun`` starts the generator, sends it replies, turns its return value into the record,
captures any exception it raises into an ``error`` record (a bug costs one sample, never the
run), and closes the generator in every case. Both drivers advance samples only through it:
``engine.driver.run_samples``, the driver of ``edct run`` (on the pipelined schedule,
``engine.pipeline.run_pipelined``, by default; on ``engine.lockstep.run_lockstep`` when
``limits.schedule`` is ``lockstep``), and the lmms-eval loop's hooks (``lmms.hooks.Session``), which
answer one sample's round at a time inside lmms-eval's ``generate_until_agentic``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.core.requests import Request
from edct_task.engine.protocol import Protocol, ProtocolConfig, sample_protocol

log = logging.getLogger(__name__)


class SampleRun:
    """One sample's protocol: ``start()``, then ``send(replies)`` until ``record`` is set.

    Both return the next tuple of requests, or ``None`` once the sample has finished; then
    ``record`` holds its ``SampleRecord`` and the generator is closed.
    """

    def __init__(self, sample: SampleInput, config: ProtocolConfig) -> None:
        self.sample = sample
        self.record: SampleRecord | None = None
        self._gen: Protocol = sample_protocol(sample, config)

    def start(self) -> tuple[Request, ...] | None:
        return self._advance(lambda: next(self._gen))

    def send(self, replies: tuple[object, ...]) -> tuple[Request, ...] | None:
        if self.record is not None:
            raise RuntimeError(f"sample {self.sample.id} has already finished")
        return self._advance(lambda: self._gen.send(replies))

    def _advance(self, step: Callable[[], tuple[Request, ...]]) -> tuple[Request, ...] | None:
        try:
            return step()
        except StopIteration as stop:
            self.record = stop.value
        except Exception as exc:  # a protocol bug must cost one sample, not the run
            log.exception("sample %s: protocol error", self.sample.id)
            self.record = SampleRecord(
                sample=self.sample, status="error", reason=f"internal error: {type(exc).__name__}: {exc}"
            )
        self._gen.close()
        return None

    def close(self) -> None:
        """Abandon the sample (the driver is shutting down); idempotent."""
        self._gen.close()


class SampleQueue:
    """A driver's samples: started up to ``window`` at a time, finished ones kept in input order.

    ``admit()`` starts samples while fewer than ``window`` are in progress, yielding each new run
    with its first requests as it starts; ``advanced(run, requests)`` records what a sample asked
    for next and returns it (``None``: it finished); ``records()`` gives every finished record in input order;
    ``close()`` abandons what is still in progress.

    ``samples`` is drawn from only as samples start: a lazy iterable would overlap its work with
    the first samples' requests, which go out while the rest are drawn.
    """

    def __init__(
        self,
        samples: Iterable[SampleInput],
        config: ProtocolConfig,
        *,
        window: int | None = None,
        on_record: Callable[[SampleRecord], None] | None = None,
    ) -> None:
        self._waiting: Iterator[SampleInput] = iter(samples)
        self._order: dict[str, int] = {}
        self._drawn = itertools.count()
        self._limit = window or None  # None: every sample at once
        self._config, self._on_record = config, on_record
        self.active: dict[str, tuple[SampleRun, tuple[Request, ...]]] = {}
        self._records: dict[str, SampleRecord] = {}

    def admit(self) -> Iterator[tuple[SampleRun, tuple[Request, ...]]]:
        """Start samples (drawn from the input now) while fewer than ``window`` are in progress;
        yields each started run and its first requests (a run that finished at once is kept)."""
        while self._limit is None or len(self.active) < self._limit:
            sample = next(self._waiting, None)
            if sample is None:
                return
            self._order[sample.id] = next(self._drawn)
            run = SampleRun(sample, self._config)
            requests = self.advanced(run, run.start())
            if requests is not None:
                yield run, requests

    def advanced(self, run: SampleRun, requests: tuple[Request, ...] | None) -> tuple[Request, ...] | None:
        """Note ``run``'s next requests and return them; None (and its record kept) when it has
        finished."""
        if requests is not None:
            self.active[run.sample.id] = (run, requests)
            return requests
        self.active.pop(run.sample.id, None)
        assert run.record is not None
        self._records[run.sample.id] = run.record
        if self._on_record is not None:
            self._on_record(run.record)
        return None

    def records(self) -> list[SampleRecord]:
        return sorted(self._records.values(), key=lambda r: self._order[r.sample.id])

    def close(self) -> None:
        for run, _ in self.active.values():
            run.close()
