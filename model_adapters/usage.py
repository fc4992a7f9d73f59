"""Token and cost accounting for one backend (one role), safe to update from many threads.

Counts what was actually paid for: every successful call adds its ``usage`` block (prompt,
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
    def __init__(self, prices: Prices | None = None) -> None:
        self.prices = prices
        self._lock = threading.Lock()
        self.requests = 0
        self.attempts = 0
        self.retries = 0
        self.failures = 0
        self.errors: dict[str, int] = {}
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reasoning_tokens = 0
        self.images = 0
        self._reported_cost = 0.0
        self._reported_calls = 0
        self._computed_cost = 0.0

    def record_success(self, usage: Mapping[str, Any] | None, *, images: int = 0) -> None:
        usage = usage if isinstance(usage, Mapping) else {}
        prompt = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
        completion = _int(usage.get("completion_tokens", usage.get("output_tokens")))
        details = usage.get("completion_tokens_details") or usage.get("output_tokens_details") or {}
        reasoning = _int(details.get("reasoning_tokens")) if isinstance(details, Mapping) else 0
        reported = usage.get("cost")
        with self._lock:
            self.requests += 1
            self.images += images
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.reasoning_tokens += reasoning
            if isinstance(reported, (int, float)) and not isinstance(reported, bool):
                self._reported_cost += float(reported)
                self._reported_calls += 1
            elif self.prices is not None:
                self._computed_cost += self.prices.cost(prompt, completion)

    def record_attempt(self) -> None:
        with self._lock:
            self.attempts += 1

    def record_retry(self, kind: str) -> None:
        with self._lock:
            self.retries += 1
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def record_failure(self, kind: str) -> None:
        with self._lock:
            self.failures += 1
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            if self._reported_calls:
                cost: float | None = self._reported_cost + self._computed_cost
                source = "reported" if self._reported_calls == self.requests else "reported+price_table"
            elif self.prices is not None:
                cost, source = self._computed_cost, "price_table"
            else:
                cost, source = None, None
            return {
                "requests": self.requests,
                "attempts": self.attempts,
                "retries": self.retries,
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


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


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
