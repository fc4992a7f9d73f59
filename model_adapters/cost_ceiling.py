"""The cost ceiling: one wrapper the registry puts around every paid backend that sets one.

Every paid backend (``BackendRecord.paid``) takes ``max_cost_usd``, the role's ceiling for the
run, and ``price_per_call_usd``, the price of one call where the provider's price is fixed (an
image edit, a detection). The spend is the larger of what the backend's ``usage()`` reports
(``cost_usd``: the provider's figure, or computed from ``prices``) and the calls started so far
times ``price_per_call_usd``. Before each call:

- with ``price_per_call_usd`` the next call's price is known, so a call that would take the spend
  over the ceiling is never made;
- without it the spend is known only after a call, so the first call after the ceiling was
  reached is refused (calls in flight finish: at most ``concurrency`` calls over).

The refusal is ``ProviderStop``: the run stops at once in one line (``edct run`` exits 3) and
every finished call stays cached. A backend that reports no cost (``PaidOptions.reports_cost``)
needs ``price_per_call_usd`` next to ``max_cost_usd``, or the ceiling could never be reached;
that is refused when the config is loaded.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from PIL import Image
from pydantic import Field, model_validator

from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.errors import ProviderStop
from verification.backends import BackendOptions

__all__ = ["CEILING_OPTIONS", "CostCeiling", "PaidOptions", "with_ceiling"]

CEILING_OPTIONS = ("max_cost_usd", "price_per_call_usd")
"""The options the registry takes off a paid backend's options for its wrapper."""


class PaidOptions(BackendOptions):
    """What every paid backend takes: the cost ceiling."""

    reports_cost: ClassVar[bool] = True
    """Whether the backend's ``usage()`` reports ``cost_usd``; when not, ``max_cost_usd`` needs
    ``price_per_call_usd``."""

    max_cost_usd: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="The role's cost ceiling for the run in USD: no paid call is made past it "
        "(`edct run` stops, exit 3; finished calls stay cached).",
    )
    price_per_call_usd: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="USD one call costs, where the provider's price is fixed: a call that would "
        "pass max_cost_usd is never made.",
    )

    @model_validator(mode="after")
    def _ceiling_can_be_reached(self) -> PaidOptions:
        if self.max_cost_usd is not None and self.price_per_call_usd is None and not self.reports_cost:
            raise ValueError(
                "max_cost_usd needs price_per_call_usd: this backend reports no cost, so the "
                "ceiling could never be reached"
            )
        return self


class CostCeiling:
    """A paid backend behind the ceiling (module docstring). Every attribute but the paid call
    is the backend's own (``identity``, ``usage``, ``close``, ``name`` …)."""

    def __init__(
        self, inner: Any, max_cost_usd: float | None, price_per_call_usd: float | None = None
    ) -> None:
        for value in (max_cost_usd, price_per_call_usd):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError("max_cost_usd and price_per_call_usd must be finite and >= 0")
        self.inner = inner
        self.max_cost_usd = max_cost_usd
        self.price_per_call_usd = price_per_call_usd
        self._lock = threading.Lock()
        self._started = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def spent(self) -> float:
        """USD spent so far: reported, or counted from ``price_per_call_usd`` (the larger)."""
        usage = getattr(self.inner, "usage", None)
        reported = usage().get("cost_usd") if callable(usage) else None
        counted = self._started * (self.price_per_call_usd or 0.0)
        return max(float(reported or 0.0), counted)

    def _pay(self, calls: int = 1) -> None:
        """Reserve ``calls`` calls, or ``ProviderStop`` (the module docstring)."""
        with self._lock:
            ceiling, price = self.max_cost_usd, self.price_per_call_usd
            spent = self.spent()
            if ceiling is not None:
                over = spent + calls * price > ceiling + 1e-12 if price is not None else spent >= ceiling
                if over:
                    after = f", the next call costs {price:.2f}" if price is not None else ""
                    raise ProviderStop(
                        f"{self.inner.name}: max_cost_usd {ceiling:.2f} reached "
                        f"({spent:.2f} USD spent{after}); no new paid call is made"
                    )
            self._started += calls

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


class _CeilingChat(CostCeiling):
    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]:
        self._pay(len(conversations))
        return self.inner.generate(conversations, params)


class _CeilingText(CostCeiling):
    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        self._pay()
        return self.inner.complete(prompt, params)


class _CeilingEditor(CostCeiling):
    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        self._pay()
        return self.inner.edit(image, instruction, seed=seed)


class _CeilingMasks(CostCeiling):
    def locate(self, image: Image.Image, target: str) -> Any:
        self._pay()
        return self.inner.locate(image, target)


_BY_KIND: dict[str, type[CostCeiling]] = {
    "target": _CeilingChat,
    "text": _CeilingText,
    "editor": _CeilingEditor,
    "detector": _CeilingMasks,
}


def with_ceiling(
    backend: Any, kind: str, *, max_cost_usd: float | None = None, price_per_call_usd: float | None = None
) -> Any:
    """``backend`` behind the cost ceiling of its kind's call, or as it is when neither is set."""
    if max_cost_usd is None and price_per_call_usd is None:
        return backend
    return _BY_KIND[kind](backend, max_cost_usd, price_per_call_usd)
