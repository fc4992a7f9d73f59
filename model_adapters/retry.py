"""Retries with exponential backoff and jitter, honouring the server's Retry-After.

``RetryPolicy.call(attempt_fn)`` runs ``attempt_fn`` until it returns or raises a non-retryable
error; the loop is tenacity's, the policy says which errors retry and how long to wait. Retryable
are the ``TransientBackendError`` family (429, 5xx, timeouts, dropped connections, malformed
replies). The wait before retry *n* (0-based) is ``base * 2**n`` capped at ``max_delay``, times a
random factor in ``[1 - jitter, 1]`` ("equal jitter" keeps requests from retrying in lock-step);
a ``RateLimited`` error's ``retry_after`` is a floor on that wait. ``sleep`` and ``rng`` are
injectable, so tests do not wait.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

from model_adapters.errors import BackendError, RateLimited

T = TypeVar("T")


@dataclass
class RetryPolicy:
    max_retries: int = 6
    """Retries after the first attempt (so at most ``max_retries + 1`` attempts)."""
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.5
    """Share of the wait that is randomised: the wait is uniform in [(1-jitter)·d, d]."""
    max_retry_after: float = 300.0
    """A Retry-After longer than this is not waited for: the error is raised instead."""
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_delay < 0 or self.max_delay < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("need max_retries >= 0, base_delay >= 0, max_delay >= 0, 0 <= jitter <= 1")

    def delay(self, retry: int, error: BaseException | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based) after ``error``."""
        ceiling = min(self.max_delay, self.base_delay * (2.0**retry))
        wait = ceiling * (1.0 - self.jitter * self.rng.random())
        if isinstance(error, RateLimited) and error.retry_after is not None:
            wait = max(wait, error.retry_after)
        return wait

    def retryable(self, exc: BaseException) -> bool:
        """A transient backend error, unless the server asked for a wait longer than we accept."""
        if not isinstance(exc, BackendError) or not exc.retryable:
            return False
        return not (isinstance(exc, RateLimited) and (exc.retry_after or 0) > self.max_retry_after)

    def call(
        self, attempt: Callable[[], T], on_retry: Callable[[BackendError, float], None] | None = None
    ) -> T:
        """Run ``attempt`` with retries (tenacity's loop; the waits are ``delay``); the last error is
        raised when they are used up."""

        def wait(state: tenacity.RetryCallState) -> float:
            return self.delay(state.attempt_number - 1, state.outcome.exception() if state.outcome else None)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if on_retry is not None and state.outcome is not None and state.next_action is not None:
                on_retry(state.outcome.exception(), state.next_action.sleep)  # type: ignore[arg-type]

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=wait,
            retry=tenacity.retry_if_exception(self.retryable),
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying(attempt)


def retry_after_seconds(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """The server's requested wait: ``retry-after-ms``, else ``Retry-After`` (seconds or HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, when.timestamp() - now())
