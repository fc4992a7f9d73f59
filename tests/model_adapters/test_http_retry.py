"""The retry policy of the HTTP editors and detectors (BFL, OpenAI images, Moondream).

The chat backends retry inside the openai client; these callers use ``model_adapters.retry``.
"""

from __future__ import annotations

import email.utils
import random

import pytest

from model_adapters.errors import RateLimited
from model_adapters.retry import RetryPolicy, retry_after_seconds


class Sleeps:
    """An injectable sleep that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def test_backoff_is_exponential_with_jitter_and_a_cap() -> None:
    class Fixed(random.Random):
        def random(self) -> float:
            return 1.0

    full = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.0)
    assert [full.delay(n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    jittered = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.5, rng=Fixed())
    assert jittered.delay(2) == 2.0  # the lowest point of [2, 4]
    spread = RetryPolicy(base_delay=1.0, jitter=0.5, rng=random.Random(1))
    waits = {round(spread.delay(3), 6) for _ in range(20)}
    assert len(waits) > 10 and all(4.0 <= w <= 8.0 for w in waits)
    assert full.delay(0, RateLimited("slow down", retry_after=30.0)) == 30.0


def test_a_very_long_retry_after_is_not_waited_for() -> None:
    sleeps = Sleeps()
    policy = RetryPolicy(max_retry_after=60.0, sleep=sleeps)

    def attempt() -> str:
        raise RateLimited("quota", retry_after=3600.0)

    with pytest.raises(RateLimited):
        policy.call(attempt)
    assert sleeps.waits == []


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"Retry-After": "12"}) == 12.0
    assert retry_after_seconds({"retry-after-ms": "250", "Retry-After": "1"}) == 0.25
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, now=lambda: 1_000_000.0) == 30.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None
