"""Simulated per-call latency for the calibration backends.

The calibration world answers in microseconds; to benchmark drivers and to test kill-and-resume
against something that behaves like a remote model, its backends accept ``latency_s`` and sleep
that long per call (per *batch* for the target, as a batched server would).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from PIL import Image

from model_adapters.contracts import ChatMessage, Completion, GenerationParams


class _Delayed:
    def __init__(self, inner: Any, latency_s: float) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        self.inner = inner
        self.latency_s = float(latency_s)
        self.name = inner.name

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()  # latency never changes outputs: not part of cache keys


class DelayedChat(_Delayed):
    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]:
        time.sleep(self.latency_s)
        return self.inner.generate(conversations, params)


class DelayedText(_Delayed):
    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        time.sleep(self.latency_s)
        return self.inner.complete(prompt, params)


class DelayedEditor(_Delayed):
    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        time.sleep(self.latency_s)
        return self.inner.edit(image, instruction, seed=seed)
