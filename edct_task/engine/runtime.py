"""Where the pipelined driver's time and work come from: real threads, or a virtual clock.

The pipelined driver (``pipeline.py``) decides *what* runs when; a ``Runtime`` supplies the
three things that decision needs from the world: the time (``now``), a way to run a call on a
role's pool and hear when it is done (``start``), a timer (``call_later``) and the queue the
driver waits on for finished samples (``queue``).

- ``ThreadRuntime`` (every real run): the dispatcher's thread pools, one long-lived timer thread
  (``TimerThread``) and ``queue.Queue``; a call's seconds are measured with ``perf_counter`` /
  ``thread_time``. While one is open, numpy's BLAS runs on one thread (``SingleThreadedBlas``):
  the pools are the run's parallelism.
- ``VirtualRuntime`` (``edct estimate``): a discrete-event loop on one thread. A call runs at
  once and *charges* the virtual seconds it would take (``charge``, from a simulated backend:
  seconds of waiting, and CPU seconds that queue for one of the machine's processors); its
  reply is delivered, and its pool slot freed, when that time has passed on the virtual clock. Waiting on
  the queue runs the event loop until something arrives. Nothing sleeps: thousands of samples
  take seconds, and the same scheduling code decides the order as in a real run.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

Outcome = tuple[Any, float, float] | BaseException
"""What ``start`` hands to ``done``: ``(result, wall seconds, CPU seconds)`` or the exception raised."""


class Waitable(Protocol[T]):
    def put(self, item: T) -> None: ...
    def get(self) -> T: ...
    def poll(self) -> T | None:
        """An item already there, or None at once (nothing waits)."""
        ...


class Runtime(Protocol):
    def now(self) -> float: ...

    def start(self, pool: str, call: Callable[[], Any], done: Callable[[Outcome], None]) -> Future[None]:
        """Run ``call`` on ``pool`` (within its concurrency limit), then ``done(outcome)``; the
        returned future completes after ``done`` has run."""
        ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> Any:
        """Run ``fn`` after ``delay`` seconds; the returned handle has ``cancel()``."""
        ...

    def queue(self) -> Waitable[Any]: ...


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TimerThread:
    """``call_later`` on real time for a ``ThreadRuntime``: one long-lived thread waits on a heap of
    deadlines (started on first use) instead of one ``threading.Timer`` thread per call. The
    pipelined batcher arms a timer for every batch window while it holds its lock, and starting a
    thread there made the caller wait until the new thread ran: 6.5 ms per window on a busy
    2-core machine, against 0.4 ms now (``benchmarks/bench_driver.py``'s setting, 120 samples).
    A callback runs on this thread at or after its deadline (``time.monotonic``), in deadline
    order; one that raises is logged and the others still run; a cancelled one is skipped."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Timer, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def call_later(self, delay: float, fn: Callable[[], None]) -> _Timer:
        """Run ``fn`` on the timer thread ``delay`` seconds from now; the handle has ``cancel()``."""
        handle = _Timer()
        with self._cond:
            if self._closed:
                raise RuntimeError("call_later on a closed runtime")
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay), next(self._seq), handle, fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="edct-timer", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is handle:  # a new earliest deadline: wake the thread to wait less
                self._cond.notify()
        return handle

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._closed:
                    return
                _, _, handle, fn = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            try:
                fn()
            except Exception:
                log.exception("a timer callback failed")

    def close(self) -> None:
        """Stop the thread; callbacks not yet due never run."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class SingleThreadedBlas:
    """numpy's BLAS limited to one thread while at least one holder is open (``threadpoolctl``);
    the last ``release`` restores what was there before.

    The role pools are a run's parallelism (``verify_concurrency`` checks at once, …). OpenBLAS,
    numpy's BLAS, also starts a thread per core for the verification's small least-squares fits
    (``verification.alignment``), and those threads spin between calls: a verification check took
    104 ms CPU instead of 41 ms on a 2-core machine, and a 150-document zero-latency ``edct run``
    48 CPU-s instead of 33, with identical results (a thread count changes no BLAS result here:
    ``tests/verification/test_alignment_threads.py``). Only numpy's own library (inside its
    installation, as pip wheels ship it) is limited: an in-process model's BLAS (torch's) is not
    touched; a numpy linked to a system BLAS is left as it is (``OPENBLAS_NUM_THREADS=1`` does
    the same there).
    """

    _lock = threading.Lock()
    _holders = 0
    _limiter: Any = None

    @classmethod
    def acquire(cls) -> None:
        """Limit (again: whatever changed the count since the first holder came is overruled)."""
        with cls._lock:
            libraries = numpy_blas_libraries()
            if libraries:
                from threadpoolctl import threadpool_limits

                limiter = threadpool_limits(limits=dict.fromkeys(libraries, 1))
                if cls._limiter is None:  # what the last release restores
                    cls._limiter = limiter
            cls._holders += 1

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._holders = max(0, cls._holders - 1)
            if cls._holders == 0 and cls._limiter is not None:
                cls._limiter.restore_original_limits()
                cls._limiter = None


def numpy_blas_libraries() -> list[str]:
    """Paths of the BLAS libraries loaded from numpy's own installation (``numpy.libs`` beside
    the package in Linux and Windows wheels, ``numpy/.dylibs`` in macOS wheels)."""
    import numpy
    from threadpoolctl import ThreadpoolController

    package = Path(numpy.__file__).resolve().parent
    homes = (package, package.with_name(package.name + ".libs"))
    found = []
    for library in ThreadpoolController().select(user_api="blas").lib_controllers:
        path = Path(library.filepath).resolve()
        if any(path.is_relative_to(home) for home in homes):
            found.append(library.filepath)
    return found


class ThreadRuntime:
    """Real time and the dispatcher's thread pools (see the module docstring). ``close`` stops its
    timer thread and releases its hold on ``SingleThreadedBlas``."""

    def __init__(self, pools: Callable[[str], ThreadPoolExecutor]) -> None:
        self._pools = pools
        self._timers = TimerThread()
        self._closed = False
        SingleThreadedBlas.acquire()

    def now(self) -> float:
        return time.monotonic()

    def start(self, pool: str, call: Callable[[], Any], done: Callable[[Outcome], None]) -> Future[None]:
        def job() -> None:
            outcome: Outcome
            try:
                wall, cpu = time.perf_counter(), time.thread_time()
                result = call()
                outcome = (result, time.perf_counter() - wall, time.thread_time() - cpu)
            except BaseException as exc:  # handed to done: no waiting sample may hang
                outcome = exc
            done(outcome)

        return self._pools(pool).submit(job)

    def call_later(self, delay: float, fn: Callable[[], None]) -> _Timer:
        return self._timers.call_later(delay, fn)

    def queue(self) -> Waitable[Any]:
        return _ThreadQueue()

    def close(self) -> None:
        """Stop the timer thread; release the BLAS limit (idempotent)."""
        self._timers.close()
        if not self._closed:
            self._closed = True
            SingleThreadedBlas.release()


class _ThreadQueue(queue.Queue[Any]):
    def poll(self) -> Any:
        try:
            return self.get_nowait()
        except queue.Empty:
            return None


class Stalled(RuntimeError):
    """The virtual event loop ran dry while the driver still waited (a scheduling bug)."""


class VirtualRuntime:
    """A discrete-event loop with a virtual clock (see the module docstring).

    ``pool_sizes`` gives each pool's concurrency limit. ``charge(seconds, cpu, hold)``, called by
    a simulated backend inside a call, adds to that call's virtual duration: ``seconds`` of
    waiting (a remote model, a sleep) — spent holding the lock ``hold`` when given (one in-process
    model behind a lock serves one call at a time) — and then ``cpu`` seconds of computing, which
    need one of ``cpus`` processors (first come, first served; ``None``: as many as asked for).
    ``busy`` holds the virtual seconds each pool's slots were occupied; ``cpu_busy`` the
    processors'.
    """

    def __init__(self, pool_sizes: dict[str, int], *, cpus: int | None = None) -> None:
        self.clock = 0.0
        self.sizes = dict(pool_sizes)
        self.cpus = cpus
        self.busy: dict[str, float] = {name: 0.0 for name in pool_sizes}
        self.cpu_busy = 0.0
        self._running: dict[str, int] = {name: 0 for name in pool_sizes}
        self._waiting: dict[str, deque[tuple[Callable[[], Any], Callable[[Outcome], None], Future[None]]]] = {
            name: deque() for name in pool_sizes
        }
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._charged: list[Any] | None = None
        self._queues: dict[str, deque[tuple[float, Callable[[], None]]]] = {}
        self._holding: dict[str, int] = {}

    # -- clock and events ---------------------------------------------------------------------
    def now(self) -> float:
        return self.clock

    def charge(self, seconds: float, cpu: float = 0.0, hold: str | None = None) -> None:
        """Add ``seconds`` of waiting (holding the lock ``hold``) and ``cpu`` seconds of computing
        to the call being run."""
        if self._charged is None:
            raise RuntimeError("charge() outside a call started by this runtime")
        self._charged[0] += max(0.0, float(seconds))
        self._charged[1] += max(0.0, float(cpu))
        if hold is not None:
            self._charged[2] = hold

    def _at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._events, (when, next(self._seq), fn))

    def call_later(self, delay: float, fn: Callable[[], None]) -> _Timer:
        timer = _Timer()
        self._at(self.clock + max(0.0, delay), lambda: None if timer.cancelled else fn())
        return timer

    def step(self) -> bool:
        """Run the next event (advancing the clock to it); False when none is left."""
        if not self._events:
            return False
        when, _, fn = heapq.heappop(self._events)
        self.clock = max(self.clock, when)
        fn()
        return True

    # -- pools --------------------------------------------------------------------------------
    def start(self, pool: str, call: Callable[[], Any], done: Callable[[Outcome], None]) -> Future[None]:
        future: Future[None] = Future()
        self._waiting[pool].append((call, done, future))
        self._fill(pool)
        return future

    def _fill(self, pool: str) -> None:
        while self._waiting[pool] and self._running[pool] < self.sizes[pool]:
            call, done, future = self._waiting[pool].popleft()
            self._running[pool] += 1
            self._charged = [0.0, 0.0, None]
            outcome: Outcome
            try:
                result = call()
                outcome = (result, 0.0, 0.0)  # seconds are filled in when the call ends
            except BaseException as exc:
                outcome = exc
            wait, cpu, hold = self._charged
            self._charged = None
            finish = partial(self._finish, pool, done, outcome, future, self.clock)
            computed = finish
            if cpu > 0:
                computed = (
                    partial(self._use, "cpu", cpu, finish)
                    if self.cpus is not None
                    else partial(self._at_delay, cpu, finish)
                )
            if hold is not None:
                self._use(hold, wait, computed)
            else:
                self._at(self.clock + wait, computed)

    def _at_delay(self, delay: float, fn: Callable[[], None]) -> None:
        self._at(self.clock + delay, fn)

    def _use(self, resource: str, seconds: float, then: Callable[[], None]) -> None:
        """Hold one unit of ``resource`` (``cpu``: ``cpus`` units; a lock: one) for ``seconds``."""
        self._queues.setdefault(resource, deque()).append((seconds, then))
        self._serve(resource)

    def _serve(self, resource: str) -> None:
        capacity = (self.cpus or 1) if resource == "cpu" else 1
        queue_ = self._queues[resource]
        while queue_ and self._holding.get(resource, 0) < capacity:
            seconds, then = queue_.popleft()
            self._holding[resource] = self._holding.get(resource, 0) + 1
            if resource == "cpu":
                self.cpu_busy += seconds
            self._at(self.clock + seconds, partial(self._release, resource, then))

    def _release(self, resource: str, then: Callable[[], None]) -> None:
        self._holding[resource] -= 1
        self._serve(resource)
        then()

    def _finish(
        self,
        pool: str,
        done: Callable[[Outcome], None],
        outcome: Outcome,
        future: Future[None],
        started: float,
    ) -> None:
        self._running[pool] -= 1
        seconds = self.clock - started
        self.busy[pool] += seconds
        if not isinstance(outcome, BaseException):
            outcome = (outcome[0], seconds, 0.0)
        try:
            done(outcome)
        finally:
            future.set_result(None)
            self._fill(pool)

    # -- the driver's queue -------------------------------------------------------------------
    def queue(self) -> Waitable[Any]:
        return _VirtualQueue(self)


class _VirtualQueue:
    def __init__(self, runtime: VirtualRuntime) -> None:
        self._runtime = runtime
        self._items: deque[Any] = deque()

    def put(self, item: Any) -> None:
        self._items.append(item)

    def get(self) -> Any:
        while not self._items:
            if not self._runtime.step():
                raise Stalled("the virtual clock has no event left but the driver is still waiting")
        return self._items.popleft()

    def poll(self) -> Any:
        return self._items.popleft() if self._items else None
