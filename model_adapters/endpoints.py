"""Several servers behind one role: least-outstanding-requests balancing and dead-endpoint removal.

A role may name several base URLs (say one vLLM server per GPU node). Every request goes to the
live endpoint with the fewest requests in flight (ties: the one that has served fewest). An
endpoint whose connection fails, times out or answers 5xx ``dead_after`` times in a row leaves the
rotation for ``cooldown_s``; after that a health check (the caller's function, e.g. ``GET
/models``) brings it back when it answers. The last live endpoint is never removed: with one
server left, the retry policy's backoff is the right tool. The clock is injectable for tests.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from model_adapters.errors import TransientBackendError


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
        """The endpoint for the next request (counted as outstanding until ``release``)."""
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

    def release(self, endpoint: Endpoint, outcome: str) -> None:
        """``outcome``: ``ok``, ``down`` (connection failure, timeout, 5xx) or ``other`` (4xx, 429…)."""
        with self._lock:
            endpoint.outstanding -= 1
            endpoint.served += 1
            if outcome == "ok":
                endpoint.consecutive_failures = 0
                return
            endpoint.errors += 1
            if outcome != "down":
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
