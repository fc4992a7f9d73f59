"""Target masks: simple mask helpers, dilation M = dilate(m), and two user-supplied mask providers.

The gate dilates the segmentation mask m by a small margin before it counts pixels inside and
outside it, so that an edit blending a few pixels past the object boundary is not "change outside
the target". ``BoxMaskProvider`` (a user-supplied box) and ``StaticMaskProvider`` (a user-supplied
mask) implement the ``MaskProvider`` contract without any model; they are what the tests and the
manual "I know where the object is" mode use.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from PIL import Image

from verification.localization import Box, Localization

__all__ = [
    "BoxMaskProvider",
    "StaticMaskProvider",
    "boxes_to_mask",
    "dilate_mask",
    "dilation_radius",
    "mask_fraction",
    "resize_mask",
    "validate_mask",
]


def validate_mask(mask: np.ndarray, *, name: str = "mask") -> np.ndarray:
    """Check that ``mask`` is a 2-D H×W array and return it as ``bool``.

    Parameters
    ----------
    mask : ndarray
        Boolean, or numeric with non-zero meaning "inside".
    name : str
        Name used in error messages.

    Returns
    -------
    ndarray of bool, shape (H, W)

    Raises
    ------
    ValueError
        If the mask is not 2-D or is empty.
    """
    arr = np.asarray(mask)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D H×W array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must have at least one pixel, got shape {arr.shape}")
    return arr.astype(bool, copy=False)


def boxes_to_mask(boxes: Sequence[Box], shape: tuple[int, int]) -> np.ndarray:
    """Rasterise boxes ``(x0, y0, x1, y1)`` (pixels, x1/y1 exclusive) into a boolean H×W mask.

    Coordinates are rounded outward and clipped to the image; a box that falls entirely outside
    contributes nothing.

    Parameters
    ----------
    boxes : sequence of (float, float, float, float)
        Boxes in pixel coordinates of an image of ``shape``.
    shape : (int, int)
        (H, W) of the mask.

    Returns
    -------
    ndarray of bool, shape (H, W)
    """
    h, w = int(shape[0]), int(shape[1])
    mask = np.zeros((h, w), dtype=bool)
    for box in boxes:
        if len(box) != 4:
            raise ValueError(f"a box must be (x0, y0, x1, y1), got {box!r}")
        x0, y0, x1, y1 = (float(v) for v in box)
        if not all(np.isfinite([x0, y0, x1, y1])):
            raise ValueError(f"box coordinates must be finite, got {box!r}")
        if x1 < x0 or y1 < y0:
            raise ValueError(f"a box needs x0 <= x1 and y0 <= y1, got {box!r}")
        c0, r0 = max(0, int(np.floor(x0))), max(0, int(np.floor(y0)))
        c1, r1 = min(w, int(np.ceil(x1))), min(h, int(np.ceil(y1)))
        if c1 > c0 and r1 > r0:
            mask[r0:r1, c0:c1] = True
    return mask


def dilation_radius(shape: tuple[int, int], *, px: int | None, fraction: float) -> int:
    """The dilation margin in pixels: ``px`` when given, else ``round(fraction * min(H, W))``.

    Parameters
    ----------
    shape : (int, int)
        (H, W) of the image.
    px : int or None
        Absolute margin; wins when not None.
    fraction : float
        Margin as a fraction of the shorter image side.

    Returns
    -------
    int
        Non-negative radius.
    """
    if px is not None:
        if px < 0:
            raise ValueError(f"dilation px must be >= 0, got {px}")
        return int(px)
    if not 0.0 <= fraction < 0.5:
        raise ValueError(f"dilation fraction must be in [0, 0.5), got {fraction}")
    return round(fraction * min(shape))


def dilate_mask(mask: np.ndarray, radius: int) -> np.ndarray:
    """Dilate a boolean mask by ``radius`` pixels with an elliptical (disc) structuring element.

    Parameters
    ----------
    mask : ndarray, shape (H, W)
        Mask m.
    radius : int
        Margin in pixels; 0 returns a copy.

    Returns
    -------
    ndarray of bool, shape (H, W)
        The dilated mask M.
    """
    m = validate_mask(mask)
    if radius < 0:
        raise ValueError(f"dilation radius must be >= 0, got {radius}")
    if radius == 0:
        return m.copy()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    return cv2.dilate(m.astype(np.uint8), kernel).astype(bool)


def resize_mask(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Resize a boolean mask to ``shape`` (H, W) with nearest-neighbour sampling."""
    m = validate_mask(mask)
    if m.shape == tuple(shape):
        return m
    out = cv2.resize(m.astype(np.uint8), (int(shape[1]), int(shape[0])), interpolation=cv2.INTER_NEAREST)
    return out.astype(bool)


def mask_fraction(mask: np.ndarray) -> float:
    """Share of pixels inside the mask, in [0, 1]."""
    m = validate_mask(mask)
    return float(m.mean())


class BoxMaskProvider:
    """A ``MaskProvider`` that returns the union of user-supplied boxes as the target mask.

    Parameters
    ----------
    boxes : sequence of (x0, y0, x1, y1) or a single box
        Pixel boxes in the coordinates of the searched image (x1, y1 exclusive).
    name : str
        Provider name recorded in ``Localization.detail``.

    Notes
    -----
    The target string is ignored. Boxes wholly outside the image give ``found=False``.
    """

    def __init__(self, boxes: Sequence[Box] | Box, *, name: str = "box") -> None:
        seq = [boxes] if len(boxes) == 4 and not isinstance(boxes[0], Sequence) else boxes
        self.boxes: tuple[Box, ...] = tuple(tuple(float(v) for v in b) for b in seq)  # type: ignore[misc]
        self.name = name

    def locate(self, image: Image.Image, target: str) -> Localization:
        """Rasterise the boxes at the image's size."""
        w, h = image.size
        mask = boxes_to_mask(self.boxes, (h, w))
        if not mask.any():
            return Localization(found=False, detail=f"{self.name}: no box overlaps the {w}×{h} image")
        return Localization(
            found=True,
            mask=mask,
            boxes=self.boxes,
            scores=tuple(1.0 for _ in self.boxes),
            detail=f"{self.name}: {len(self.boxes)} user-supplied box(es) for {target!r}",
        )


class StaticMaskProvider:
    """A ``MaskProvider`` that returns a fixed user-supplied mask.

    Parameters
    ----------
    mask : ndarray, shape (H, W)
        Target mask (non-zero = inside). It is resized (nearest neighbour) when the searched
        image has another size, and the resize is noted in ``detail``.
    name : str
        Provider name recorded in ``Localization.detail``.
    """

    def __init__(self, mask: np.ndarray, *, name: str = "static") -> None:
        self.mask = validate_mask(mask).copy()
        self.name = name

    def locate(self, image: Image.Image, target: str) -> Localization:
        """Return the stored mask at the image's size; ``found=False`` when it is empty."""
        w, h = image.size
        detail = f"{self.name}: user-supplied mask for {target!r}"
        mask = self.mask
        if mask.shape != (h, w):
            detail += f" (resized from {mask.shape[1]}×{mask.shape[0]} to {w}×{h})"
            mask = resize_mask(mask, (h, w))
        if not mask.any():
            return Localization(found=False, detail=f"{self.name}: the supplied mask is empty")
        ys, xs = np.nonzero(mask)
        box = (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))
        return Localization(found=True, mask=mask, boxes=(box,), scores=(1.0,), detail=detail)
