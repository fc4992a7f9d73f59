"""Target batches take the requests of the samples furthest along first, so a run's editors start
once the first samples are answered and explained, not after every sample's first question."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from edct_task.core.requests import AskLLM, AskTarget, Message
from edct_task.engine import dispatch
from edct_task.engine.driver import Limits
from edct_task.engine.protocol import ProtocolConfig
from edct_task.estimate.latency import CallTime
from edct_task.estimate.simulate import simulate


def _ask(turns: int, system: bool = False, tag: str = "") -> AskTarget:
    msgs = [Message("system", "sys")] if system else []
    msgs += [Message("user" if i % 2 == 0 else "assistant", f"{tag}{i}") for i in range(turns)]
    return AskTarget(tuple(msgs), tag)


def _items(*requests):
    return [(r, str(i), Future()) for i, r in enumerate(requests)]


def test_the_batch_takes_the_furthest_samples_and_keeps_arrival_order_among_equals() -> None:
    items = _items(
        _ask(1, tag="a"), _ask(3, tag="b"), _ask(1, True, "c"), _ask(3, True, "d"), _ask(5, tag="e")
    )
    batch, rest = dispatch.furthest_first(items, 3)
    assert [r.purpose for r, _, _ in batch] == ["b", "d", "e"]  # a system message is no progress
    assert [r.purpose for r, _, _ in rest] == ["a", "c"]
    assert dispatch.furthest_first(items, 5) == (items, [])
    assert dispatch.progress(AskLLM("judge", "p", "t@v1", "x")) == 0


def _fifo(items, size):
    return items[:size], items[size:]


def test_a_large_run_starts_editing_after_two_batches_not_after_every_first_question(monkeypatch) -> None:
    roles = {
        "target": 1.0,
        "extractor": 0.0,
        "judge": 0.0,
        "edit_parser": 0.0,
        "editor": 4.0,
        "detector": 0.0,
    }
    times = {role: CallTime(s) for role, s in roles.items()}
    limits = Limits(target_batch_size=64, editor_concurrency=8)  # editor-bound: 320 × 4 s ÷ 8

    def run() -> float:
        return simulate(320, ProtocolConfig(k=1), limits, times, verify_pass_rate=1.0).wall_s

    furthest = run()
    monkeypatch.setattr(dispatch, "furthest_first", _fifo)
    fifo = run()
    # in arrival order the 320 questions fill 5 batches and the first explanations go in the 6th;
    # furthest first asks them in the 2nd (the freed slot waits for the 1st batch's follow-ups
    # instead of taking more first questions), so the editors (busy from then on either way)
    # start 4 batches earlier
    assert fifo - furthest == pytest.approx(4 * 1.0, abs=0.25)


class _Clock:
    """A hand-driven clock for the batcher: ``now``, ``call_later`` and ``advance``."""

    def __init__(self) -> None:
        self.t = 0.0
        self.timers: list[tuple[float, object]] = []

    def now(self) -> float:
        return self.t

    def call_later(self, delay: float, fn):
        self.timers.append((self.t + delay, fn))
        return Future()  # cancel() on a plain future is harmless

    def advance(self, to: float) -> None:
        self.t = to
        due = [fn for when, fn in self.timers if when <= to]
        self.timers = [(w, fn) for w, fn in self.timers if w > to]
        for fn in due:
            fn()


def _batcher(size: int = 4, window: float = 0.02):
    clock, sent = _Clock(), []

    def send(batch):
        sent.append((clock.t, [r.purpose for r, _, _ in batch], future := Future()))
        return future

    return dispatch._Batcher(send, size=size, slots=1, window_s=window, runtime=clock), clock, sent


def test_a_freed_slot_waits_one_window_for_the_returned_first_turns_follow_ups() -> None:
    batcher, clock, sent = _batcher()
    for r in [_ask(1, tag=f"q{i}") for i in range(8)]:
        batcher.add(_items(r)[0])
    assert [names for _, names, _ in sent] == [["q0", "q1", "q2", "q3"]]
    clock.advance(1.0)
    sent[0][2].set_result(None)  # the first questions came back: four more wait
    assert len(sent) == 1  # held: their samples' next turns are on their way
    clock.advance(1.005)
    batcher.add(_items(_ask(3, tag="e0"))[0])
    batcher.add(_items(_ask(3, tag="e1"))[0])
    assert len(sent) == 1
    clock.advance(1.02)  # the window ends: the explanations that came go first
    assert sent[1][0] == 1.02 and sent[1][1] == ["q4", "q5", "e0", "e1"]


def test_a_hold_ends_as_soon_as_a_batch_of_follow_ups_waits() -> None:
    batcher, clock, sent = _batcher(size=2)
    for r in [_ask(1, tag="q0"), _ask(1, tag="q1"), _ask(1, tag="q2")]:
        batcher.add(_items(r)[0])
    clock.advance(0.5)
    sent[0][2].set_result(None)
    batcher.add(_items(_ask(3, tag="e0"))[0])
    assert len(sent) == 1
    batcher.add(_items(_ask(3, tag="e1"))[0])
    assert sent[1][:2] == (0.5, ["e0", "e1"])


def test_no_hold_after_a_batch_without_first_turns_or_with_a_batch_of_follow_ups_waiting() -> None:
    batcher, clock, sent = _batcher(size=2)
    for r in [_ask(3, tag="e0"), _ask(3, tag="e1"), _ask(1, tag="q0"), _ask(1, tag="q1")]:
        batcher.add(_items(r)[0])
    clock.advance(0.5)
    sent[0][2].set_result(None)  # explanations came back: no first turn in that batch
    assert sent[1][:2] == (0.5, ["q0", "q1"])
    for r in [_ask(1, tag="q2"), _ask(3, tag="e2"), _ask(3, tag="e3")]:
        batcher.add(_items(r)[0])
    clock.advance(1.0)
    sent[1][2].set_result(None)  # first turns came back, but a batch of further requests waits
    assert sent[2][:2] == (1.0, ["e2", "e3"])
