"""Pixel perception of the calibration world's reference VLMs (colour and position analysis).

Part of the calibration instrument, not the product. ``perceive`` takes a bare H×W×3 uint8 RGB
array — never a PIL image — so it cannot see the scene metadata: everything it reports comes from
pixels. It finds cue colours by HSV thresholds (the renderer keeps every background pixel below
the saturation these thresholds need), reads positions from the centroids of colour masks, and
reads the context from the top band of the picture, which no object reaches.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import cv2
import numpy as np

from edct_task.calibration import world
from edct_task.calibration.render import TINTS

MIN_PIXELS = 25
"""Fewest pixels a colour class needs before it counts as seen."""

TOP_BAND = 40
"""Rows at the top that only ever show background: the context is read there."""


@dataclass(frozen=True)
class Percept:
    """What a reference VLM sees in one image."""

    family: str
    config: world.Config | None
    """The two cue values read from pixels, None when a cue could not be read."""
    context: str
    """The nearest context tint of the top band."""
    signature: str
    """A short hash of the top band's coarse texture: identifies the scene, unchanged by edits."""


def _check(pixels: np.ndarray) -> None:
    if not isinstance(pixels, np.ndarray) or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"perceive needs an H×W×3 array, got {getattr(pixels, 'shape', type(pixels))}")
    if pixels.dtype != np.uint8:
        raise ValueError(f"perceive needs uint8 pixels in [0, 255], got {pixels.dtype}")
    if pixels.shape[0] <= TOP_BAND:
        raise ValueError(f"image must be taller than {TOP_BAND} rows, got {pixels.shape[0]}")


def _mask(hsv: np.ndarray, hue: tuple[int, int], s_min: int, v_min: int) -> np.ndarray:
    """Pixels with hue in ``hue`` (inclusive; ``lo > hi`` wraps around 0), saturation ≥ ``s_min``
    and value ≥ ``v_min``, as a boolean H×W array. OpenCV's ``inRange`` (one pass in C) instead of
    numpy's six array comparisons and their temporaries: the same pixels, in less time."""
    lo, hi = hue
    if lo <= hi:
        inside = cv2.inRange(hsv, (lo, s_min, v_min), (hi, 255, 255))
    else:
        inside = cv2.inRange(hsv, (lo, s_min, v_min), (255, 255, 255))
        inside |= cv2.inRange(hsv, (0, s_min, v_min), (hi, 255, 255))
    return inside > 0  # inRange writes 0 or 255


def channel_medians(pixels: np.ndarray) -> np.ndarray:
    """``np.median`` of each channel of a uint8 H×W×C array, as float32, from one histogram per
    channel (counting instead of sorting; exactly the same values: the middle value, or the mean
    of the two middle values, of each channel)."""
    flat = pixels.reshape(-1, pixels.shape[-1])
    n = flat.shape[0]
    out = np.empty(flat.shape[1], dtype=np.float32)
    for c in range(flat.shape[1]):
        below = np.cumsum(np.bincount(flat[:, c], minlength=256))
        lower = int(np.searchsorted(below, (n - 1) // 2 + 1))  # value of rank (n-1)//2
        upper = int(np.searchsorted(below, n // 2 + 1))  # value of rank n//2
        out[c] = np.float32(lower + upper) / np.float32(2)
    return out


def _dominant(masks: dict[str, np.ndarray]) -> str | None:
    counts = {name: int(m.sum()) for name, m in masks.items()}
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] >= MIN_PIXELS else None


def _centroid_x(mask: np.ndarray) -> float | None:
    xs = np.nonzero(mask)[1]
    return float(xs.mean()) if xs.size >= MIN_PIXELS else None


def _driving(hsv: np.ndarray) -> world.Config | None:
    lamp = {
        "red": _mask(hsv, (170, 8), 150, 170),
        "yellow": _mask(hsv, (18, 30), 150, 170),
        "green": _mask(hsv, (50, 80), 150, 150),
    }
    colour = _dominant(lamp)
    pedestrian = int(_mask(hsv, (105, 125), 150, 120).sum()) >= MIN_PIXELS
    return None if colour is None else (colour, "present" if pedestrian else "absent")


def _knowledge(hsv: np.ndarray) -> world.Config | None:
    ball = {
        "orange": _mask(hsv, (8, 20), 150, 150),
        "yellow": _mask(hsv, (25, 40), 150, 150),
        "white": (hsv[..., 1] <= 40) & (hsv[..., 2] >= 215),
    }
    colour = _dominant(ball)
    racket = int(_mask(hsv, (135, 160), 120, 100).sum()) >= MIN_PIXELS
    return None if colour is None else (colour, "present" if racket else "absent")


def _spatial(hsv: np.ndarray) -> world.Config | None:
    car = _centroid_x(_mask(hsv, (172, 6), 150, 100))
    light = _centroid_x(_mask(hsv, (20, 34), 150, 200))
    tree = _centroid_x(_mask(hsv, (45, 80), 120, 60))
    if car is None or light is None or tree is None:
        return None
    return ("right" if light > car else "left", "right" if tree > car else "left")


_FAMILY = {"driving": _driving, "knowledge": _knowledge, "spatial": _spatial}


def perceive_context(pixels: np.ndarray) -> tuple[str, str]:
    """(nearest context tint, texture signature) of the top band of an RGB array."""
    _check(pixels)
    band = pixels[:TOP_BAND].astype(np.float32)
    median = channel_medians(pixels[:TOP_BAND])
    context = min(TINTS, key=lambda name: float(np.sum((np.asarray(TINTS[name]) - median) ** 2)))
    grey = band.mean(axis=2)
    blocks = cv2.resize(grey, (8, 2), interpolation=cv2.INTER_AREA)
    middle = np.median(blocks)
    bits = "".join("1" if b > middle else "0" for b in blocks.ravel())
    return context, hashlib.sha256(bits.encode()).hexdigest()[:12]


def perceive(pixels: np.ndarray, family: str) -> Percept:
    """Read a family's two cues and the context from an H×W×3 uint8 RGB array."""
    _check(pixels)
    if family not in _FAMILY:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(world.FAMILIES)}")
    hsv = cv2.cvtColor(np.ascontiguousarray(pixels), cv2.COLOR_RGB2HSV)
    context, signature = perceive_context(pixels)
    return Percept(family, _FAMILY[family](hsv), context, signature)
