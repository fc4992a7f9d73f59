"""The pipelined driver: every sample moves on as soon as its own replies are in.

The lockstep driver waits for the slowest request of a round before any sample moves, so a run
costs the sum of every round's slowest call. Here each request is submitted the moment its
sample yields it; when the last reply of a sample's tuple arrives, the sample is sent its
replies and its next requests go out at once. Target requests still reach the model in batches,
collected continuously the way a serving engine batches: a batch goes out when ``batch_size``
requests wait, or ``window_s`` after the first of them arrived, or as soon as a target slot
frees while requests wait (``target_concurrency`` batches in flight). Every pool keeps its
concurrency limit; identical requests in flight are sent once; the stage cache answers first
and stores each success before its reply is used, as in lockstep, so records and resume are
the same (``tests/engine/test_pipeline.py`` compares the two schedules sample by sample).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.drive import SampleQueue, SampleRun
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.records import SampleInput, SampleRecord
from edct_task.engine.requests import Failure, Request
from edct_task.engine.runtime import Outcome, Runtime, ThreadRuntime, Waitable
from edct_task.engine.stage_cache import fingerprint


class _Batcher:
    """Continuous micro-batching of one handler's requests (the target's), driven by events.

    A batch goes out when ``size`` requests wait, or ``window_s`` after the first of them
    arrived, and only while one of ``slots`` is free; while none is, more requests gather into
    the next batch. Runs on any ``Runtime`` (timers and the clock come from it)."""

    def __init__(
        self,
        submit: Callable[[list[tuple[Request, str, Future]]], Future],
        size: int,
        slots: int,
        window_s: float,
        runtime: Runtime,
    ) -> None:
        self._submit, self.size, self.window_s, self._rt = submit, max(1, size), window_s, runtime
        self._free = slots
        self._items: list[tuple[Request, str, Future]] = []
        self._first: float | None = None
        self._lock = threading.RLock()
        self._timer: Any = None
        self._closed = False

    def add(self, request: Request, key: str, future: Future) -> None:
        with self._lock:
            if not self._items:
                self._open_window()
            self._items.append((request, key, future))
            self._pump()

    def _open_window(self) -> None:
        self._first = self._rt.now()
        self._timer = self._rt.call_later(self.window_s, self._due)  # an earlier one firing is harmless

    def _due(self) -> None:
        with self._lock:
            if not self._closed:
                self._pump()

    def _release(self, _f: Future) -> None:
        with self._lock:
            self._free += 1
            self._pump()

    def _pump(self) -> None:
        """Send batches while a slot is free and a batch is full or its window has passed."""
        while self._items and self._free > 0:
            full = len(self._items) >= self.size
            if not full and (self._first is None or self._rt.now() < self._first + self.window_s):
                return
            batch, self._items = self._items[: self.size], self._items[self.size :]
            self._free -= 1
            self._first = None
            if self._items:
                self._open_window()
            self._submit(batch).add_done_callback(self._release)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()


class Pipeline:
    """Requests in, futures of replies out, through a ``Dispatcher``'s handlers, pools and observers.

    ``runtime`` supplies time, pools, timers and queues (``runtime.py``): real threads by
    default, a virtual clock for ``edct estimate``."""

    def __init__(
        self, dispatcher: Dispatcher, *, window_s: float = 0.02, runtime: Runtime | None = None
    ) -> None:
        self.d = dispatcher
        self.runtime: Runtime = runtime or ThreadRuntime(dispatcher.pool)
        self._lock = threading.Lock()
        self._inflight: dict[str, Future] = {}
        self._batchers: dict[type, _Batcher] = {}
        for kind, handler in dispatcher.handlers.items():
            if handler.batch_size > 1:
                slots = dispatcher.pool_size(handler.pool)
                self._batchers[kind] = _Batcher(
                    lambda batch, h=handler: self._run(h, batch),
                    handler.batch_size,
                    slots,
                    window_s,
                    self.runtime,
                )

    def submit(self, request: Request) -> Future:
        handler = self.d.handlers[type(request)]
        stage = handler.stage(request)
        self.d.notify("issued", stage)
        key = fingerprint(handler.key(request))
        with self._lock:
            twin = self._inflight.get(key)
            if twin is not None:
                self.d.notify("answered", stage, "hit", 0.0, key)
                return twin
            future: Future = Future()
            self._inflight[key] = future
        hit = handler.cached(key)
        if hit is not None:
            self.d.notify("answered", stage, "hit", 0.0, key)
            self._resolve(key, future, hit)
            return future
        batcher = self._batchers.get(type(request))
        if batcher is not None:
            batcher.add(request, key, future)
        else:
            self._run(handler, [(request, key, future)])
        return future

    def _run(self, handler: Any, batch: list[tuple[Request, str, Future]]) -> Future:
        requests = [r for r, _, _ in batch]
        keys = [k for _, k, _ in batch]

        def done(outcome: Outcome) -> None:
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
                replies, wall, cpu = outcome
                seconds, cpu_each = wall / len(batch), cpu / len(batch)
                for (request, key, future), reply in zip(batch, replies, strict=True):
                    how = "failure" if isinstance(reply, Failure) else "call"
                    self.d.notify("answered", handler.stage(request), how, seconds, key, cpu_each)
                    self._resolve(key, future, reply)
            except BaseException as exc:  # a storage stop, or a bug: no waiting sample may hang
                for _, key, future in batch:
                    self._fail(key, future, exc)

        return self.runtime.start(handler.pool, lambda: handler.call_keyed(requests, keys), done)

    def _resolve(self, key: str, future: Future, reply: object) -> None:
        with self._lock:
            if self._inflight.get(key) is future:
                del self._inflight[key]
        future.set_result(reply)

    def _fail(self, key: str, future: Future, exc: BaseException) -> None:
        with self._lock:
            if self._inflight.get(key) is future:
                del self._inflight[key]
        if not future.done():
            future.set_exception(exc)

    def close(self) -> None:
        for batcher in self._batchers.values():
            batcher.close()


def run_pipelined(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    dispatcher: Dispatcher,
    *,
    window: int | None = None,
    batch_window_s: float = 0.02,
    on_record: Callable[[SampleRecord], None] | None = None,
    runtime: Runtime | None = None,
) -> list[SampleRecord]:
    """Run every sample's protocol, each moving on as soon as its replies are in (module docstring).

    ``window`` bounds the samples in progress at once (None = all); records come back in input order.
    ``runtime``: real threads (default) or a ``VirtualRuntime`` (``runtime.py``).
    """
    runs = SampleQueue(samples, protocol, window=window, on_record=on_record)
    pipeline = Pipeline(dispatcher, window_s=batch_window_s, runtime=runtime)
    ready: Waitable[tuple[SampleRun, tuple[object, ...] | BaseException]] = pipeline.runtime.queue()

    def launch(run: SampleRun, requests: tuple[Request, ...]) -> None:
        futures = [pipeline.submit(r) for r in requests]
        left = [len(futures)]
        lock = threading.Lock()

        def one_done(_f: Future) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:  # every future is done: nothing here blocks
                errors = [f.exception() for f in futures if f.exception() is not None]
                ready.put((run, errors[0] if errors else tuple(f.result() for f in futures)))

        for f in futures:
            f.add_done_callback(one_done)

    def admit() -> None:
        for run, requests in runs.admit():
            launch(run, requests)

    try:
        admit()
        while runs.active:
            run, replies = ready.get()
            if isinstance(replies, BaseException):
                raise replies
            requests = run.send(replies)
            if runs.advanced(run, requests):
                launch(run, requests)  # type: ignore[arg-type]
            admit()
    finally:
        pipeline.close()
        runs.close()
    return runs.records()
