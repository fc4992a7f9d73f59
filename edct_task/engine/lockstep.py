"""The lockstep schedule: the protocol of many samples advanced round by round.

Every round, the pending requests of all active samples go to the ``Dispatcher`` at once (the
target requests of the round as batches; text-LLM, editor and verification requests
concurrently on per-role pools), and no sample moves until the whole round is answered. It is
the simplest correct schedule: ``tests/engine/test_pipeline.py`` checks the default pipelined
schedule (``engine.pipeline``) against it sample by sample. ``engine.driver.run_samples``
picks it when ``limits.schedule`` is ``lockstep``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.core.requests import Request
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.drive import SampleQueue, SampleRun
from edct_task.engine.protocol import ProtocolConfig

Round = Sequence[tuple[SampleInput, Request]]
"""One round: every active sample's pending requests, each with its sample, in order."""


def run_lockstep(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    dispatcher: Dispatcher,
    *,
    window: int | None = None,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> list[SampleRecord]:
    """Advance every sample's protocol in lockstep, ``window`` samples at a time (None = all)."""
    return lockstep(
        samples,
        protocol,
        lambda round_: dispatcher.resolve([request for _, request in round_]),
        window=window,
        on_record=on_record,
    )


def lockstep(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    answer: Callable[[Round], Sequence[object]],
    *,
    window: int | None = None,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> list[SampleRecord]:
    """The lockstep loop with ``answer`` replying to each round (a dispatcher, or a replay's
    answers from recorded evidence: ``leaderboard.rederive``); the records in input order."""
    runs = SampleQueue(samples, protocol, window=window, on_record=on_record)
    try:
        list(runs.admit())  # starts them (admit is lazy)
        while runs.active:
            flat = [(run, req) for run, reqs in runs.active.values() for req in reqs]
            replies = answer([(run.sample, req) for run, req in flat])
            by_sample: dict[str, tuple[SampleRun, list[object]]] = {}
            for (run, _), reply in zip(flat, replies, strict=True):
                by_sample.setdefault(run.sample.id, (run, []))[1].append(reply)
            for run, sample_replies in by_sample.values():
                runs.advanced(run, run.send(tuple(sample_replies)))
            list(runs.admit())
    finally:
        runs.close()
    return runs.records()
