"""The gate's per-pixel maps of one check, kept as one small PNG, and their Fig. 2 renderings.

A check computes the dilated target mask M, the change map Δ and a continuous change strength
(``ChangeMap.heat``) in the frame of the image that was edited. The audit report shows them as
the paper's Fig. 2 does (a heatmap and an overlay of the changes on the image, the mask's
outline drawn on it), so the engine keeps them beside the images of the run: one RGB PNG per
attempt, stored in the image store and referenced by ``EditCheck.maps``.

Packing (``pack_gate_maps`` / ``unpack_gate_maps``), uint8 per channel:

- R: change strength, ``round(255 · heat)`` (128 is the threshold of either change test);
- G: Δ, 255 where the pixel changed;
- B: M, 255 inside the dilated target mask.

``heatmap_rgb`` and ``overlay_rgb`` are the renderings used both by ``check_edit``'s
``artefact_dir`` files and by the audit report, so both show the same picture.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

__all__ = ["GateMaps", "heatmap_rgb", "overlay_rgb", "pack_gate_maps", "unpack_gate_maps"]


@dataclass(frozen=True)
class GateMaps:
    """The gate's maps of one check, H×W each, in the frame of the image that was edited."""

    heat: np.ndarray
    """Change strength, float32 in [0, 1]; 0.5 is the threshold of either change test."""
    changed: np.ndarray
    """Δ, bool: the pixels counted as changed."""
    mask: np.ndarray
    """The dilated target mask M, bool."""


def _check_maps(heat: np.ndarray, changed: np.ndarray, mask: np.ndarray) -> None:
    shapes = {np.shape(heat), np.shape(changed), np.shape(mask)}
    if len(shapes) != 1 or len(np.shape(heat)) != 2:
        raise ValueError(
            f"heat, changed and mask must be H×W arrays of one shape, got "
            f"{np.shape(heat)}, {np.shape(changed)}, {np.shape(mask)}"
        )


def pack_gate_maps(heat: np.ndarray, changed: np.ndarray, mask: np.ndarray) -> Image.Image:
    """The three maps as one RGB image (R = heat, G = Δ, B = M; see the module notes).

    Parameters
    ----------
    heat : ndarray, float, shape (H, W)
        Change strength in [0, 1] (values outside are clipped).
    changed, mask : ndarray, bool, shape (H, W)
        Δ and the dilated mask M.

    Returns
    -------
    PIL.Image.Image
        Mode RGB, size (W, H).

    Raises
    ------
    ValueError
        If the three arrays are not 2-D arrays of one shape.
    """
    _check_maps(heat, changed, mask)
    r = np.clip(np.rint(np.asarray(heat, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    g = np.asarray(changed, dtype=bool).astype(np.uint8) * 255
    b = np.asarray(mask, dtype=bool).astype(np.uint8) * 255
    return Image.fromarray(np.dstack([r, g, b]), mode="RGB")


def unpack_gate_maps(image: Image.Image) -> GateMaps:
    """The maps packed by :func:`pack_gate_maps` (heat to 1/255 precision).

    Raises
    ------
    ValueError
        If ``image`` is not an RGB image.
    """
    if image.mode != "RGB":
        raise ValueError(f"gate maps are an RGB image, got mode {image.mode}")
    arr = np.asarray(image)
    return GateMaps(
        heat=arr[..., 0].astype(np.float32) / 255.0,
        changed=arr[..., 1] >= 128,
        mask=arr[..., 2] >= 128,
    )


def heatmap_rgb(heat: np.ndarray) -> np.ndarray:
    """The change strength in the JET colour map (blue: unchanged → red: strongly changed).

    Parameters
    ----------
    heat : ndarray, float, shape (H, W)
        Values in [0, 1].

    Returns
    -------
    ndarray, uint8, shape (H, W, 3), RGB
    """
    u8 = np.clip(np.asarray(heat, dtype=np.float32) * 255.0, 0, 255).astype(np.uint8)
    return cv2.cvtColor(cv2.applyColorMap(u8, cv2.COLORMAP_JET), cv2.COLOR_BGR2RGB)


def overlay_rgb(image: np.ndarray, changed: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The image darkened, changed pixels in red, the outline of the mask M in green (Fig. 2).

    Parameters
    ----------
    image : ndarray, uint8, shape (H, W, 3)
        The image that was edited (the check's original), RGB.
    changed, mask : ndarray, bool, shape (H, W)
        Δ and M in that image's frame.

    Returns
    -------
    ndarray, uint8, shape (H, W, 3), RGB

    Raises
    ------
    ValueError
        If the shapes do not match.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[:2] != np.shape(changed):
        raise ValueError(
            f"image must be H×W×3 matching the maps' {np.shape(changed)}, got shape {image.shape}"
        )
    _check_maps(np.asarray(changed, dtype=np.float32), changed, mask)
    changed = np.asarray(changed, dtype=bool)
    overlay = image.astype(np.float32) * 0.6
    overlay[changed] = overlay[changed] * 0.3 + np.array([255.0, 40.0, 40.0]) * 0.7
    overlay = overlay.astype(np.uint8)
    region_u8 = np.asarray(mask, dtype=bool).astype(np.uint8) * 255
    contours, _ = cv2.findContours(region_u8, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(overlay, contours, -1, (40, 255, 40), max(2, min(image.shape[:2]) // 128))
    return overlay
