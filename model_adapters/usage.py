"""Token and cost accounting for one backend (one role), safe to update from many threads.

Counts what was actually paid for: every successful call adds its token usage (prompt,
completion and reasoning tokens). Cost is the server's own figure when it reports one
(OpenRouter's ``usage.cost``), else computed from a price table in USD per million tokens
(``prices: {input_per_million: 0.2, output_per_million: 0.6}``), else unknown (``None``).
Stage-cache hits never reach the backend, so a resumed run shows only the new spending.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model_adapters.contracts import TokenUsage
from model_adapters.errors import OptionsError


@dataclass(frozen=True)
class Prices:
    """USD per million tokens."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0

    @classmethod
    def from_options(cls, value: Mapping[str, Any] | None) -> Prices | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise OptionsError(
                "prices must be a mapping like {input_per_million: 0.2, output_per_million: 0.6}"
            )
        unknown = sorted(set(value) - {"input_per_million", "output_per_million"})
        if unknown:
            raise OptionsError(
                f"prices: unknown field(s) {', '.join(unknown)}; "
                "known: input_per_million, output_per_million (USD)"
            )
        return cls(**{k: float(v) for k, v in value.items()})

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


class UsageMeter:
    """Counts of one role's requests, their attempts, tokens and cost.

    A *request* is one call of the backend (``requests`` counts every one, ``failures`` those that
    failed after their retries); each try on the wire is an *attempt* (``retries`` = attempts beyond
    each request's first). ``errors`` counts failed attempts by error kind.
    """

    def __init__(self, prices: Prices | None = None) -> None:
        self.prices = prices
        self._lock = threading.Lock()
        self.requests = 0
        self.attempts = 0
        self.failures = 0
        self.errors: dict[str, int] = {}
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reasoning_tokens = 0
        self.images = 0
        self._reported_cost = 0.0
        self._reported_calls = 0
        self._computed_cost = 0.0

    def record_request(self, *, images: int = 0) -> None:
        with self._lock:
            self.requests += 1
            self.images += images

    def record_attempt(self, failure: str | None) -> None:
        """One attempt on the wire; ``failure`` is its error kind, ``None`` when it succeeded."""
        with self._lock:
            self.attempts += 1
            if failure is not None:
                self.errors[failure] = self.errors.get(failure, 0) + 1

    def record_success(self, usage: TokenUsage | None, *, reported_cost: object = None) -> None:
        usage = usage or TokenUsage()
        with self._lock:
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
            self.reasoning_tokens += usage.reasoning_tokens
            if isinstance(reported_cost, (int, float)) and not isinstance(reported_cost, bool):
                self._reported_cost += float(reported_cost)
                self._reported_calls += 1
            elif self.prices is not None:
                self._computed_cost += self.prices.cost(usage.prompt_tokens, usage.completion_tokens)

    def record_failure(self) -> None:
        with self._lock:
            self.failures += 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            succeeded = self.requests - self.failures
            if self._reported_calls:
                cost: float | None = self._reported_cost + self._computed_cost
                source = "reported" if self._reported_calls == succeeded else "reported+price_table"
            elif self.prices is not None:
                cost, source = self._computed_cost, "price_table"
            else:
                cost, source = None, None
            return {
                "requests": self.requests,
                "attempts": self.attempts,
                "retries": max(0, self.attempts - self.requests),
                "failures": self.failures,
                "errors": dict(sorted(self.errors.items())),
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "reasoning_tokens": self.reasoning_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "images": self.images,
                "cost_usd": None if cost is None else round(cost, 6),
                "cost_source": source,
            }


def role_usage(backends: Mapping[str, Any]) -> dict[str, Any]:
    """``{"roles": {role: backend.usage()}, "cost_usd": total or None}`` for the results file.

    Backends without a ``usage()`` method (the calibration world, detectors) are left out. The
    same backend object under two roles is reported once, under its first role.
    """
    seen: set[int] = set()
    roles: dict[str, Any] = {}
    for role, backend in backends.items():
        usage = getattr(backend, "usage", None)
        if backend is None or not callable(usage) or id(backend) in seen:
            continue
        seen.add(id(backend))
        roles[role] = usage()
    costs = [u.get("cost_usd") for u in roles.values() if isinstance(u, Mapping)]
    known = [c for c in costs if isinstance(c, (int, float))]
    return {"roles": roles, "cost_usd": round(sum(known), 6) if known else None}
