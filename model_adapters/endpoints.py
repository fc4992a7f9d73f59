"""Several servers behind one role: least-outstanding-requests balancing and dead-endpoint removal.

A role may name several base URLs (say one vLLM server per GPU node). The openai client talks to
one base URL, so balancing happens one layer down, in its httpx transport: ``RoutingTransport``
sends every *attempt* (a retry included) to the live endpoint with the fewest attempts in flight
(ties: the one that has served fewest). An endpoint whose connection fails, times out or answers
5xx ``dead_after`` times in a row leaves the rotation for ``cooldown_s``; then a health check
(``GET <base_url>/<health_path>``) brings it back when it answers. The last live endpoint is never
removed: with one server left, the client's backoff is the right tool. The clock is injectable.

No maintained piece does this for the openai client (it has one ``base_url``); litellm's Router
does, but brings its own client, retry policy and error hierarchy for a hundred lines of code.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from model_adapters.errors import Timeout, TransientBackendError

_DOWN_KINDS = frozenset({Timeout.kind, TransientBackendError.kind})
"""Attempt failures that count against an endpoint's health (others are the request's fault)."""


def redact_url(url: str) -> str:
    """``scheme://host[:port]/path`` without user info, query or fragment (they may carry keys)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


@dataclass
class Endpoint:
    """One server. ``url`` is the base URL used for requests; ``label`` is safe to record."""

    url: str
    label: str
    outstanding: int = 0
    served: int = 0
    errors: int = 0
    consecutive_failures: int = 0
    dead_until: float | None = None
    removals: int = 0

    @property
    def alive(self) -> bool:
        return self.dead_until is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.label,
            "requests": self.served,
            "errors": self.errors,
            "alive": self.alive,
            "removals": self.removals,
        }


class EndpointPool:
    def __init__(
        self,
        urls: Sequence[str],
        *,
        dead_after: int = 3,
        cooldown_s: float = 30.0,
        health: Callable[[Endpoint], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("at least one endpoint URL is needed")
        if dead_after < 1 or cooldown_s < 0:
            raise ValueError("need dead_after >= 1 and cooldown_s >= 0")
        self.endpoints = [Endpoint(url.rstrip("/"), redact_url(url)) for url in urls]
        self.dead_after = dead_after
        self.cooldown_s = cooldown_s
        self.health = health
        self.clock = clock
        self._lock = threading.Lock()

    def acquire(self) -> Endpoint:
        """The endpoint for the next attempt (counted as outstanding until ``release``)."""
        self._recheck_dead()
        with self._lock:
            live = [e for e in self.endpoints if e.alive]
            if not live:  # only reachable when every endpoint failed its health check
                wait = min(e.dead_until or 0.0 for e in self.endpoints) - self.clock()
                raise TransientBackendError(
                    f"all {len(self.endpoints)} endpoints are out of rotation; "
                    f"next health check in {max(0.0, wait):.1f} s"
                )
            best = min(live, key=lambda e: (e.outstanding, e.served))
            best.outstanding += 1
            return best

    def release(self, endpoint: Endpoint, failure: str | None) -> None:
        """``failure``: ``None`` for a success, else the attempt's error kind (``errors.*.kind``)."""
        with self._lock:
            endpoint.outstanding -= 1
            endpoint.served += 1
            if failure is None:
                endpoint.consecutive_failures = 0
                return
            endpoint.errors += 1
            if failure not in _DOWN_KINDS:
                return
            endpoint.consecutive_failures += 1
            others_alive = any(e.alive for e in self.endpoints if e is not endpoint)
            if endpoint.alive and endpoint.consecutive_failures >= self.dead_after and others_alive:
                endpoint.dead_until = self.clock() + self.cooldown_s
                endpoint.removals += 1

    def _recheck_dead(self) -> None:
        due: list[Endpoint] = []
        with self._lock:
            now = self.clock()
            for e in self.endpoints:
                if e.dead_until is not None and now >= e.dead_until:
                    e.dead_until = now + self.cooldown_s  # one checker at a time
                    due.append(e)
        for e in due:
            healthy = True if self.health is None else _safe_check(self.health, e)
            with self._lock:
                if healthy:
                    e.dead_until = None
                    e.consecutive_failures = 0

    def stats(self) -> list[dict[str, Any]]:
        with self._lock:
            return [e.as_dict() for e in self.endpoints]


def _safe_check(health: Callable[[Endpoint], bool], endpoint: Endpoint) -> bool:
    try:
        return bool(health(endpoint))
    except Exception:
        return False


class RoutingTransport(httpx2.BaseTransport):
    """The openai client's transport: re-addresses each attempt to the endpoint the pool picks.

    The client is built on the first base URL; a request's URL below it is moved to the chosen
    endpoint. At most ``concurrency`` attempts are in flight (a waiting attempt blocks, it never
    times out). ``review(response)`` may replace a received response (the chat client turns
    replies that are not OpenAI-shaped into the error status they stand for); ``classify``
    names an attempt's failure kind (``None``: success), which goes to the pool's health and to
    ``on_attempt`` (the usage meter).
    """

    def __init__(
        self,
        pool: EndpointPool,
        inner: httpx2.BaseTransport,
        *,
        concurrency: int,
        classify: Callable[[httpx2.Response | None, Exception | None], str | None],
        review: Callable[[httpx2.Response], httpx2.Response] = lambda response: response,
        on_attempt: Callable[[str | None], None] = lambda kind: None,
        health_path: str = "models",
        health_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.pool = pool
        self.inner = inner
        self.classify = classify
        self.review = review
        self.on_attempt = on_attempt
        self.health_path = health_path.strip("/")
        self.health_headers = dict(health_headers or {})
        self._primary = str(httpx2.URL(pool.endpoints[0].url))
        self._slots = threading.BoundedSemaphore(concurrency)
        pool.health = self.healthy  # health checks go over the same wire, uncounted

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        with self._slots:
            try:
                endpoint = self.pool.acquire()
            except TransientBackendError as exc:  # the client retries it like a refused connection
                self.on_attempt(TransientBackendError.kind)
                raise httpx2.ConnectError(str(exc), request=request) from None
            self._readdress(request, endpoint.url)
            response: httpx2.Response | None = None
            error: Exception | None = None
            try:
                response = self.inner.handle_request(request)
                response.read()
                response = self.review(response)
                return response
            except Exception as exc:
                error = exc
                if response is not None:
                    response.close()
                raise
            finally:
                kind = self.classify(response, error)
                self.pool.release(endpoint, kind)
                self.on_attempt(kind)

    def _readdress(self, request: httpx2.Request, base: str) -> None:
        url = str(request.url)
        if base == self._primary or not url.startswith(self._primary):
            return
        request.url = httpx2.URL(base + url[len(self._primary) :])
        request.headers["Host"] = request.url.netloc.decode("ascii")

    def healthy(self, endpoint: Endpoint) -> bool:
        """``GET <base>/<health_path>`` (with the key) answers below 400 within 10 s."""
        url = f"{endpoint.url}/{self.health_path}" if self.health_path else endpoint.url
        request = httpx2.Request(
            "GET", url, headers=self.health_headers, extensions={"timeout": httpx2.Timeout(10.0).as_dict()}
        )
        try:
            response = self.inner.handle_request(request)
            response.read()
        except httpx2.HTTPError:
            return False
        return response.status_code < 400

    def close(self) -> None:
        self.inner.close()
