"""Saliency overlays: the map in the JET colour map blended over the image, M's outline in white."""

from __future__ import annotations

import cv2
import numpy as np

from verification.gate_maps import heatmap_rgb

__all__ = ["overlay", "side_by_side"]


def overlay(
    image: np.ndarray, saliency: np.ndarray, mask: np.ndarray | None, *, alpha: float = 0.55
) -> np.ndarray:
    """The image (uint8 H×W×3) with the saliency (H×W in [0, 1]) blended where it is non-zero.

    Zero saliency leaves the pixel as it is (the 25th-percentile cut shows as the bare image); the
    outline of the edit mask M, when given, is drawn in white.
    """
    image = np.asarray(image, dtype=np.uint8)
    s = np.asarray(saliency, dtype=np.float32)
    if image.shape[:2] != s.shape or image.ndim != 3:
        raise ValueError(f"image {image.shape} and saliency {s.shape} must share H×W")
    heat = heatmap_rgb(s).astype(np.float32)
    weight = (alpha * (s > 0))[..., None] * (0.35 + 0.65 * s[..., None])
    out = (image.astype(np.float32) * (1 - weight) + heat * weight).astype(np.uint8)
    if mask is not None:
        contours, _ = cv2.findContours(np.asarray(mask, np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(out, contours, -1, (255, 255, 255), 2)
    return out


def side_by_side(left: np.ndarray, right: np.ndarray, *, gap: int = 6) -> np.ndarray:
    """Two RGB panels of one height next to each other with a white gap."""
    if left.shape[0] != right.shape[0]:
        raise ValueError("panels must have the same height")
    spacer = np.full((left.shape[0], gap, 3), 255, np.uint8)
    return np.hstack([left, spacer, right])
