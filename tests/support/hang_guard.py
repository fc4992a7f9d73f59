"""Hang guards: every timeout, deadline and wall-clock bound of the test suite is taken from here.

A test must not fail because the machine is busy (``make test`` took 98 minutes on a shared 2-core
machine at load 4-20), and performance is measured in ``benchmarks/``, never asserted here. So a
time limit in a test is one of two kinds:

- a *hang guard* (``hang_limit``, ``deadline``, ``wait_for``, ``finish``): a subprocess, a poll or
  a wait that must end *eventually*. ``nominal_s`` is generous on an idle machine; the limit is
  that times how slow this machine is now (``slowdown``) times ``SAFETY``, never less than
  ``nominal_s``. It only ever fires on a hang, so it may be very long.
- a *tight* limit (``scaled``): a client timeout that an injected stall must hit while a normal
  reply must not. It is ``nominal_s`` times the slowdown measured in this process just before
  (at most ``REMEASURE_S`` old), no safety factor; the stall itself lasts until the server closes
  (``support.loopback``), so the fault times out whatever the load, and the test tolerates a
  load-induced timeout of a normal reply by its retry counts.

``cpu_budget`` is the third: a bound on CPU seconds (``time.process_time``), which load barely
changes but a slower CPU does; it scales by this CPU's speed alone.

``EDCT_TEST_SLOWDOWN`` (a number, default 1) multiplies every measured slowdown: for a machine
whose slowness the calibration cannot see (an emulated CPU, a debugger, a coverage tracer).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable

CALIBRATION_LOOPS = 250_000
NOMINAL_CALIBRATION_S = 0.03
"""CPU seconds of the calibration loop on the machine the nominal limits were chosen on (CPython
3.11, one core of the 2-core development box, idle); a faster machine counts as 1."""
SAFETY = 3.0
"""Hang guards: the load can grow after it was measured."""
REMEASURE_S = 60.0
"""A measurement older than this is taken again (the load changes during a long session)."""

_lock = threading.Lock()
_measured: tuple[float, float, float] | None = None  # (when, slowdown, cpu factor)


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x


def _override() -> float:
    try:
        return max(1.0, float(os.environ.get("EDCT_TEST_SLOWDOWN", "1")))
    except ValueError:
        return 1.0


def _load_per_core() -> float:
    """Runnable (or waiting) processes per core over the last minute: 1 is a fully busy machine."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):  # not on every platform
        return 0.0


def _measure() -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.thread_time()
    _spin(CALIBRATION_LOOPS)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    slowdown = max(1.0, wall / NOMINAL_CALIBRATION_S, _load_per_core())
    cpu_factor = max(1.0, cpu / NOMINAL_CALIBRATION_S)
    return slowdown * _override(), cpu_factor * _override()


def _current() -> tuple[float, float]:
    global _measured
    with _lock:
        now = time.monotonic()
        if _measured is None or now - _measured[0] > REMEASURE_S:
            _measured = (now, *_measure())
        return _measured[1], _measured[2]


def slowdown() -> float:
    """How many times slower than nominal this machine runs now (>= 1): the calibration loop's wall
    time against its nominal cost, or the 1-minute load per core, whichever is larger."""
    return _current()[0]


def hang_limit(nominal_s: float) -> float:
    """A hang guard's limit in seconds: ``nominal_s`` scaled by ``slowdown()`` and ``SAFETY``."""
    return nominal_s * max(1.0, slowdown() * SAFETY)


def scaled(nominal_s: float) -> float:
    """A tight limit: ``nominal_s`` times the slowdown measured in this process just now."""
    return nominal_s * slowdown()


def cpu_budget(nominal_s: float) -> float:
    """A bound on CPU seconds: ``nominal_s`` times how much slower this CPU is than nominal."""
    return nominal_s * _current()[1]


def deadline(nominal_s: float) -> float:
    """The ``time.monotonic()`` past which a poll is a hang."""
    return time.monotonic() + hang_limit(nominal_s)


def wait_for(condition: Callable[[], object], nominal_s: float, every: float = 0.02) -> bool:
    """Poll ``condition`` until it is true (True) or ``hang_limit(nominal_s)`` passed (False)."""
    end = deadline(nominal_s)
    while not condition():
        if time.monotonic() > end:
            return bool(condition())
        time.sleep(every)
    return True


def finish(proc: subprocess.Popen, nominal_s: float) -> tuple[object, object]:
    """``proc.communicate()`` under a hang guard; a hung process is killed before the timeout is
    raised, so it cannot outlive the test."""
    try:
        return proc.communicate(timeout=hang_limit(nominal_s))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
