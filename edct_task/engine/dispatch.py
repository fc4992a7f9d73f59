"""Answering requests: the handler table, wrapped by the stage cache, watched by observers.

``Dispatcher.resolve`` takes one round of requests (from any number of samples) and returns their
replies in order: identical requests of a round are sent once; the stage cache answers what it
knows (``CachedHandler``, the shape of lm-eval's ``CachingLM``: same interface as the handler it
wraps, only cache misses reach the backend, only successes are stored); the misses of each
request type are cut into that handler's batches and run on its pool. Statistics, progress bars
and the call log are ``Observer``s; none of them changes a reply.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from tqdm import tqdm

from edct_task.engine.handlers import Handler, HandlerTable
from edct_task.engine.requests import Failure, Request
from edct_task.engine.stage_cache import StageCache, fingerprint
from edct_task.engine.workspace import storage_error

STAGES = ("target", "concepts", "instructions", "edit_parse", "edit", "verify", "judge")


class Observer(Protocol):
    """Watches requests go by; never changes a reply."""

    def issued(self, stage: str) -> None: ...
    def answered(self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0) -> None:
        """``how``: ``hit`` (cache or a twin in the round), ``call`` (a backend answered), ``failure``;
        ``seconds`` of wall time and ``cpu`` seconds of this thread's CPU time the call took."""
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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def issued(self, stage: str) -> None:
        pass

    def answered(self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0) -> None:
        bucket = {"hit": self.cache_hits, "call": self.calls, "failure": self.failures}[how]
        with self._lock:
            bucket[stage] = bucket.get(stage, 0) + 1
            if how == "call":
                self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
            if how != "hit":
                self.cpu_seconds[stage] = self.cpu_seconds.get(stage, 0.0) + cpu

    def close(self) -> None:
        pass

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "cache_hits": dict(self.cache_hits),
            "failures": dict(self.failures),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "cpu_seconds": {k: round(v, 3) for k, v in self.cpu_seconds.items()},
        }


class CallLog:
    """One JSON line per finished backend call: ``{"key", "stage", "seconds"}`` (flushed)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def issued(self, stage: str) -> None:
        pass

    def answered(self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0) -> None:
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
        self._bars: dict[str, tqdm] = {}
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
                bar.total += 1
                bar.refresh()

    def answered(self, stage: str, how: str, seconds: float, key: str, cpu: float = 0.0) -> None:
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

    def __init__(self, inner: Handler, cache: StageCache) -> None:
        self.inner, self.cache = inner, cache
        self.pool, self.batch_size = inner.pool, inner.batch_size
        self.stage, self.key, self.encode, self.decode = inner.stage, inner.key, inner.encode, inner.decode

    def cached(self, key: str) -> object | None:
        value = self.cache.get(key)
        return None if value is None else self.inner.decode(value)

    def call_keyed(self, batch: Sequence[Request], keys: Sequence[str]) -> list[object]:
        replies = self.inner.call(batch)
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

    def __init__(self, inner: Handler) -> None:
        self.inner = inner
        self.pool, self.batch_size, self.stage, self.key = (
            inner.pool,
            inner.batch_size,
            inner.stage,
            inner.key,
        )

    def cached(self, key: str) -> object | None:
        return None

    def call_keyed(self, batch: Sequence[Request], keys: Sequence[str]) -> list[object]:
        return self.inner.call(batch)


@dataclass(frozen=True)
class Concurrency:
    """Calls in flight per pool."""

    target: int = 1
    text: int = 16
    edit: int = 8
    verify: int = 2


class Dispatcher:
    """Answers rounds of requests through the handler table (see the module docstring).

    A context manager: leaving it shuts the pools down and closes the observers.
    """

    def __init__(
        self,
        handlers: HandlerTable,
        cache: StageCache | None,
        *,
        concurrency: Concurrency = Concurrency(),
        observers: Sequence[Observer] = (),
    ) -> None:
        self.handlers = {
            kind: CachedHandler(h, cache) if cache is not None else _Uncached(h)
            for kind, h in handlers.items()
        }
        self.concurrency = concurrency
        self.stats = CallStats()
        self.observers: tuple[Observer, ...] = (self.stats, *observers)
        self._pools = {
            name: ThreadPoolExecutor(n, thread_name_prefix=f"edct-{name}")
            for name, n in vars(concurrency).items()
        }

    def notify(self, method: str, *args: Any) -> None:
        """Tell every observer (``issued`` / ``answered``)."""
        for o in self.observers:
            getattr(o, method)(*args)

    def pool(self, name: str) -> ThreadPoolExecutor:
        return self._pools[name]

    def pool_size(self, name: str) -> int:
        return int(getattr(self.concurrency, name))

    def resolve(self, requests: Sequence[Request]) -> list[object]:
        """Replies for ``requests``, in order (see the module docstring)."""
        replies: list[object] = [None] * len(requests)
        twins: dict[str, list[int]] = {}  # key -> indices answered by the one call in flight
        misses: dict[type, list[tuple[int, str]]] = {}
        stages: list[str] = []
        for i, request in enumerate(requests):
            handler = self.handlers[type(request)]
            stage = handler.stage(request)
            stages.append(stage)
            self.notify("issued", stage)
            key = fingerprint(handler.key(request))
            if key in twins:
                twins[key].append(i)
                self.notify("answered", stage, "hit", 0.0, key)
                continue
            hit = handler.cached(key)
            if hit is not None:
                replies[i] = hit
                self.notify("answered", stage, "hit", 0.0, key)
                continue
            twins[key] = [i]
            misses.setdefault(type(request), []).append((i, key))
        futures: list[tuple[list[tuple[int, str]], Future]] = []
        for kind, items in misses.items():
            handler = self.handlers[kind]
            size = max(1, handler.batch_size)
            for start in range(0, len(items), size):
                chunk = items[start : start + size]
                batch = [requests[i] for i, _ in chunk]
                futures.append((chunk, self._pools[handler.pool].submit(self._timed, handler, batch, chunk)))
        for chunk, future in futures:
            chunk_replies, seconds, cpu = future.result()
            for (i, key), reply in zip(chunk, chunk_replies, strict=True):
                how = "failure" if isinstance(reply, Failure) else "call"
                self.notify("answered", stages[i], how, seconds / len(chunk), key, cpu / len(chunk))
                for j in twins[key]:
                    replies[j] = reply
        return replies

    @staticmethod
    def _timed(
        handler: Any, batch: list[Request], chunk: list[tuple[int, str]]
    ) -> tuple[list[object], float, float]:
        start, cpu = time.perf_counter(), time.thread_time()
        replies = handler.call_keyed(batch, [key for _, key in chunk])
        return replies, time.perf_counter() - start, time.thread_time() - cpu

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        for o in self.observers:
            o.close()

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
