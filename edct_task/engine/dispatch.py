"""Answering requests: the handler table, wrapped by the stage cache, watched by observers.

``Dispatcher`` is the one request resolver of a run. ``resolve`` takes one round of requests (from
any number of samples) and returns their replies in order; ``submit`` takes one request and
returns the future of its reply. Either way identical requests in flight are sent once; the
stage cache answers what it knows (``CachedHandler``, the shape of lm-eval's ``CachingLM``: same
interface as the handler it wraps, only cache misses reach the backend, only successes are
stored); the misses are cut into each handler's batches and run on its pool. Statistics, progress
bars and the call log are ``Observer``s; none of them changes a reply.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Protocol

from tqdm import tqdm

from edct_task.core.requests import Failure, Request
from edct_task.engine.handlers import Finishing, Handler, HandlerTable
from edct_task.engine.runtime import Outcome, Runtime, ThreadRuntime
from edct_task.engine.stage_cache import StageCache, fingerprint
from edct_task.engine.storage import storage_error

log = logging.getLogger(__name__)

LOCAL_POOL = "local"
"""The pool of the work a handler does after its backend answered (``handlers.Finishing``)."""
LOCAL_THREADS = 2
"""Its threads: the work is this machine's CPU (encoding, hashing, writing an image)."""

STAGES = ("target", "concepts", "instructions", "edit_parse", "edit", "verify", "judge")


class Observer(Protocol):
    """Watches requests go by; never changes a reply."""

    def issued(self, stage: str) -> None: ...
    def answered(
        self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0, local_cpu: float = 0.0
    ) -> None:
        """``how``: ``hit`` (cache or a twin in the round), ``call`` (a backend answered), ``failure``;
        ``seconds`` of wall time the backend took (its slot in the role's pool), ``cpu`` seconds
        of CPU time the whole call took, of which ``local_cpu`` ran after the backend answered,
        outside its slot (a handler's ``finish``: storing an edited image)."""
        ...

    def close(self) -> None: ...


@dataclass
class CallStats:
    """Backend calls, cache hits, failures and seconds per stage (results.json ``calls``)."""

    calls: dict[str, int] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    """CPU time of the calling threads per stage (verification, image encoding, in-process models)."""
    local_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """The part of ``cpu_seconds`` spent after the backend answered, outside its slot (a
    handler's ``finish``); the rest held a slot of the role's pool."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def issued(self, stage: str) -> None:
        pass

    def answered(
        self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0, local_cpu: float = 0.0
    ) -> None:
        bucket = {"hit": self.cache_hits, "call": self.calls, "failure": self.failures}[how]
        with self._lock:
            bucket[stage] = bucket.get(stage, 0) + 1
            if how == "call":
                self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
            if how != "hit":
                self.cpu_seconds[stage] = self.cpu_seconds.get(stage, 0.0) + cpu
                if local_cpu:
                    self.local_cpu_seconds[stage] = self.local_cpu_seconds.get(stage, 0.0) + local_cpu

    def close(self) -> None:
        pass

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "cache_hits": dict(self.cache_hits),
            "failures": dict(self.failures),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "cpu_seconds": {k: round(v, 3) for k, v in self.cpu_seconds.items()},
            **(
                {"local_cpu_seconds": {k: round(v, 3) for k, v in self.local_cpu_seconds.items()}}
                if self.local_cpu_seconds
                else {}
            ),
        }


class CallLog:
    """One JSON line per finished backend call: ``{"key", "stage", "seconds"}`` (flushed)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def issued(self, stage: str) -> None:
        pass

    def answered(
        self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0, local_cpu: float = 0.0
    ) -> None:
        if how != "call":
            return
        with self._lock:
            self._file.write(json.dumps({"key": key, "stage": stage, "seconds": round(seconds, 4)}) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


class Progress:
    """Progress per stage: one tqdm bar per stage on a terminal; without one (CI logs, ``nohup``) a
    heartbeat line every ``every`` seconds whether or not a call finished — the run's name, the
    elapsed time, samples done/total with an ETA, and done/issued per stage — and a last line at
    the end (no cursor escapes in logs).

    The ETA is the elapsed time per finished sample times the samples left; "ETA –" until the first
    sample finishes. Per-stage totals are the requests issued so far (later edits and re-queries
    are issued as samples reach them), so the samples line is the one that says how far the run is.
    """

    def __init__(
        self,
        *,
        stream: Any = None,
        every: float = 30.0,
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every
        self.name = name
        self.clock = clock
        self._lock = threading.Lock()
        self._bars: dict[str, tqdm[NoReturn]] = {}
        self._issued: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self._started = clock()
        self._samples_total: int | None = None
        self._samples_done = 0
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if not self.tty and every > 0:
            self._beat = threading.Thread(target=self._heartbeat, name="edct-progress", daemon=True)
            self._beat.start()

    def expect(self, samples: int) -> None:
        """The number of samples the run will finish (for done/total and the ETA)."""
        with self._lock:
            self._samples_total = samples

    def sample_done(self, _record: object = None) -> None:
        """One sample finished (usable as a schedule's ``on_record``)."""
        with self._lock:
            self._samples_done += 1

    def issued(self, stage: str) -> None:
        with self._lock:
            self._issued[stage] = self._issued.get(stage, 0) + 1
            if self.tty:
                bar = self._bars.get(stage)
                if bar is None:
                    bar = self._bars[stage] = tqdm(
                        total=0,
                        desc=f"{stage:>12}",
                        position=STAGES.index(stage) if stage in STAGES else len(STAGES),
                        leave=True,
                        dynamic_ncols=True,
                        unit="req",
                        file=self.stream,
                    )
                bar.total = (bar.total or 0) + 1
                bar.refresh()

    def answered(
        self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0, local_cpu: float = 0.0
    ) -> None:
        with self._lock:
            self._done[stage] = self._done.get(stage, 0) + 1
            if self.tty:
                self._bars[stage].update(1)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.every):
            self.line()

    def line(self) -> str:
        """Print (and return) one progress line."""
        with self._lock:
            text = status_line(
                self.name,
                self.clock() - self._started,
                self._samples_done,
                self._samples_total,
                {s: (self._done.get(s, 0), n) for s, n in self._issued.items()},
            )
        print(text, file=self.stream, flush=True)
        return text

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        with self._lock:
            for bar in self._bars.values():
                bar.close()
            last = not self.tty and bool(self._issued)
        if last:
            self.line()


def _duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def status_line(
    name: str, elapsed: float, done: int, total: int | None, stages: dict[str, tuple[int, int]]
) -> str:
    """``edct: my-run 2m05s: samples 40/300, ETA 13m33s; target 120/130, judge 60/64``."""
    head = f"edct: {name + ' ' if name else ''}{_duration(elapsed)}"
    if total is not None:
        eta = "–" if done == 0 else _duration(elapsed / done * max(0, total - done))
        head += f": samples {done}/{total}, ETA {eta}"
    parts = [f"{s} {d}/{n}" for s, (d, n) in stages.items()]
    return head + ("; " + ", ".join(parts) if parts else "")


class CachedHandler:
    """A handler behind the stage cache, with the handler's own interface plus ``cached``."""

    def __init__(self, inner: Handler[Any], cache: StageCache) -> None:
        self.inner, self.cache = inner, cache
        self.pool, self.batch_size = inner.pool, inner.batch_size
        self.stage, self.key, self.encode, self.decode = inner.stage, inner.key, inner.encode, inner.decode
        self.finisher = inner if isinstance(inner, Finishing) else None
        self.finishes = self.finisher is not None

    def cached(self, key: str) -> object | None:
        """The cached reply, or None: a miss, or an entry that cannot be used any more (a value of
        the wrong shape, an image it names missing or damaged), which is then recomputed."""
        value = self.cache.get(key)
        if value is None:
            return None
        try:
            return self.inner.decode(value)
        except Exception as exc:
            why = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            log.warning(
                "stage cache: entry %s… cannot be used (%s: %s); recomputing it",
                key[:12],
                type(exc).__name__,
                why,
            )
            return None

    def backend(self, batch: Sequence[Request]) -> list[object]:
        """The backend's part of a call (it holds a slot of the handler's pool)."""
        return self.inner.call(batch)

    def finish_keyed(self, batch: Sequence[Request], keys: Sequence[str], raw: list[object]) -> list[object]:
        """The handler's ``finish`` of the backend's replies, then every success stored."""
        replies = self.finisher.finish(batch, raw) if self.finisher is not None else raw
        for request, key, reply in zip(batch, keys, replies, strict=True):
            if not isinstance(reply, Failure):  # errors and refusals are never cached
                try:
                    self.cache.put(key, self.inner.encode(reply), stage=self.inner.stage(request))
                except Exception as exc:
                    stop = storage_error(exc)
                    if stop is None:
                        raise
                    raise stop from exc
        return replies


class _Uncached:
    """The same surface as ``CachedHandler`` for a run without a stage cache."""

    def __init__(self, inner: Handler[Any]) -> None:
        self.inner = inner
        self.pool, self.batch_size, self.stage, self.key = (
            inner.pool,
            inner.batch_size,
            inner.stage,
            inner.key,
        )
        self.finisher = inner if isinstance(inner, Finishing) else None
        self.finishes = self.finisher is not None

    def cached(self, key: str) -> object | None:
        return None

    def backend(self, batch: Sequence[Request]) -> list[object]:
        return self.inner.call(batch)

    def finish_keyed(self, batch: Sequence[Request], keys: Sequence[str], raw: list[object]) -> list[object]:
        return self.finisher.finish(batch, raw) if self.finisher is not None else raw


@dataclass(frozen=True)
class Concurrency:
    """Calls in flight per pool."""

    target: int = 1
    text: int = 16
    edit: int = 8
    verify: int = 2


class _Batcher:
    """Continuous micro-batching of one handler's requests (the target's), the way a serving engine
    batches: a batch goes out when ``size`` requests wait, ``window_s`` after the first of them
    arrived, or as soon as a slot frees while requests wait (``slots`` batches in flight); a batch
    takes the requests of the samples furthest along first (``furthest_first``).

    One exception to "as soon as a slot frees": when the batch that came back held first turns
    and fewer than a batch of requests past their first turn wait (a run's start, where hundreds
    of first questions queue), that batch's samples are about to send the run's furthest requests
    — their next turns, which the driver issues as it takes the replies. The freed slot then
    waits for them up to one batch window (or until a batch of them is there) instead of sending
    yet another batch of first questions; otherwise the first explanations wait a whole batch
    longer and the pools after them (the editors, a run's slowest) start that much later. A hold
    costs the slot at most one window, what an unfilled batch waits anyway.

    Driven by events (an arrival, the window's timer, a freed slot) on the dispatcher's
    ``Runtime``, so the same batching runs on threads and on the virtual clock of ``edct
    estimate``."""

    def __init__(
        self,
        send: Callable[[list[_Item]], Future[None]],
        size: int,
        slots: int,
        window_s: float,
        runtime: Runtime,
    ) -> None:
        self._send, self.size, self.window_s, self._rt = send, max(1, size), window_s, runtime
        self._free = slots
        self._items: list[_Item] = []
        self._first: float | None = None
        self._hold_until: float | None = None
        """While set: a freed slot waits for follow-ups (see the class docstring) until then."""
        self._past_first = 0
        """Waiting requests past their sample's first turn."""
        self._lock = threading.RLock()
        self._timer: Any = None
        self._closed = False

    def add(self, item: _Item) -> None:
        with self._lock:
            if not self._items:
                self._open_window()
            self._items.append(item)
            self._past_first += progress(item[0]) > FIRST_TURN
            self._pump()

    def _open_window(self) -> None:
        self._first = self._rt.now()
        self._timer = self._rt.call_later(self.window_s, self._due)  # an earlier one firing is harmless

    def _due(self) -> None:
        with self._lock:
            if not self._closed:
                self._pump()

    def _release_after(self, returned: list[_Item], _f: Future[None]) -> None:
        """A batch came back: its slot is free again (a hold for its follow-ups may start)."""
        with self._lock:
            self._free += 1
            if (
                self._items
                and self._past_first < self.size
                and any(progress(r) <= FIRST_TURN for r, _, _ in returned)
            ):
                self._hold_until = self._rt.now() + self.window_s
                self._rt.call_later(self.window_s, self._due)
            self._pump()

    def _holding(self) -> bool:
        """Whether a freed slot still waits for the follow-ups of the batch that came back: until
        the hold's window passes or a batch of requests past their first turn is waiting."""
        if self._hold_until is None:
            return False
        if self._past_first >= self.size or self._rt.now() >= self._hold_until:
            self._hold_until = None
            return False
        return True

    def _pump(self) -> None:
        """Send batches while a slot is free and a batch is full or its window has passed (and no
        hold for follow-ups is on); nothing once closed."""
        while self._items and self._free > 0 and not self._closed:
            if self._holding():
                return
            full = len(self._items) >= self.size
            if not full and (self._first is None or self._rt.now() < self._first + self.window_s):
                return
            batch, self._items = furthest_first(self._items, self.size)
            self._past_first -= sum(progress(r) > FIRST_TURN for r, _, _ in batch)
            self._free -= 1
            self._first = None
            if self._items:
                self._open_window()
            self._send(batch).add_done_callback(functools.partial(self._release_after, batch))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()


_Item = tuple[Request, str, Future[object]]
"""A request waiting for a backend: the request, its cache key, the future of its reply."""


FIRST_TURN = 1
"""``progress`` of a sample's first request to the target (its question)."""


def progress(request: Request) -> int:
    """How far the sample that sent ``request`` is: a target request's turns so far (its
    conversation's user and assistant messages); 0 for other requests."""
    conversation = getattr(request, "conversation", ())
    return sum(1 for m in conversation if m.role != "system")


def furthest_first(items: list[_Item], size: int) -> tuple[list[_Item], list[_Item]]:
    """The next batch — the ``size`` requests of the samples furthest along (``progress``), the
    earliest first among equals — and the requests left; both in arrival order.

    A sample's first edit waits for its answer, its explanation and two text calls. Batches taken
    in arrival order would answer every sample's question before explaining any (a 300-document
    run: five batches of 64), leaving the editors — a run's slowest pool — idle until then."""
    if len(items) <= size:
        return items, []
    order = sorted(range(len(items)), key=lambda i: -progress(items[i][0]))
    chosen = set(order[:size])
    batch = [item for i, item in enumerate(items) if i in chosen]
    return batch, [item for i, item in enumerate(items) if i not in chosen]


class Stopped(RuntimeError):
    """A request that was not sent because its dispatcher is closing (the run is stopping)."""


class Dispatcher:
    """The one request resolver of a run (see the module docstring): de-duplication of requests in
    flight, the stage cache, batching, the pools, timing and the observers, for both schedules of
    ``engine.driver.run_samples`` and the lmms-eval hooks (``lmms.hooks.Session``).

    ``submit`` answers one request with a future (the pipelined schedule: target requests are
    micro-batched continuously); ``resolve`` answers a round of requests at once (the lockstep
    schedule and the hooks: the misses of each request type are cut into that handler's
    batches). Both go through ``_admit`` and ``_send``. A context manager: leaving it stops the
    batchers, shuts the pools down and closes the observers.
    """

    def __init__(
        self,
        handlers: HandlerTable,
        cache: StageCache | None,
        *,
        concurrency: Concurrency = Concurrency(),
        observers: Sequence[Observer] = (),
        batch_window_s: float = 0.02,
        runtime: Runtime | None = None,
    ) -> None:
        self.handlers = {
            kind: CachedHandler(h, cache) if cache is not None else _Uncached(h)
            for kind, h in handlers.items()
        }
        self.concurrency = concurrency
        self.batch_window_s = batch_window_s
        self.stats = CallStats()
        self.observers: tuple[Observer, ...] = (self.stats, *observers)
        self._pools = {
            name: ThreadPoolExecutor(n, thread_name_prefix=f"edct-{name}")
            for name, n in {**vars(concurrency), LOCAL_POOL: LOCAL_THREADS}.items()
        }
        self._own_runtime: ThreadRuntime | None = None
        if runtime is None:  # real threads: closed with the dispatcher (its timer thread)
            runtime = self._own_runtime = ThreadRuntime(self._pools.__getitem__)
        self.runtime: Runtime = runtime
        """Time, pools, timers and queues: real threads, or a virtual clock (``runtime.py``)."""
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[object]] = {}
        self._batchers: dict[type, _Batcher] = {}
        self._closing = False
        self._sent: set[str] = set()
        """Keys of the requests this dispatcher sent to a backend."""
        self.reused = 0
        """Requests answered by a stage-cache entry this dispatcher did not write: an earlier run's
        finished calls, reused by a rerun (``edct run`` says how many)."""

    def notify(self, method: str, *args: Any) -> None:
        """Tell every observer (``issued`` / ``answered``)."""
        for o in self.observers:
            getattr(o, method)(*args)

    def submit(self, request: Request) -> Future[object]:
        """The future reply of ``request``; a miss goes to its handler's batcher or pool at once."""
        future, item = self._admit(request)
        if item is not None:
            batcher = self._batcher(type(request))
            if batcher is not None:
                batcher.add(item)
            else:
                self._send(self.handlers[type(request)], [item])
        return future

    def resolve(self, requests: Sequence[Request]) -> list[object]:
        """Replies for one round of ``requests``, in order (a storage stop is raised)."""
        futures: list[Future[object]] = []
        misses: dict[type, list[_Item]] = {}
        for request in requests:
            future, item = self._admit(request)
            futures.append(future)
            if item is not None:
                misses.setdefault(type(request), []).append(item)
        for kind, items in misses.items():
            handler = self.handlers[kind]
            size = max(1, handler.batch_size)
            for start in range(0, len(items), size):
                self._send(handler, items[start : start + size])
        return [f.result() for f in futures]

    def _admit(self, request: Request) -> tuple[Future[object], _Item | None]:
        """Count the request, then answer it from a twin in flight or the cache, or return it as a
        miss to send."""
        handler = self.handlers[type(request)]
        stage = handler.stage(request)
        self.notify("issued", stage)
        key = fingerprint(handler.key(request))
        with self._lock:
            twin = self._inflight.get(key)
            if twin is not None:
                self.notify("answered", stage, "hit", 0.0, key)
                return twin, None
            future: Future[object] = Future()
            self._inflight[key] = future
        hit = handler.cached(key)
        if hit is not None:
            with self._lock:
                self.reused += key not in self._sent
            self.notify("answered", stage, "hit", 0.0, key)
            self._settle(key, future, hit)
            return future, None
        with self._lock:
            self._sent.add(key)
        return future, (request, key, future)

    def _send(self, handler: CachedHandler | _Uncached, batch: list[_Item]) -> Future[None]:
        """Run one batch on the handler's pool (through the runtime): timed, observed, every future
        settled (a storage stop or a bug fails the batch's futures, so no waiting sample hangs).

        A handler with a ``finish`` (``handlers.Finishing``) frees its slot when the backend
        answers: the finish and the stage cache's commit run on the local pool, so the role's next
        call starts while this one's image is stored. The returned future completes once every
        reply is settled."""
        requests, keys = [r for r, _, _ in batch], [k for _, k, _ in batch]
        if self._closing:  # closed (Ctrl-C, an error): nothing new goes out; its waiters are told
            stopped: Future[None] = Future()
            for _, key, future in batch:
                self._settle(key, future, Stopped("the run is stopping: the call was not sent"))
            stopped.set_result(None)
            return stopped

        def settle(outcome: Outcome, local_cpu: float = 0.0) -> None:
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
                replies, wall, cpu = outcome
                seconds, cpu_each, local_each = wall / len(batch), cpu / len(batch), local_cpu / len(batch)
                for (request, key, future), reply in zip(batch, replies, strict=True):
                    how = "failure" if isinstance(reply, Failure) else "call"
                    self.notify("answered", handler.stage(request), how, seconds, key, cpu_each, local_each)
                    self._settle(key, future, reply)
            except BaseException as exc:
                for _, key, future in batch:
                    self._settle(key, future, exc)

        if not handler.finishes:
            return self._start(
                handler.pool, lambda: handler.finish_keyed(requests, keys, handler.backend(requests)), settle
            )
        settled: Future[None] = Future()

        def answered(outcome: Outcome) -> None:
            if isinstance(outcome, BaseException):
                settle(outcome)
                settled.set_result(None)
                return
            raw, wall, cpu = outcome

            def finished(local: Outcome) -> None:
                try:
                    if isinstance(local, BaseException):
                        settle(local)
                    else:
                        settle((local[0], wall, cpu + local[2]), local[2])
                finally:
                    settled.set_result(None)

            self.runtime.start(LOCAL_POOL, lambda: handler.finish_keyed(requests, keys, raw), finished)

        self._start(handler.pool, lambda: handler.backend(requests), answered)
        return settled

    def _start(self, pool: str, call: Callable[[], Any], done: Callable[[Outcome], None]) -> Future[None]:
        """``runtime.start``; a pool shut down by a concurrent ``close`` hands ``done`` a ``Stopped``."""
        try:
            return self.runtime.start(pool, call, done)
        except RuntimeError:
            if not self._closing:
                raise
            done(Stopped("the run is stopping: the call was not sent"))
            stopped: Future[None] = Future()
            stopped.set_result(None)
            return stopped

    def _settle(self, key: str, future: Future[object], outcome: object) -> None:
        with self._lock:
            if self._inflight.get(key) is future:
                del self._inflight[key]
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def _batcher(self, kind: type) -> _Batcher | None:
        handler = self.handlers[kind]
        if handler.batch_size <= 1:
            return None
        with self._lock:
            batcher = self._batchers.get(kind)
            if batcher is None:
                slots = int(getattr(self.concurrency, handler.pool))
                send = functools.partial(self._send, handler)
                batcher = self._batchers[kind] = _Batcher(
                    send, handler.batch_size, slots, self.batch_window_s, self.runtime
                )
            return batcher

    def close(self) -> None:
        """Stop: no batch is sent any more, the calls still queued in the role pools are cancelled
        (a run stopped by Ctrl-C or an error stops at once; a finished run has none), the calls in
        flight finish, and their local finish (the stage cache's commit) runs: the local pool is
        shut down last and never cancelled, so nothing a backend answered is lost."""
        with self._lock:
            self._closing = True
        for batcher in self._batchers.values():
            batcher.close()
        for name, pool in self._pools.items():  # LOCAL_POOL last (the dict's order)
            pool.shutdown(wait=True, cancel_futures=name != LOCAL_POOL)
        if self._own_runtime is not None:
            self._own_runtime.close()
        for o in self.observers:
            o.close()

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
