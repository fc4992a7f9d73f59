"""The mask-provider contract: find the edit's target object in an image and give its mask.

Detector + segmenter backends (OWLv2, Grounding DINO, Moondream, OpenCV cascades; SAM2, GrabCut)
and the calibration world's oracle all implement ``MaskProvider``. "Target not found" is a
``Localization`` with ``found=False``, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]
"""(x0, y0, x1, y1) in pixels of the searched image."""


@dataclass(frozen=True)
class Localization:
    """Where the target is in one image."""

    found: bool
    mask: np.ndarray | None = None
    """Boolean H×W mask of the target (union over all detections), None when not found."""
    boxes: tuple[Box, ...] = field(default=())
    scores: tuple[float, ...] = field(default=())
    detail: str = ""
    """Human-readable note: which backend, how many boxes, why nothing was found."""


@runtime_checkable
class MaskProvider(Protocol):
    name: str

    def locate(self, image: Image.Image, target: str) -> Localization: ...


def weights_identity(backend: str, model: str, revision: str | None, **params: object) -> dict[str, object]:
    """The identity of a backend that loads weights (recorded in results and cache keys): what it
    is, which weights at which revision, and every parameter that changes its output."""
    return {"backend": backend, "model": model, "revision": revision, **params}
