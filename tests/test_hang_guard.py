"""The suite's hang guards (``support.hang_guard``): never below their nominal seconds, larger on a
slower machine, and a guard that fires ends what it guards."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support import hang_guard
from support.hang_guard import cpu_budget, finish, hang_limit, scaled, slowdown, wait_for


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No measurement kept from before the test (it may change the environment)."""
    monkeypatch.setattr(hang_guard, "_measured", None)


def test_limits_never_go_below_their_nominal_seconds(fresh) -> None:
    assert slowdown() >= 1.0
    assert hang_limit(10) >= 10 * hang_guard.SAFETY
    assert hang_limit(10) == pytest.approx(10 * slowdown() * hang_guard.SAFETY)
    assert scaled(0.5) >= 0.5 and cpu_budget(5) >= 5


def test_a_slower_machine_gets_longer_limits(fresh, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hang_guard, "_load_per_core", lambda: 40.0)  # a run queue of 40 per core
    assert slowdown() >= 40 and hang_limit(1) >= 40 * hang_guard.SAFETY and scaled(1) >= 40
    monkeypatch.setattr(hang_guard, "_measured", None)
    monkeypatch.setattr(hang_guard, "_load_per_core", lambda: 0.0)
    monkeypatch.setattr(hang_guard, "NOMINAL_CALIBRATION_S", 1e-6)  # the loop "took ages"
    assert slowdown() > 100 and cpu_budget(1) > 100


def test_the_override_multiplies_what_is_measured(fresh, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hang_guard, "_load_per_core", lambda: 0.0)
    monkeypatch.setattr(hang_guard, "NOMINAL_CALIBRATION_S", 1e6)  # a machine faster than nominal
    assert slowdown() == 1.0
    monkeypatch.setattr(hang_guard, "_measured", None)
    monkeypatch.setenv("EDCT_TEST_SLOWDOWN", "8")
    assert slowdown() == 8.0 and cpu_budget(1) == 8.0


def test_the_measurement_is_kept_for_a_while_then_taken_again(fresh, monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(hang_guard, "_measure", lambda: calls.append(1) or (2.0, 1.0))
    assert slowdown() == slowdown() == 2.0 and len(calls) == 1
    when, *rest = hang_guard._measured
    monkeypatch.setattr(hang_guard, "_measured", (when - hang_guard.REMEASURE_S - 1, *rest))
    assert slowdown() == 2.0 and len(calls) == 2


def test_wait_for_returns_at_once_when_true_and_false_after_its_limit(monkeypatch) -> None:
    monkeypatch.setattr(hang_guard, "hang_limit", lambda nominal_s: nominal_s)  # no scaling here
    assert wait_for(lambda: True, 0.0)
    ticks = iter(range(3))
    assert wait_for(lambda: next(ticks) == 2, 60, every=0.001)
    started = time.monotonic()
    assert not wait_for(lambda: False, 0.05, every=0.01)
    assert time.monotonic() - started >= 0.05  # never early


def test_finish_kills_a_hung_process_before_raising(monkeypatch) -> None:
    monkeypatch.setattr(hang_guard, "hang_limit", lambda nominal_s: nominal_s)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=subprocess.PIPE)
    with pytest.raises(subprocess.TimeoutExpired):
        finish(proc, 0.2)
    assert proc.returncode is not None  # killed and reaped, not left running
    done = subprocess.Popen([sys.executable, "-c", "print('ok')"], stdout=subprocess.PIPE, text=True)
    assert finish(done, 60) == ("ok\n", None)
