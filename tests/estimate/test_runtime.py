"""The virtual clock: calls take the seconds they charge, pools keep their limits, timers fire in
order, and a driver waiting on an empty loop is told instead of hanging."""

from __future__ import annotations

import pytest

from edct_task.engine.runtime import Stalled, VirtualRuntime


def test_calls_finish_after_their_charge_within_the_pool_limit() -> None:
    rt = VirtualRuntime({"edit": 2})
    finished: list[tuple[str, float]] = []

    def call(name: str, seconds: float):
        def run() -> str:
            rt.charge(seconds)
            return name

        return run

    for name, seconds in (("a", 3.0), ("b", 1.0), ("c", 1.0), ("d", 5.0)):
        rt.start("edit", call(name, seconds), lambda out: finished.append((out[0], rt.now())))
    while rt.step():
        pass
    # two slots: b ends at 1, c starts at 1 and ends at 2, a ends at 3, d starts at 2 and ends at 7
    assert finished == [("b", 1.0), ("c", 2.0), ("a", 3.0), ("d", 7.0)]
    assert rt.busy["edit"] == 10.0


def test_an_exception_in_a_call_reaches_done_and_frees_the_slot() -> None:
    rt = VirtualRuntime({"verify": 1})
    outcomes: list[object] = []

    def broken() -> None:
        rt.charge(2.0)
        raise ValueError("bad")

    def fine() -> str:
        rt.charge(1.0)
        return "ok"

    rt.start("verify", broken, outcomes.append)
    rt.start("verify", fine, outcomes.append)
    while rt.step():
        pass
    assert isinstance(outcomes[0], ValueError)
    assert outcomes[1] == ("ok", 1.0, 0.0) and rt.now() == 3.0


def test_timers_fire_in_time_order_and_cancelled_ones_do_not() -> None:
    rt = VirtualRuntime({})
    fired: list[tuple[str, float]] = []
    rt.call_later(2.0, lambda: fired.append(("late", rt.now())))
    rt.call_later(0.5, lambda: fired.append(("early", rt.now())))
    rt.call_later(1.0, lambda: fired.append(("cancelled", rt.now()))).cancel()
    while rt.step():
        pass
    assert fired == [("early", 0.5), ("late", 2.0)]


def test_charge_outside_a_call_and_an_empty_loop_are_errors() -> None:
    rt = VirtualRuntime({"target": 1})
    with pytest.raises(RuntimeError, match="outside a call"):
        rt.charge(1.0)
    with pytest.raises(Stalled):
        rt.queue().get()


def test_cpu_seconds_queue_for_the_processors() -> None:
    rt = VirtualRuntime({"verify": 4}, cpus=1)
    finished: list[float] = []

    def check() -> None:
        rt.charge(0.5, cpu=1.0)  # half a second of waiting, then one CPU second

    for _ in range(3):
        rt.start("verify", check, lambda out: finished.append(rt.now()))
    while rt.step():
        pass
    assert finished == [1.5, 2.5, 3.5]  # one processor: the CPU parts run one after the other
    assert rt.cpu_busy == 3.0 and rt.busy["verify"] == 1.5 + 2.5 + 3.5


def test_a_locked_model_serves_one_call_at_a_time_whatever_the_pool() -> None:
    rt = VirtualRuntime({"edit": 8})
    finished: list[float] = []

    def edit() -> None:
        rt.charge(10.0, hold="lock:editor")

    for _ in range(3):
        rt.start("edit", edit, lambda out: finished.append(rt.now()))
    while rt.step():
        pass
    assert finished == [10.0, 20.0, 30.0]
