"""Align the edited image to the original, undoing small global shifts and warps.

Image editors often return a picture that is a few pixels shifted, slightly rotated or rescaled,
or at another resolution. Compared pixel by pixel, such a picture "changed everywhere", so the
gate would call every edit global. Alignment runs three stages, each guarded, and falls back to
the best safe stage when one is not trustworthy:

1. **Resize** the edited image to the original's size when the editor changed it (recorded).
2. **Homography**: ORB keypoints + brute-force Hamming matching with Lowe's ratio test +
   RANSAC (``cv2.findHomography``), estimated on images downscaled to ``feature_max_side``.
   Rejected when there are too few keypoints / matches / inliers (flat images), or when the
   homography is implausible for an editor's drift: determinant ≤ 0, scale, anisotropy (shear),
   perspective, rotation or corner displacement outside the bounds of ``AlignmentParams``.
3. **Residual flow**: dense Farnebäck optical flow between the original and the homography-
   aligned edit, at reduced resolution (``flow_max_side``), then *regularised* so that it can only
   undo smooth, global misalignment and never "explain away" a genuine local edit:

   - pixels in ``ignore`` (the dilated target mask, when the caller knows it) get zero weight;
   - flat pixels get low weight (their flow is arbitrary: aperture problem);
   - the field is one global polynomial (degree ``flow_degree``, quadratic by default) fitted by
     iteratively reweighted least squares with Tukey's biweight, so a local patch of motion is an
     outlier and gets no say; the flow is applied only if at least ``min_flow_coherence`` of the
     weighted pixels agree with the field (the motion is globally coherent);
   - magnitudes are capped at ``max_flow_fraction`` × longer side;
   - the flow is used only if it lowers the photometric residual outside ``ignore`` by at least
     ``min_flow_gain`` and its mean magnitude is at least ``min_flow_px``.

The homography and the flow are composed into one ``cv2.remap`` (one interpolation). Pixels
whose source falls outside the edited image are marked invalid in ``Alignment.valid`` and are
left out of the gate's counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from verification.records import AlignmentParams, AlignmentReport

__all__ = ["Alignment", "AlignmentParams", "AlignmentReport", "align_images", "match_size"]


@dataclass(frozen=True)
class Alignment:
    """Result of ``align_images``."""

    image: np.ndarray
    """Aligned edited image, uint8 H×W×3 in the original's frame."""
    valid: np.ndarray
    """Boolean H×W: True where the aligned value comes from inside the edited image."""
    report: AlignmentReport


def _validate_rgb(image: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"{name} must be an H×W×3 RGB array, got shape {arr.shape}")
    if arr.dtype != np.uint8:
        raise ValueError(f"{name} must have dtype uint8 (values 0..255), got {arr.dtype}")
    if min(arr.shape[:2]) < 8:
        raise ValueError(f"{name} must be at least 8×8 pixels, got {arr.shape[1]}×{arr.shape[0]}")
    return arr


def match_size(original: np.ndarray, edited: np.ndarray) -> tuple[np.ndarray, tuple[int, int] | None]:
    """Resize ``edited`` to the original's H×W when they differ.

    Parameters
    ----------
    original, edited : ndarray, uint8, shape (H, W, 3)
        RGB images; ``edited`` may have another size.

    Returns
    -------
    resized : ndarray, uint8, shape of ``original``
    resized_from : (int, int) or None
        The edited image's (H, W) before resizing, or None when no resize was needed.
    """
    original = _validate_rgb(original, "original")
    edited = _validate_rgb(edited, "edited")
    h, w = original.shape[:2]
    if edited.shape[:2] == (h, w):
        return edited, None
    shrink = edited.shape[0] * edited.shape[1] > h * w
    interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    return cv2.resize(edited, (w, h), interpolation=interp), (int(edited.shape[0]), int(edited.shape[1]))


def _downscale(gray: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    h, w = gray.shape
    s = min(1.0, max_side / max(h, w))
    if s >= 1.0:
        return gray, 1.0
    size = (max(1, round(w * s)), max(1, round(h * s)))
    return cv2.resize(gray, size, interpolation=cv2.INTER_AREA), s


def _homography_bounds(
    hm: np.ndarray, shape: tuple[int, int], p: AlignmentParams
) -> tuple[float, str | None]:
    """Largest corner shift and, when the homography is implausible, why."""
    h, w = shape
    if not np.all(np.isfinite(hm)) or abs(hm[2, 2]) < 1e-12:
        return math.inf, "homography is not finite"
    hm = hm / hm[2, 2]
    corners = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], dtype=np.float64)
    proj = cv2.perspectiveTransform(corners[None], hm)[0]
    shift = float(np.max(np.linalg.norm(proj - corners, axis=1)))
    a = hm[:2, :2]
    det = float(np.linalg.det(a))
    if det <= 0:
        return shift, f"homography is degenerate or mirrored (det={det:.3g})"
    s1, s2 = np.linalg.svd(a, compute_uv=False)
    lo, hi = 1.0 / (1.0 + p.max_scale_change), 1.0 + p.max_scale_change
    if s2 < lo or s1 > hi:
        return shift, f"homography scale {s2:.3f}..{s1:.3f} outside [{lo:.3f}, {hi:.3f}]"
    if s1 / s2 - 1.0 > p.max_anisotropy:
        return shift, f"homography shear/anisotropy {s1 / s2 - 1:.3f} > {p.max_anisotropy}"
    rot = abs(math.degrees(math.atan2(a[1, 0] - a[0, 1], a[0, 0] + a[1, 1])))
    if rot > p.max_rotation_deg:
        return shift, f"homography rotation {rot:.1f}° > {p.max_rotation_deg}°"
    persp = abs(hm[2, 0]) * w + abs(hm[2, 1]) * h
    if persp > p.max_perspective:
        return shift, f"homography perspective {persp:.3g} > {p.max_perspective}"
    if shift > p.max_shift_fraction * max(h, w):
        return shift, f"homography moves a corner {shift:.1f} px > {p.max_shift_fraction:.0%} of the image"
    return shift, None


def _estimate_homography(
    g0: np.ndarray, g1: np.ndarray, ignore: np.ndarray | None, p: AlignmentParams
) -> tuple[np.ndarray | None, dict[str, int | float | str], str | None]:
    """ORB + ratio test + RANSAC at reduced resolution; returns the full-resolution homography."""
    s0, s = _downscale(g0, p.feature_max_side)
    s1, _ = _downscale(g1, p.feature_max_side)
    det_mask = None
    if ignore is not None:
        small = cv2.resize(
            ignore.astype(np.uint8), (s0.shape[1], s0.shape[0]), interpolation=cv2.INTER_NEAREST
        )
        det_mask = np.where(small > 0, 0, 255).astype(np.uint8)
    orb = cv2.ORB_create(nfeatures=p.orb_features)
    k0, d0 = orb.detectAndCompute(s0, det_mask)
    k1, d1 = orb.detectAndCompute(s1, det_mask)
    stats: dict[str, int | float | str] = {
        "n_keypoints": min(len(k0), len(k1)),
        "n_matches": 0,
        "n_inliers": 0,
    }
    if d0 is None or d1 is None or min(len(k0), len(k1)) < p.min_keypoints:
        return (
            None,
            stats,
            f"too few keypoints ({min(len(k0), len(k1))} < {p.min_keypoints}): flat or featureless image",
        )
    matcher = cv2.BFMatcher(cv2.NORM_HAMMING)
    pairs = matcher.knnMatch(d1, d0, k=2)
    good = [m[0] for m in pairs if len(m) == 2 and m[0].distance < p.ratio_test * m[1].distance]
    stats["n_matches"] = len(good)
    if len(good) < p.min_matches:
        return None, stats, f"too few matches ({len(good)} < {p.min_matches})"
    src = np.float32([k1[m.queryIdx].pt for m in good]).reshape(-1, 1, 2)
    dst = np.float32([k0[m.trainIdx].pt for m in good]).reshape(-1, 1, 2)
    hm, inl = cv2.findHomography(
        src, dst, cv2.USAC_ACCURATE, p.ransac_reproj_px, maxIters=2000, confidence=0.995
    )
    n_h = 0 if hm is None or inl is None else int(inl.sum())
    # Occam: an editor's drift is almost always a similarity (shift, rotation, uniform scale). Its
    # 4 parameters are far better conditioned than the homography's 8, whose perspective terms
    # otherwise absorb noise and bend the corners; keep the homography only when it explains
    # clearly more matches.
    sim, inl_s = cv2.estimateAffinePartial2D(
        src,
        dst,
        method=cv2.RANSAC,
        ransacReprojThreshold=p.ransac_reproj_px,
        maxIters=2000,
        confidence=0.995,
        refineIters=10,
    )
    n_s = 0 if sim is None or inl_s is None else int(inl_s.sum())
    if n_s > 0 and n_s >= p.similarity_preference * n_h:
        hm, n_in, model = np.vstack([sim, [0.0, 0.0, 1.0]]), n_s, "similarity"
    elif n_h > 0:
        n_in, model = n_h, "homography"
    else:
        return None, stats, "RANSAC found no homography"
    stats["n_inliers"] = n_in
    stats["model"] = model
    scale = np.diag([s, s, 1.0])
    full = np.linalg.inv(scale) @ hm @ scale
    return full / full[2, 2], stats, None


def _robust_poly_flow(
    flow: np.ndarray, weight: np.ndarray, degree: int, n_iter: int = 5
) -> tuple[np.ndarray, float]:
    """Fit one global polynomial flow field by iteratively reweighted least squares (Tukey biweight).

    Local motion — an edited object — is an outlier to a global low-order field and gets zero
    weight. Returns the fitted field and the inlier share (weight of samples kept / weight given).
    """
    sh, sw = flow.shape[:2]
    step = max(1, min(sh, sw) // 64)
    ys, xs = np.mgrid[0:sh:step, 0:sw:step]
    w0 = weight[ys, xs].ravel().astype(np.float64)
    f = flow[ys, xs].reshape(-1, 2).astype(np.float64)

    def design(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        u, v = 2.0 * x / max(1, sw - 1) - 1.0, 2.0 * y / max(1, sh - 1) - 1.0
        cols = [u**i * v**j for i in range(degree + 1) for j in range(degree + 1 - i)]
        return np.stack(cols, axis=-1)

    a = design(xs.ravel().astype(np.float64), ys.ravel().astype(np.float64))
    if w0.sum() <= 0:
        return np.zeros_like(flow), 0.0
    w = w0.copy()
    coef = np.zeros((a.shape[1], 2))
    for _ in range(n_iter):
        sw_ = np.sqrt(w)[:, None]
        coef, *_ = np.linalg.lstsq(a * sw_, f * sw_, rcond=None)
        r = np.linalg.norm(f - a @ coef, axis=1)
        scale = 1.4826 * float(np.median(r[w0 > 0])) + 0.05
        c = 4.685 * scale
        w = w0 * np.where(r < c, (1.0 - (r / c) ** 2) ** 2, 0.0)
    inlier_share = float(w0[w > 0].sum() / w0.sum())
    coarse = (a @ coef).reshape(ys.shape[0], ys.shape[1], 2).astype(np.float32)
    if step == 1:
        return coarse, inlier_share
    # The field is smooth: evaluate on the sample grid, interpolate to every pixel.
    field = np.empty((sh, sw, 2), np.float32)
    gx = (np.arange(sw, dtype=np.float32) / step)[None, :].repeat(sh, 0)
    gy = (np.arange(sh, dtype=np.float32) / step)[:, None].repeat(sw, 1)
    for c in range(2):
        field[..., c] = cv2.remap(coarse[..., c], gx, gy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return field, inlier_share


def _remap_maps(
    hm: np.ndarray | None, flow: np.ndarray | None, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates in the edited image for every original pixel: H⁻¹(p + f(p))."""
    h, w = shape
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    if flow is not None:
        xs = xs + flow[..., 0]
        ys = ys + flow[..., 1]
    if hm is None:
        return xs, ys
    inv = np.linalg.inv(hm).astype(np.float32)
    den = inv[2, 0] * xs + inv[2, 1] * ys + inv[2, 2]
    mx = (inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]) / den
    my = (inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]) / den
    return mx, my


def align_images(
    original: np.ndarray,
    edited: np.ndarray,
    *,
    ignore: np.ndarray | None = None,
    params: AlignmentParams | None = None,
) -> Alignment:
    """Bring ``edited`` into the pixel frame of ``original``.

    Parameters
    ----------
    original : ndarray, uint8, shape (H, W, 3)
        Original RGB image I.
    edited : ndarray, uint8, shape (H', W', 3)
        Edited RGB image Î; resized to (H, W) first when the size differs.
    ignore : ndarray of bool, shape (H, W), optional
        Pixels to leave out when *estimating* the motion — normally the dilated target mask M,
        so that the edit itself never steers the alignment. The whole image is still warped.
    params : AlignmentParams, optional
        Guards and stage switches; defaults when None.

    Returns
    -------
    Alignment
        The aligned image, its validity mask and an ``AlignmentReport``.

    Raises
    ------
    ValueError
        If an image is not uint8 H×W×3 (at least 8×8) or ``ignore`` has the wrong shape.
    """
    p = params or AlignmentParams()
    original = _validate_rgb(original, "original")
    resized, resized_from = match_size(original, edited)
    h, w = original.shape[:2]
    if ignore is not None:
        ignore = np.asarray(ignore)
        if ignore.shape != (h, w):
            raise ValueError(f"ignore mask must have the original's shape {(h, w)}, got {ignore.shape}")
        ignore = ignore.astype(bool)
    notes: list[str] = []
    fallback: str | None = None
    if resized_from is not None:
        notes.append(f"edited image resized from {resized_from[1]}×{resized_from[0]} to {w}×{h}")

    g0 = cv2.cvtColor(original, cv2.COLOR_RGB2GRAY)
    g1 = cv2.cvtColor(resized, cv2.COLOR_RGB2GRAY)

    hm_used: np.ndarray | None = None
    hm_est: np.ndarray | None = None
    stats: dict[str, int | float | str] = {"n_keypoints": 0, "n_matches": 0, "n_inliers": 0}
    shift = 0.0
    if p.use_homography:
        hm_est, stats, why = _estimate_homography(g0, g1, ignore, p)
        if hm_est is not None:
            shift, why = _homography_bounds(hm_est, (h, w), p)
            ratio = stats["n_inliers"] / max(1, stats["n_matches"])
            if why is None and stats["n_inliers"] < p.min_inliers:
                why = f"too few RANSAC inliers ({stats['n_inliers']} < {p.min_inliers})"
            if why is None and ratio < p.min_inlier_ratio:
                why = f"inlier ratio {ratio:.2f} < {p.min_inlier_ratio}"
        if why is not None:
            fallback = f"homography: {why}"
            notes.append(f"homography rejected: {why}")
        elif shift <= p.min_shift_px:
            notes.append(f"homography ≈ identity (corner shift {shift:.2f} px): not applied")
        else:
            hm_used = hm_est
            notes.append(
                f"{stats.get('model', 'homography')} applied (corner shift {shift:.1f} px, "
                f"{stats['n_inliers']}/{stats['n_matches']} inliers)"
            )
    else:
        notes.append("homography stage disabled")

    flow_full: np.ndarray | None = None
    mean_flow = max_flow = 0.0
    if p.use_flow:
        # Homography-aligned edit at flow resolution.
        s0, s = _downscale(g0, p.flow_max_side)
        sh, sw = s0.shape
        if hm_used is not None:
            scale = np.diag([s, s, 1.0])
            hs = scale @ hm_used @ np.linalg.inv(scale)
            s1 = cv2.warpPerspective(
                _downscale(g1, p.flow_max_side)[0],
                hs,
                (sw, sh),
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_REFLECT,
            )
        else:
            s1 = _downscale(g1, p.flow_max_side)[0]
        win = max(9, (min(sh, sw) // 16) | 1)
        flow = cv2.calcOpticalFlowFarneback(s0, s1, None, 0.5, 3, win, 3, 5, 1.1, 0)
        gx = cv2.Sobel(s0, cv2.CV_32F, 1, 0, ksize=3)
        gy = cv2.Sobel(s0, cv2.CV_32F, 0, 1, ksize=3)
        texture = cv2.GaussianBlur(np.sqrt(gx * gx + gy * gy), (0, 0), 2.0)
        weight = np.minimum(texture / (float(np.percentile(texture, 75)) + 1e-6), 1.0)
        ctx_small = np.ones((sh, sw), dtype=bool)
        if ignore is not None:
            ctx_small = cv2.resize(ignore.astype(np.uint8), (sw, sh), interpolation=cv2.INTER_NEAREST) == 0
            weight = weight * ctx_small
        smooth, coherence = _robust_poly_flow(flow, weight, p.flow_degree)
        cap_small = p.max_flow_fraction * max(h, w) * s
        mag = np.sqrt((smooth**2).sum(axis=2))
        factor = np.minimum(1.0, cap_small / np.maximum(mag, 1e-9))
        smooth = smooth * factor[..., None]
        mag = mag * factor
        mean_flow, max_flow = float(mag.mean() / s), float(mag.max() / s)
        if mean_flow < p.min_flow_px:
            notes.append(f"residual flow negligible (mean {mean_flow:.2f} px): not applied")
        elif coherence < p.min_flow_coherence:
            why = f"flow is not globally coherent (inlier share {coherence:.2f} < {p.min_flow_coherence})"
            notes.append(f"residual flow not applied: {why}")
            fallback = fallback or f"flow: {why}"
        else:
            xs, ys = np.meshgrid(np.arange(sw, dtype=np.float32), np.arange(sh, dtype=np.float32))
            warped = cv2.remap(
                s1, xs + smooth[..., 0], ys + smooth[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
            )
            ref = s0.astype(np.float32)
            before = float(np.abs(ref - s1.astype(np.float32))[ctx_small].mean())
            after = float(np.abs(ref - warped.astype(np.float32))[ctx_small].mean())
            if after <= (1.0 - p.min_flow_gain) * before:
                flow_full = cv2.resize(smooth, (w, h), interpolation=cv2.INTER_LINEAR) / s
                notes.append(
                    f"residual flow applied (mean {mean_flow:.2f} px; residual {before:.2f} → {after:.2f})"
                )
            else:
                why = f"flow did not lower the residual enough ({before:.2f} → {after:.2f})"
                notes.append(f"residual flow not applied: {why}")
                fallback = fallback or f"flow: {why}"
    else:
        notes.append("flow stage disabled")

    if hm_used is None and flow_full is None:
        aligned, valid = resized, np.ones((h, w), dtype=bool)
    else:
        mx, my = _remap_maps(hm_used, flow_full, (h, w))
        aligned = cv2.remap(resized, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        m = p.border_margin_px
        valid = (mx >= m) & (mx <= w - 1 - m) & (my >= m) & (my <= h - 1 - m)

    report = AlignmentReport(
        resized_from=resized_from,
        n_keypoints=int(stats["n_keypoints"]),
        n_matches=int(stats["n_matches"]),
        n_inliers=int(stats["n_inliers"]),
        inlier_ratio=float(stats["n_inliers"]) / max(1, int(stats["n_matches"])),
        homography=None if hm_est is None else [[float(v) for v in row] for row in hm_est],
        motion_model=stats.get("model"),  # type: ignore[arg-type]
        homography_used=hm_used is not None,
        max_corner_shift_px=float(shift) if math.isfinite(shift) else -1.0,
        flow_used=flow_full is not None,
        mean_flow_px=mean_flow,
        max_flow_px=max_flow,
        valid_fraction=float(valid.mean()),
        fallback_reason=fallback,
        notes=tuple(notes),
    )
    return Alignment(image=aligned, valid=valid, report=report)
