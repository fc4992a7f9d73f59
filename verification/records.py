"""The verification package's records and parameters: pydantic only, importable without numpy,
OpenCV or PIL (the engine's records embed them; ``edct_task.core`` must stay light).

``GateParams`` (with its ``AlignmentParams`` and ``ChangeMapParams``) is every number the gate
uses; ``EditCheck`` is what one check recorded; ``AlignmentReport`` what alignment did.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CHECK_SCHEMA_VERSION",
    "EDIT_TYPES",
    "AlignmentParams",
    "AlignmentReport",
    "ChangeMapParams",
    "EditCheck",
    "GateParams",
    "Verdict",
]


class AlignmentParams(BaseModel):
    """Parameters of ``align_images``; defaults are tuned for editor drift of a few percent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    use_homography: bool = Field(default=True, description="Run the ORB + RANSAC homography stage.")
    use_flow: bool = Field(default=True, description="Run the regularised Farnebäck flow stage.")
    feature_max_side: int = Field(
        default=640,
        ge=64,
        description="ORB runs on images downscaled so the longer side is at most this.",
    )
    orb_features: int = Field(default=1000, ge=50, description="Maximum ORB keypoints per image.")
    ratio_test: float = Field(default=0.75, gt=0, lt=1, description="Lowe's ratio for accepting a match.")
    min_keypoints: int = Field(
        default=40,
        ge=4,
        description="Fewer keypoints in either image → no homography (flat image).",
    )
    min_matches: int = Field(default=20, ge=4, description="Fewer ratio-test matches → no homography.")
    min_inliers: int = Field(default=15, ge=4, description="Fewer RANSAC inliers → homography rejected.")
    min_inlier_ratio: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Inliers / matches below this → homography rejected.",
    )
    ransac_reproj_px: float = Field(
        default=3.0,
        gt=0,
        description="RANSAC reprojection threshold, in feature-resolution pixels.",
    )
    similarity_preference: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description=(
            "Use the 4-parameter similarity fit instead of the full homography when it has at least "
            "this share of the homography's inliers."
        ),
    )
    max_scale_change: float = Field(
        default=0.15,
        ge=0,
        description="Singular values of the linear part must lie in [1/(1+x), 1+x].",
    )
    max_anisotropy: float = Field(
        default=0.05,
        ge=0,
        description="Ratio of the singular values minus one (shear / non-uniform scale) must be ≤ this.",
    )
    max_rotation_deg: float = Field(default=10.0, ge=0, description="Largest rotation accepted.")
    max_perspective: float = Field(
        default=0.02,
        ge=0,
        description="|h31|·W + |h32|·H (variation of the projective denominator) must be ≤ this.",
    )
    max_shift_fraction: float = Field(
        default=0.1,
        ge=0,
        description="Largest corner displacement, as a fraction of the longer side.",
    )
    min_shift_px: float = Field(
        default=0.3,
        ge=0,
        description="A homography moving no corner more than this is treated as identity (not applied).",
    )
    flow_max_side: int = Field(
        default=256,
        ge=32,
        description="Flow is computed on images downscaled so the longer side is at most this.",
    )
    flow_degree: int = Field(
        default=2,
        ge=0,
        le=3,
        description="Degree of the global polynomial flow field fitted robustly to the Farnebäck flow.",
    )
    min_flow_coherence: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Flow is applied only if at least this share of (weighted) pixels fit the global field.",
    )
    max_flow_fraction: float = Field(
        default=0.008,
        gt=0,
        description="Flow magnitude cap, as a fraction of the longer side (≈4 px at 512).",
    )
    min_flow_px: float = Field(
        default=0.25,
        ge=0,
        description="Mean flow below this (full-resolution px) is not applied.",
    )
    min_flow_gain: float = Field(
        default=0.03,
        ge=0,
        lt=1,
        description="Flow is applied only if it lowers the context residual by this fraction.",
    )
    border_margin_px: int = Field(
        default=2,
        ge=0,
        description="Pixels whose source lies within this margin of the edited image's border are invalid.",
    )


class AlignmentReport(BaseModel):
    """What alignment did, for the verification record (JSON-serialisable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resized_from: tuple[int, int] | None = Field(
        default=None,
        description="(H, W) of the edited image when it was resized to the original's size, else None.",
    )
    n_keypoints: int = Field(default=0, description="ORB keypoints in the poorer of the two images.")
    n_matches: int = Field(default=0, description="Matches that passed the ratio test.")
    n_inliers: int = Field(default=0, description="RANSAC inliers of the estimated homography.")
    inlier_ratio: float = Field(default=0.0, description="n_inliers / n_matches.")
    homography: list[list[float]] | None = Field(
        default=None,
        description=(
            "Estimated 3×3 homography mapping edited → original pixels (full resolution), even if "
            "rejected; None when none was estimated."
        ),
    )
    motion_model: Literal["similarity", "homography"] | None = Field(
        default=None,
        description="Which fit was estimated: the 4-parameter similarity (preferred) or the full homography.",
    )
    homography_used: bool = Field(
        default=False,
        description="The homography passed the guards and was applied.",
    )
    max_corner_shift_px: float = Field(
        default=0.0,
        description="Largest displacement of an image corner under the estimated homography.",
    )
    flow_used: bool = Field(default=False, description="The regularised residual flow was applied.")
    mean_flow_px: float = Field(
        default=0.0,
        description="Mean magnitude of the regularised flow (full-resolution px), whether applied or not.",
    )
    max_flow_px: float = Field(
        default=0.0,
        description="Largest magnitude of the regularised flow after the cap.",
    )
    valid_fraction: float = Field(
        default=1.0,
        description="Share of original pixels whose aligned value comes from inside the edited image.",
    )
    fallback_reason: str | None = Field(
        default=None,
        description=(
            "Why a stage was skipped or rejected (first reason), None when every stage ran or was "
            "unnecessary."
        ),
    )
    notes: tuple[str, ...] = Field(default=(), description="One line per decision taken, in order.")


class ChangeMapParams(BaseModel):
    """Thresholds and weights of the change map; defaults calibrated on scikit-image's photos."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pre_blur_sigma: float = Field(
        default=1.0,
        ge=0,
        description="σ (px) of the Gaussian applied to both images before comparing; 0 disables.",
    )
    ssim_sigma: float = Field(
        default=1.5,
        gt=0,
        description="σ (px) of the Gaussian SSIM window (truncated at 3.5σ).",
    )
    ssim_threshold: float = Field(
        default=0.75,
        gt=-1,
        le=1,
        description="δ_structure = 1 where local SSIM < this.",
    )
    w_rgb: float = Field(default=0.5, ge=0, description="Weight of the RGB distance in the pixel score.")
    w_hsv: float = Field(default=0.5, ge=0, description="Weight of the HSV-cone distance in the pixel score.")
    w_grad: float = Field(
        default=0.5,
        ge=0,
        description="Weight of the gradient-magnitude difference in the pixel score.",
    )
    pixel_threshold: float = Field(
        default=0.10,
        gt=0,
        description="δ_pixel = 1 where the pixel score > this.",
    )
    open_radius: int = Field(
        default=1,
        ge=0,
        description="Radius (px) of the disc used to open Δ; 0 disables.",
    )


class GateParams(BaseModel):
    """Every parameter of the verification gate; recorded with each check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tau_in: float = Field(default=0.10, ge=0, le=1, description="Pass needs r_in > tau_in (the paper: 0.10).")
    tau_out: float = Field(
        default=0.30, ge=0, le=1, description="Pass needs r_out < tau_out (the paper: 0.30)."
    )
    dilation_px: int | None = Field(
        default=None,
        ge=0,
        description="Margin added around the mask m, in pixels; when None, dilation_fraction is used.",
    )
    dilation_fraction: float = Field(
        default=0.02,
        ge=0,
        lt=0.5,
        description="Margin as a fraction of the original's shorter side (≈10 px at 512).",
    )
    align: bool = Field(
        default=True,
        description="Align the edit to the original before comparing (ORB homography, then dense flow).",
    )
    alignment: AlignmentParams = Field(default_factory=AlignmentParams, description="Alignment guards.")
    change: ChangeMapParams = Field(default_factory=ChangeMapParams, description="Change-map thresholds.")
    max_pixels: int = Field(
        default=40_000_000,
        gt=0,
        description="Images with more pixels are refused as bad input (verdict bad_image).",
    )
    min_side: int = Field(
        default=16,
        ge=8,
        description="Images with a side shorter than this are refused as bad input.",
    )


CHECK_SCHEMA_VERSION = 2

EDIT_TYPES = ("ADD", "MODIFY", "REMOVE")

Verdict = Literal["pass", "no_change_in_target", "change_outside_target", "target_not_found", "bad_image"]


class EditCheck(BaseModel):
    """The verification record of one edit, JSON-serialisable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = Field(
        default=CHECK_SCHEMA_VERSION,
        description="Bumped when the record's shape or meaning changes.",
    )
    passed: bool = Field(description="The edit is localised: r_in > tau_in and r_out < tau_out.")
    verdict: Verdict = Field(description="pass, or why not.")
    r_in: float | None = Field(
        default=None,
        description="Share of the dilated target region M that changed; None when the gate did not run.",
    )
    r_out: float | None = Field(
        default=None,
        description="Share of the image outside M that changed; None when the gate did not run.",
    )
    tau_in: float = Field(description="Threshold on r_in used.")
    tau_out: float = Field(description="Threshold on r_out used.")
    edit_type: Literal["ADD", "MODIFY", "REMOVE"] = Field(description="Parsed edit type.")
    target: str = Field(description="Parsed target object.")
    searched: Literal["original", "edited"] = Field(
        description="Image the target was searched in (edited for ADD).",
    )
    locator: str = Field(default="", description="Name of the mask provider.")
    mask_fraction: float | None = Field(
        default=None,
        description="Share of the image inside the dilated mask M.",
    )
    n_boxes: int = Field(default=0, description="Detections returned by the locator.")
    image_size: tuple[int, int] | None = Field(default=None, description="(width, height) of the original.")
    edited_resized_from: tuple[int, int] | None = Field(
        default=None,
        description="(height, width) of the edited image when it differed from the original's size.",
    )
    alignment: AlignmentReport | None = Field(
        default=None,
        description="What alignment did; None when alignment was off or the gate did not run.",
    )
    params: GateParams = Field(description="Every gate parameter used.")
    detail: str = Field(default="", description="Human-readable notes: locator detail, conversions, reasons.")
    artefacts: dict[str, str] = Field(
        default_factory=dict,
        description="Artefact name → file name inside artefact_dir.",
    )
    maps: str | None = Field(
        default=None,
        description=(
            "Image-store reference of the gate's maps (change strength, Δ and M packed in one RGB PNG, "
            "see verification.gate_maps), when the caller asked to keep them; None otherwise."
        ),
    )
