"""The real-time runtime's timers: one long-lived thread, callbacks in deadline order and never
early, cancelled ones skipped, a failing one logged without stopping the others; and the
pipelined batcher still sends a lone request when its window ends."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future

import pytest
from support.hang_guard import hang_limit

from edct_task.engine.dispatch import _Batcher
from edct_task.engine.runtime import ThreadRuntime, TimerThread


def _timer_threads() -> int:
    return sum(t.name == "edct-timer" for t in threading.enumerate())


def test_callbacks_run_in_deadline_order_never_early_on_one_thread() -> None:
    timers = TimerThread()
    before = _timer_threads()
    fired: list[tuple[str, float, str]] = []
    due: dict[str, tuple[float, float]] = {}  # each deadline lies between its two bounds
    done = threading.Event()

    def record(name: str) -> None:
        fired.append((name, time.monotonic(), threading.current_thread().name))
        if len(fired) == 3:
            done.set()

    for name, delay in (("late", 0.15), ("early", 0.05), ("middle", 0.1)):
        earliest = time.monotonic() + delay
        timers.call_later(delay, lambda n=name: record(n))
        due[name] = (earliest, time.monotonic() + delay)
    timers.call_later(0.08, lambda: record("cancelled")).cancel()
    try:
        assert done.wait(hang_limit(10))
        order = [f[0] for f in fired]
        assert sorted(order) == ["early", "late", "middle"]
        # deadline order: none ran before one whose deadline was surely earlier; normally that is
        # early, middle, late (a pause between two call_later calls on a busy machine can move a
        # deadline past the next one's, and then the order follows the deadlines)
        assert all(due[a][0] <= due[b][1] for i, a in enumerate(order) for b in order[i + 1 :]), (order, due)
        assert all(at >= due[name][0] for name, at, _ in fired)  # never early
        assert {f[2] for f in fired} == {"edct-timer"}
        assert _timer_threads() == before + 1
    finally:
        timers.close()
    assert _timer_threads() == before


def test_many_timers_share_the_thread() -> None:
    timers = TimerThread()
    before = _timer_threads()
    count = threading.Semaphore(0)
    try:
        for i in range(200):
            timers.call_later(0.001 * (i % 7), count.release)
        for _ in range(200):
            assert count.acquire(timeout=hang_limit(10))
        assert _timer_threads() == before + 1
    finally:
        timers.close()


def test_a_failing_callback_is_logged_and_the_next_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    timers = TimerThread()
    ran = threading.Event()

    def broken() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="edct_task.engine.runtime"):
        timers.call_later(0.0, broken)
        timers.call_later(0.01, ran.set)
        try:
            assert ran.wait(hang_limit(10))
        finally:
            timers.close()
    assert "a timer callback failed" in caplog.text
    assert "boom" in caplog.text


def test_close_drops_pending_callbacks_and_refuses_new_ones() -> None:
    timers = TimerThread()
    ran: list[str] = []
    timers.call_later(60.0, lambda: ran.append("never"))
    timers.close()
    assert ran == []
    with pytest.raises(RuntimeError, match="closed"):
        timers.call_later(0.0, lambda: None)


def test_the_batcher_sends_a_lone_request_when_its_window_ends() -> None:
    """Fewer requests than a batch: the window's timer (on the runtime's one thread) sends them."""
    runtime = ThreadRuntime(lambda _pool: None)
    sent: list[list[object]] = []
    arrived = threading.Event()

    def send(batch: list) -> Future:
        sent.append([request for request, _, _ in batch])
        arrived.set()
        done: Future = Future()
        done.set_result(None)
        return done

    batcher = _Batcher(send, size=8, slots=1, window_s=0.02, runtime=runtime)
    try:
        batcher.add(("a", "key-a", Future()))
        batcher.add(("b", "key-b", Future()))
        assert arrived.wait(hang_limit(10))
        assert sent == [["a", "b"]]
    finally:
        batcher.close()
        runtime.close()
