"""The paper's attention-saliency recipe (§4.6, its Fig. 4 and Fig. 9) and the localization score.

Pure functions on arrays; the model side (which attention rows, from which layers) lives in
``edct_task.attention.probe``. Input is the attention of one query position — the position that
emits the answer's first token — to the image's content tokens, for each selected layer and head:
an array ``A`` of shape (L, H, N), with the N image tokens in row-major order of a ``rows × cols``
token grid.

The recipe, step by step (:func:`saliency_grid`):

1. **Image tokens only**: ``A`` holds only the image content tokens (no vision start/end tokens, no
   text); the rest of the attention row is ignored, not renormalised.
2. **Subtract the layer-wise mean**: ``D[l, h, n] = A[l, h, n] − mean_{h, n} A[l]`` — each layer's
   own level (attention sinks lift every token of some layers) is removed.
3. **Weight heads by their variance**: ``w[l, h] = var_n A[l, h] / Σ_h var_n A[l, h]`` (uniform
   when a layer's heads are all flat); ``S[n] = mean_l Σ_h w[l, h] D[l, h, n]``.
4. **Sharpen**: ``S = max(S, 0)²`` (attention below the layer's mean carries no evidence; values
   within 1e-9 of the largest attention of 0 count as 0, so a flat map stays empty).
5. **Denoise**: values below the 25th percentile of ``S`` become 0.
6. **Bicubic upscale** (:func:`upscale`) of the token grid onto the image, clipped at 0 (bicubic
   overshoots) and scaled so its maximum is 1.

**[ours]** :func:`localization` turns a map into a number: the share of saliency mass inside the
edit's mask M divided by M's share of the image. 1 is what a map spread evenly over the image
scores; above 1 the map concentrates on the edited evidence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

__all__ = ["PAPER_RECIPE", "Localization", "Recipe", "localization", "saliency_grid", "upscale"]


@dataclass(frozen=True)
class Recipe:
    """The recipe's parameters (the paper's values are the defaults)."""

    percentile: float = 25.0
    """Values of the sharpened map below this percentile are set to 0."""
    power: float = 2.0
    """Sharpening exponent applied to the positive part of the map."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


PAPER_RECIPE = Recipe()
"""The paper's values: cut at the 25th percentile, square."""


def _check_attention(attention: NDArray[Any], grid: tuple[int, int]) -> NDArray[np.float64]:
    arr = np.asarray(attention, dtype=np.float64)
    if arr.ndim != 3:
        raise ValueError(f"attention must have shape (layers, heads, image tokens); got {arr.shape}")
    rows, cols = grid
    if rows < 1 or cols < 1 or rows * cols != arr.shape[2]:
        raise ValueError(f"a {rows}×{cols} token grid needs {rows * cols} image tokens; got {arr.shape[2]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("attention holds NaN or inf")
    return arr


def saliency_grid(
    attention: NDArray[Any], grid: tuple[int, int], recipe: Recipe = PAPER_RECIPE
) -> NDArray[np.float64]:
    """The saliency of the image tokens (steps 1–5 of the module notes), on the token grid.

    Parameters
    ----------
    attention : ndarray, shape (L, H, N)
        Attention weights of the answer position to the N image tokens, per layer and head.
    grid : (rows, cols)
        The image-token grid, ``rows * cols == N`` (row-major).
    recipe : Recipe
        Percentile and sharpening exponent.

    Returns
    -------
    ndarray, float64, shape (rows, cols)
        Non-negative; all zeros when no token rises above its layer's mean.
    """
    a = _check_attention(attention, grid)
    centred = a - a.mean(axis=(1, 2), keepdims=True)
    var = a.var(axis=2)  # (L, H)
    total = var.sum(axis=1, keepdims=True)
    weights = np.where(total > 0, var / np.where(total > 0, total, 1.0), 1.0 / a.shape[1])
    s = np.einsum("lh,lhn->n", weights, centred) / a.shape[0]
    # rounding residue of the mean subtraction (a flat map leaves ±1e-17, not 0) is not evidence
    s[s <= 1e-9 * float(np.abs(a).max(initial=0.0))] = 0.0
    s = s**recipe.power
    if s.any():
        s[s < np.percentile(s, recipe.percentile)] = 0.0
    return s.reshape(grid)


def upscale(grid_map: NDArray[Any], size: tuple[int, int]) -> NDArray[np.float32]:
    """Bicubic upscale of a token-grid map to ``size`` = (width, height), clipped at 0, max 1.

    Returns float32 of shape (height, width); all zeros when the map is all zeros.
    """
    arr = np.asarray(grid_map, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"grid_map must be 2-D; got shape {arr.shape}")
    width, height = size
    up = np.asarray(Image.fromarray(arr, mode="F").resize((width, height), Image.Resampling.BICUBIC))
    up = np.clip(up, 0.0, None)
    peak = float(up.max())
    return (up / peak).astype(np.float32) if peak > 0 else np.zeros((height, width), np.float32)


@dataclass(frozen=True)
class Localization:
    """How much of one saliency map lies inside the edit mask M."""

    score: float | None
    """``mass_inside / mask_share``; None when the map is empty (no saliency to place)."""
    mass_inside: float | None
    """Share of the map's mass inside M, in [0, 1]; None when the map is empty."""
    mask_share: float
    """Share of the image's pixels inside M, in (0, 1]."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def localization(saliency: NDArray[Any], mask: NDArray[Any]) -> Localization:
    """The localization score of an upscaled saliency map against the edit mask M.

    Parameters
    ----------
    saliency : ndarray, shape (H, W)
        Non-negative saliency on the image (:func:`upscale`).
    mask : ndarray of bool, shape (H, W)
        The gate's dilated target mask M of the edit.

    Raises
    ------
    ValueError
        If the shapes differ, the saliency has negative or non-finite values, or M is empty.
    """
    s = np.asarray(saliency, dtype=np.float64)
    m = np.asarray(mask, dtype=bool)
    if s.shape != m.shape or s.ndim != 2:
        raise ValueError(f"saliency {s.shape} and mask {m.shape} must be H×W arrays of one shape")
    if not np.all(np.isfinite(s)) or (s < 0).any():
        raise ValueError("saliency must be finite and non-negative")
    share = float(m.mean())
    if share == 0.0:
        raise ValueError("the edit mask M is empty")
    total = float(s.sum())
    if total == 0.0:
        return Localization(None, None, share)
    inside = float(s[m].sum()) / total
    return Localization(inside / share, inside, share)
