"""The pipelined schedule (the default of ``engine.driver.run_samples``): every sample moves on as
soon as its own replies are in.

The lockstep schedule (``engine.lockstep``) waits for the slowest request of a round before any
sample moves, so a run costs the sum of every round's slowest call. Here each request is submitted
the moment its sample yields it; when the last reply of a sample's tuple arrives, the sample is sent
its replies and its next requests go out at once. Target requests still reach the model in batches,
collected continuously the way a serving engine batches: a batch goes out when ``batch_size``
requests wait, or ``window_s`` after the first of them arrived, or as soon as a target slot frees
while requests wait (``target_concurrency`` batches in flight). Every pool keeps its concurrency
limit; identical requests in flight are sent once; the stage cache answers first and stores each
success before its reply is used, as in lockstep, so records and resume are the same
(``tests/engine/test_pipeline.py`` compares the two schedules sample by sample).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.core.requests import Request
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.drive import SampleQueue, SampleRun
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.runtime import Waitable


def run_pipelined(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    dispatcher: Dispatcher,
    *,
    window: int | None = None,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> list[SampleRecord]:
    """Run every sample's protocol, each moving on as soon as its replies are in (module docstring).

    ``window`` bounds the samples in progress at once (None = all); records come back in input order.
    The driver waits on the dispatcher's runtime (``runtime.py``): real threads, or the virtual
    clock of ``edct estimate``.
    """
    runs = SampleQueue(samples, protocol, window=window, on_record=on_record)
    ready: Waitable[tuple[SampleRun, tuple[object, ...] | BaseException]] = dispatcher.runtime.queue()

    def launch(run: SampleRun, requests: tuple[Request, ...]) -> None:
        futures = [dispatcher.submit(r) for r in requests]
        left = [len(futures)]
        lock = threading.Lock()

        def one_done(_f: Future[object]) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:  # every future is done: nothing here blocks
                errors = [e for f in futures if (e := f.exception()) is not None]
                ready.put((run, errors[0] if errors else tuple(f.result() for f in futures)))

        for f in futures:
            f.add_done_callback(one_done)

    def move_on(run: SampleRun, replies: tuple[object, ...] | BaseException) -> None:
        if isinstance(replies, BaseException):
            raise replies
        requests = runs.advanced(run, run.send(replies))
        if requests is not None:
            launch(run, requests)

    def admit() -> None:
        for run, requests in runs.admit():
            launch(run, requests)
            # drawing a sample takes time (a document's image is decoded as it is drawn): the
            # samples whose replies came back meanwhile move on now, not after the last draw
            while (done := ready.poll()) is not None:
                move_on(*done)

    try:
        admit()
        while runs.active:
            move_on(*ready.get())
            admit()
    finally:
        runs.close()
    return runs.records()
