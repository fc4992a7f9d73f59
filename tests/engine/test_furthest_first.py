"""Target batches take the requests of the samples furthest along first, so a run's editors start
once the first samples are answered and explained, not after every sample's first question."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from edct_task.core.requests import AskLLM, AskTarget, Message
from edct_task.engine import dispatch
from edct_task.engine.lockstep import Limits
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


def test_a_large_run_starts_editing_after_three_batches_not_after_every_first_question(monkeypatch) -> None:
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
    # furthest first asks them in the 3rd (the 2nd went out with questions when the 1st came back),
    # so the editors (busy from then on either way) start 3 batches earlier
    assert fifo - furthest == pytest.approx(3 * (1.0 + limits.batch_window_s), abs=0.25)
