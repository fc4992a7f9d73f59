"""The negative control of the runtime comparison: re-queries answered about the ORIGINAL picture.

A runtime that lost the edited image (sent the baseline's picture again) must score like the
``prior`` checkpoint: the model repeats its baseline answer and cites the cues the edits removed.
``OriginalImageTarget`` wraps any ``VisionChatModel`` and does exactly that wrong thing on
purpose, so the comparison shows it can fail. Calibration images only: an edit keeps a scene's
background (context tint and texture seed), which identifies the original it was made from.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from PIL import Image

from edct_task.calibration.scenes import scene_of
from model_adapters.contracts import ChatMessage, Completion, GenerationParams


class OriginalImageTarget:
    """A target that sends the first picture seen of each scene in place of any later (edited) one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"original-image({getattr(inner, 'name', type(inner).__name__)})"
        self._first: dict[tuple[str, str, int], Image.Image] = {}
        self._lock = threading.Lock()
        self.swapped = 0
        """How many images were replaced by their originals."""

    def identity(self) -> dict[str, Any]:
        return {"control": "original-image", "inner": self.inner.identity()}

    def original(self, image: Image.Image) -> Image.Image:
        scene = scene_of(image)
        if scene is None:
            raise ValueError("the original-image control needs calibration images (edct_scene metadata)")
        key = (scene.family, scene.context, scene.texture_seed)
        with self._lock:
            first = self._first.setdefault(key, image)
            if first is not image and first.tobytes() != image.tobytes():
                self.swapped += 1
        return first

    def swap(self, conversation: Sequence[ChatMessage]) -> list[ChatMessage]:
        return [replace(m, images=tuple(self.original(i) for i in m.images)) for m in conversation]

    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]:
        return self.inner.generate([self.swap(c) for c in conversations], params)
