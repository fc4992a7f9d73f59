"""``check_edit``: the image half of the paper's Algorithm 1 (everything after parsing the
instruction) on PIL images, as a record.

Given the parsed edit (type and target), it picks the image to search (the edited one for ADD —
the object exists only after the edit — else the original), asks a ``MaskProvider`` for the
target's mask, and runs the gate (dilate → align → change map → r_in / r_out → decision). Every
outcome is an ``EditCheck`` record, never an exception: unusable images give ``bad_image``, a
target that cannot be found gives ``target_not_found``. With ``artefact_dir`` it also writes the
change heatmap, the mask, an overlay and a four-panel figure (original | aligned edit | heatmap |
overlay, as the paper's Fig. 2) plus ``check.json``; with ``store_maps`` it hands the gate's maps
(one small PNG, ``verification.gate_maps``) to the caller's image store and records the reference,
so an audit report can draw the same figure later.

Image normalisation **[ours]**: modes L, LA, P, PA, RGBA, CMYK, YCbCr, 1 are converted with
``Image.convert("RGB")`` (alpha is dropped, not composited); 16-bit and 32-bit integer modes
(I;16*, I) are scaled by 1/257 when their maximum exceeds 255; float mode F is taken as [0, 1]
when its maximum is ≤ 1, else clipped to [0, 255]. Images smaller than ``GateParams.min_side`` or
larger than ``GateParams.max_pixels`` are refused as ``bad_image``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageFile

from verification.gate import GateOutcome, GateParams, evaluate_gate
from verification.gate_maps import heatmap_rgb, overlay_rgb, pack_gate_maps
from verification.localization import MaskProvider
from verification.masks import boxes_to_mask, resize_mask
from verification.records import CHECK_SCHEMA_VERSION, EDIT_TYPES, EditCheck, Verdict

__all__ = ["CHECK_SCHEMA_VERSION", "EDIT_TYPES", "EditCheck", "Verdict", "check_edit", "image_to_rgb_array"]


class _BadImage(ValueError):
    pass


def image_to_rgb_array(image: Image.Image, *, name: str, params: GateParams) -> tuple[np.ndarray, str]:
    """Convert a PIL image of any common mode to uint8 H×W×3 RGB, refusing unusable ones.

    Parameters
    ----------
    image : PIL.Image.Image
        Input image.
    name : str
        "original" or "edited", for messages.
    params : GateParams
        Size limits (``min_side``, ``max_pixels``).

    Returns
    -------
    array : ndarray, uint8, shape (H, W, 3)
    note : str
        What conversion was applied ("" when none).

    Raises
    ------
    ValueError
        (internal ``_BadImage``) when the image is not a PIL image, is corrupt, too small or too
        large; the message names the rule.
    """
    if not isinstance(image, Image.Image):
        raise _BadImage(f"{name} is not a PIL image (got {type(image).__name__})")
    w, h = image.size
    if w < params.min_side or h < params.min_side:
        raise _BadImage(f"{name} is {w}×{h}: each side must be at least {params.min_side} px")
    if w * h > params.max_pixels:
        raise _BadImage(f"{name} is {w}×{h} = {w * h} px, over the limit of {params.max_pixels} px")
    mode = image.mode
    try:
        _load_strictly(image)
        if mode == "RGB":
            arr, note = np.asarray(image), ""
        elif mode.startswith("I") or mode == "F":
            raw = np.asarray(image).astype(np.float64)
            if raw.ndim == 3:
                raw = raw[..., 0]
            hi = float(raw.max()) if raw.size else 0.0
            if mode == "F" and hi <= 1.0:
                raw = raw * 255.0
            elif hi > 255.0:
                raw = raw / 257.0
            grey = np.clip(raw + 0.5, 0, 255).astype(np.uint8)
            arr, note = np.repeat(grey[..., None], 3, axis=2), f"{name}: mode {mode} scaled to 8-bit grey RGB"
        else:
            arr, note = np.asarray(image.convert("RGB")), f"{name}: mode {mode} converted to RGB"
    except (OSError, ValueError, SyntaxError, TypeError) as exc:  # truncated / corrupt files
        raise _BadImage(f"{name} could not be decoded: {exc}") from exc
    arr = np.ascontiguousarray(arr[..., :3], dtype=np.uint8)
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.shape[:2] != (h, w):
        raise _BadImage(f"{name} decoded to shape {arr.shape}, expected {h}×{w}×3")
    return arr, note


_STRICT_LOAD = threading.Lock()


def _load_strictly(image: Image.Image) -> None:
    """Decode a lazily opened image, refusing truncated data.

    Some libraries (lmms-eval among them) set ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` at import,
    which makes PIL pad a truncated file with black instead of failing; the gate would then judge
    an edit against half an image. Images not yet decoded (``image.tile``) are decoded here with
    the flag off, restored afterwards.
    """
    if not getattr(image, "tile", None):
        return
    with _STRICT_LOAD:
        previous = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = False
        try:
            image.load()
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = previous


def _write_artefacts(outcome: GateOutcome, original: np.ndarray, directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    heat_rgb = heatmap_rgb(outcome.change.heat())
    region_u8 = outcome.region.astype(np.uint8) * 255
    overlay = overlay_rgb(original, outcome.change.changed, outcome.region)
    panel = np.hstack([original, outcome.compared, heat_rgb, overlay])
    files = {
        "change_heatmap": ("change_heatmap.png", heat_rgb),
        "mask": ("mask.png", region_u8),
        "overlay": ("overlay.png", overlay),
        "panel": ("panel.png", panel),
    }
    out: dict[str, str] = {}
    for key, (fname, arr) in files.items():
        Image.fromarray(arr).save(directory / fname)
        out[key] = fname
    out["record"] = "check.json"
    return out


def check_edit(
    original: Image.Image,
    edited: Image.Image,
    *,
    edit_type: str,
    target: str,
    locator: MaskProvider,
    params: GateParams | None = None,
    artefact_dir: Path | None = None,
    store_maps: Callable[[Image.Image], str] | None = None,
) -> EditCheck:
    """Verify that an edit changed its target and little else (Algorithm 1 after the parse).

    Parameters
    ----------
    original, edited : PIL.Image.Image
        The image before and after the edit (any common mode; see the module notes).
    edit_type : {"ADD", "MODIFY", "REMOVE"}
        Parsed edit type (case-insensitive). ADD searches the edited image, others the original.
    target : str
        Parsed target object, passed to the locator.
    locator : MaskProvider
        Finds the target and returns its mask (or boxes).
    params : GateParams, optional
        Gate parameters; defaults (τ_in = 0.10, τ_out = 0.30) when None.
    artefact_dir : Path, optional
        When given, the heatmap, mask, overlay and panel PNGs and ``check.json`` are written there.
    store_maps : callable, optional
        When given (e.g. ``ImageStore.put``), the gate's maps (``verification.gate_maps``) are
        passed to it as one image and the reference it returns is recorded as ``EditCheck.maps``.

    Returns
    -------
    EditCheck
        Never raises for bad images or a missing target: those are verdicts.

    Raises
    ------
    ValueError
        If ``edit_type`` is not one of ADD, MODIFY, REMOVE (a caller bug, not a data failure).
    """
    p = params or GateParams()
    et = edit_type.strip().upper()
    if et not in EDIT_TYPES:
        raise ValueError(f"edit_type must be one of {EDIT_TYPES}, got {edit_type!r}")
    searched: Literal["original", "edited"] = "edited" if et == "ADD" else "original"
    base = {
        "tau_in": p.tau_in,
        "tau_out": p.tau_out,
        "edit_type": et,
        "target": target,
        "searched": searched,
        "locator": str(getattr(locator, "name", type(locator).__name__)),
        "params": p,
    }
    notes: list[str] = []
    try:
        orig_arr, n1 = image_to_rgb_array(original, name="original", params=p)
        edit_arr, n2 = image_to_rgb_array(edited, name="edited", params=p)
    except _BadImage as exc:
        return EditCheck(passed=False, verdict="bad_image", detail=str(exc), **base)
    notes += [n for n in (n1, n2) if n]
    h, w = orig_arr.shape[:2]
    base["image_size"] = (w, h)

    search_img = Image.fromarray(edit_arr if searched == "edited" else orig_arr)
    # Keep the source's metadata (e.g. the calibration world's scene graph) for the locator.
    search_img.info.update((edited if searched == "edited" else original).info)
    loc = locator.locate(search_img, target)
    if loc.detail:
        notes.append(loc.detail)
    mask = loc.mask
    if loc.found and mask is None and loc.boxes:
        mask = boxes_to_mask(loc.boxes, (search_img.height, search_img.width))
        notes.append("mask rasterised from the locator's boxes")
    if not loc.found or mask is None or not np.asarray(mask).any():
        why = "target not found" if not loc.found else "locator returned an empty mask"
        return EditCheck(
            passed=False,
            verdict="target_not_found",
            n_boxes=len(loc.boxes),
            detail="; ".join([why, *notes]),
            **base,
        )
    mask = np.asarray(mask).astype(bool)
    if mask.ndim != 2:
        return EditCheck(
            passed=False,
            verdict="target_not_found",
            n_boxes=len(loc.boxes),
            detail="; ".join([f"locator returned a mask of shape {mask.shape}, not H×W", *notes]),
            **base,
        )
    if mask.shape != (h, w):
        notes.append(f"mask resized from {mask.shape[1]}×{mask.shape[0]} to the original's {w}×{h}")
        mask = resize_mask(mask, (h, w))

    outcome = evaluate_gate(orig_arr, edit_arr, mask, p)
    r = outcome.result
    if outcome.alignment is not None:
        a = outcome.alignment.report
        notes.append(
            f"alignment: homography {'used' if a.homography_used else 'not used'}, "
            f"flow {'used' if a.flow_used else 'not used'}"
            + (f" ({a.fallback_reason})" if a.fallback_reason else "")
        )
    check = EditCheck(
        passed=r.passed,
        verdict=r.verdict,
        r_in=r.r_in,
        r_out=r.r_out,
        mask_fraction=float(outcome.region.mean()),
        n_boxes=len(loc.boxes),
        edited_resized_from=outcome.resized_from,
        alignment=None if outcome.alignment is None else outcome.alignment.report,
        detail="; ".join(notes),
        **base,
    )
    if store_maps is not None:
        packed = pack_gate_maps(outcome.change.heat(), outcome.change.changed, outcome.region)
        check = check.model_copy(update={"maps": store_maps(packed)})
    if artefact_dir is not None:
        directory = Path(artefact_dir)
        check = check.model_copy(update={"artefacts": _write_artefacts(outcome, orig_arr, directory)})
        (directory / "check.json").write_text(check.model_dump_json(indent=2), encoding="utf-8")
    return check
