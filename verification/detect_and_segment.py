"""``DetectAndSegment``: a detector and a segmenter composed into one ``MaskProvider`` (steps 3–4).

The detector gives boxes for the target; the segmenter gives one mask per box; the target mask
m is their union (dilation into M stays in the gate). A box whose mask comes back empty (the
segmenter failed or kept almost nothing) contributes the box itself, and the detail says so.
No boxes → ``Localization(found=False)`` carrying the detector's reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

from verification.detection import Detections, Detector, finalize_detections
from verification.localization import Box, Localization
from verification.masks import boxes_to_mask, validate_mask
from verification.segmentation import Segmenter

__all__ = ["DetectAndSegment", "FixedBoxDetector"]


class DetectAndSegment:
    """A ``MaskProvider``: ``detector.detect`` → ``segmenter.segment`` → union of the masks.

    Parameters
    ----------
    detector : Detector
        Finds the target's boxes.
    segmenter : Segmenter
        Turns each box into a mask.
    name : str, optional
        Provider name recorded in each check; default ``"<detector>+<segmenter>"``.
    """

    def __init__(self, detector: Detector, segmenter: Segmenter, *, name: str | None = None) -> None:
        self.detector = detector
        self.segmenter = segmenter
        self.name = name or f"{detector.name}+{segmenter.name}"

    def identity(self) -> dict[str, object]:
        """What determines this provider's output (for records and cache keys)."""

        def ident(obj: object) -> object:
            fn = getattr(obj, "identity", None)
            return fn() if callable(fn) else {"backend": getattr(obj, "name", type(obj).__name__)}

        return {"name": self.name, "detector": ident(self.detector), "segmenter": ident(self.segmenter)}

    def close(self) -> None:
        """Release what the detector and the segmenter hold (an HTTP client); safe to repeat."""
        for part in (self.detector, self.segmenter):
            close = getattr(part, "close", None)
            if callable(close):
                close()

    def locate(self, image: Image.Image, target: str) -> Localization:
        dets = self.detector.detect(image, target)
        if not dets.found:
            return Localization(found=False, detail=dets.detail)
        w, h = image.size
        masks = self.segmenter.segment(image, dets.boxes)
        if len(masks) != len(dets.boxes):
            raise RuntimeError(
                f"segmenter {self.segmenter.name!r} returned {len(masks)} masks for {len(dets.boxes)} boxes"
            )
        union = np.zeros((h, w), dtype=bool)
        fallbacks = 0
        for box, mask in zip(dets.boxes, masks, strict=True):
            m = validate_mask(mask, name=f"{self.segmenter.name} mask")
            if m.shape != (h, w):
                raise RuntimeError(
                    f"segmenter {self.segmenter.name!r} returned a {m.shape} mask for a {h}×{w} image"
                )
            if not m.any():
                m = boxes_to_mask([box], (h, w))
                fallbacks += 1
            union |= m
        seg_note = (
            f"{self.segmenter.name}: {len(masks)} mask(s), union covers {union.mean():.1%} of the image"
        )
        if fallbacks:
            seg_note += f", {fallbacks} empty mask(s) replaced by their box"
        return Localization(
            found=bool(union.any()),
            mask=union,
            boxes=dets.boxes,
            scores=dets.scores,
            detail=f"{dets.detail}; {seg_note}",
        )


class FixedBoxDetector:
    """A ``Detector`` that returns user-supplied boxes whatever the target (``edct verify --box``)."""

    name = "box"

    def __init__(self, boxes: Sequence[Box]) -> None:
        self.boxes = tuple(tuple(float(v) for v in b) for b in boxes)

    def identity(self) -> dict[str, object]:
        return {"backend": self.name, "boxes": [list(b) for b in self.boxes]}

    def detect(self, image: Image.Image, target: str) -> Detections:
        return finalize_detections(
            self.boxes,
            [1.0] * len(self.boxes),
            image.size,
            detail=f"{self.name}: user-supplied box(es) for {target!r}",
        )
