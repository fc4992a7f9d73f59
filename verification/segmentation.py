"""The segmenter contract: one mask per detected box.

``Segmenter.segment(image, boxes) -> list of bool H×W masks`` (one per box, in order). The
caller (``DetectAndSegment``) takes their union; dilation stays in the gate. A segmenter may
return an empty mask for a box it could not segment — the caller then falls back to the box.

Backends here need nothing beyond OpenCV: ``BoxSegmenter`` (the box itself) and
``GrabCutSegmenter`` (OpenCV GrabCut initialised with the box). SAM2 lives in
``verification.sam2_segmenter``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import cv2
import numpy as np
from PIL import Image

from verification.localization import Box
from verification.masks import boxes_to_mask

__all__ = ["BoxSegmenter", "GrabCutSegmenter", "Segmenter"]


@runtime_checkable
class Segmenter(Protocol):
    name: str

    def segment(self, image: Image.Image, boxes: Sequence[Box]) -> list[np.ndarray]: ...


class BoxSegmenter:
    """The box is the mask (no segmentation): the safest choice when the object fills its box."""

    name = "box"

    def segment(self, image: Image.Image, boxes: Sequence[Box]) -> list[np.ndarray]:
        w, h = image.size
        return [boxes_to_mask([b], (h, w)) for b in boxes]

    def identity(self) -> dict[str, object]:
        return {"backend": self.name}


class GrabCutSegmenter:
    """OpenCV GrabCut initialised with each box (colour-model graph cut, no weights needed).

    Each box is segmented in a crop around it (the box grown by ``context`` of its size on each
    side, so GrabCut sees background to model), downscaled to at most ``max_side`` pixels.
    Definite and probable foreground form the mask. When GrabCut cannot run (the box covers the
    whole crop, so there is no background) or keeps less than ``min_fill`` of the box, the mask
    for that box is empty and the caller falls back to the box.

    Parameters
    ----------
    iterations : int
        GrabCut iterations (OpenCV's ``iterCount``).
    context : float
        Margin added around the box for the crop, as a fraction of the box's size.
    max_side : int
        Longer side of the crop GrabCut runs on.
    min_fill : float
        Smallest share of the box the foreground must cover to be trusted.
    """

    name = "grabcut"

    def __init__(
        self, *, iterations: int = 5, context: float = 0.5, max_side: int = 384, min_fill: float = 0.05
    ) -> None:
        if iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {iterations}")
        if context < 0 or max_side < 32 or not 0 <= min_fill < 1:
            raise ValueError("need context >= 0, max_side >= 32 and 0 <= min_fill < 1")
        self.iterations = int(iterations)
        self.context = float(context)
        self.max_side = int(max_side)
        self.min_fill = float(min_fill)

    def identity(self) -> dict[str, object]:
        return {
            "backend": self.name,
            "iterations": self.iterations,
            "context": self.context,
            "max_side": self.max_side,
            "min_fill": self.min_fill,
        }

    def segment(self, image: Image.Image, boxes: Sequence[Box]) -> list[np.ndarray]:
        rgb = np.asarray(image.convert("RGB"))
        return [self._one(rgb, box) for box in boxes]

    def _one(self, rgb: np.ndarray, box: Box) -> np.ndarray:
        h, w = rgb.shape[:2]
        out = np.zeros((h, w), dtype=bool)
        x0, y0, x1, y1 = (float(v) for v in box)
        bw, bh = x1 - x0, y1 - y0
        if bw < 2 or bh < 2:
            return out
        cx0, cy0 = (
            max(0, int(np.floor(x0 - self.context * bw))),
            max(0, int(np.floor(y0 - self.context * bh))),
        )
        cx1, cy1 = min(w, int(np.ceil(x1 + self.context * bw))), min(h, int(np.ceil(y1 + self.context * bh)))
        crop = rgb[cy0:cy1, cx0:cx1]
        s = min(1.0, self.max_side / max(crop.shape[:2]))
        small = (
            crop
            if s == 1.0
            else cv2.resize(
                crop,
                (max(1, round(crop.shape[1] * s)), max(1, round(crop.shape[0] * s))),
                interpolation=cv2.INTER_AREA,
            )
        )
        sh, sw = small.shape[:2]
        rx0, ry0 = int(np.floor((x0 - cx0) * s)), int(np.floor((y0 - cy0) * s))
        rx1, ry1 = min(sw, int(np.ceil((x1 - cx0) * s))), min(sh, int(np.ceil((y1 - cy0) * s)))
        rx0, ry0 = max(0, rx0), max(0, ry0)
        if rx1 - rx0 < 2 or ry1 - ry0 < 2 or (rx0 == 0 and ry0 == 0 and rx1 == sw and ry1 == sh):
            return out  # no background to learn from
        gc_mask = np.zeros((sh, sw), np.uint8)
        bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
        try:
            cv2.grabCut(
                cv2.cvtColor(small, cv2.COLOR_RGB2BGR),
                gc_mask,
                (rx0, ry0, rx1 - rx0, ry1 - ry0),
                bgd,
                fgd,
                self.iterations,
                cv2.GC_INIT_WITH_RECT,
            )
        except cv2.error:
            return out
        fg = ((gc_mask == cv2.GC_FGD) | (gc_mask == cv2.GC_PR_FGD)).astype(np.uint8)
        if fg[ry0:ry1, rx0:rx1].mean() < self.min_fill:
            return out
        if s != 1.0:
            fg = cv2.resize(fg, (crop.shape[1], crop.shape[0]), interpolation=cv2.INTER_NEAREST)
        out[cy0:cy1, cx0:cx1] = fg.astype(bool)
        return out
