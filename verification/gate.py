"""The localisation gate (the end of the paper's Algorithm 1): dilate the mask, align, compute Δ,
decide.

Reading of "r_in / r_out: the share of changed pixels inside / outside M" **[ours]**: they are
*per-region change ratios* —

    r_in  = |Δ ∩ M| / |M|          (share of the target region that changed)
    r_out = |Δ ∖ M| / |¬M|         (share of everything else that changed)

counted only over valid pixels (those the aligned edit covers). An edit passes iff
r_in > τ_in (it really changed the target) and r_out < τ_out (it left the rest alone).
An empty region has ratio 0 (a mask covering the whole image gives r_out = 0; the record keeps
``mask_fraction`` so such a check can be audited).

Verdicts: "pass"; "change_outside_target" when r_out ≥ τ_out (reported first: a global edit
usually also changes the target); "no_change_in_target" when r_in ≤ τ_in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from verification.alignment import Alignment, align_images, match_size
from verification.change_map import ChangeMap, change_map
from verification.masks import dilate_mask, dilation_radius, validate_mask
from verification.records import GateParams

__all__ = [
    "GateOutcome",
    "GateParams",
    "GateResult",
    "GateVerdict",
    "evaluate_gate",
    "gate_decision",
    "gate_verdict",
]

GateVerdict = Literal["pass", "no_change_in_target", "change_outside_target"]


class GateResult(BaseModel):
    """The gate's decision and the numbers behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: bool = Field(description="r_in > tau_in and r_out < tau_out.")
    verdict: GateVerdict = Field(
        description="pass, or which condition failed (change_outside_target reported first).",
    )
    r_in: float = Field(description="Share of valid pixels inside M that changed.")
    r_out: float = Field(description="Share of valid pixels outside M that changed.")
    n_in: int = Field(description="Valid pixels inside M.")
    n_out: int = Field(description="Valid pixels outside M.")
    tau_in: float = Field(description="The threshold r_in had to exceed.")
    tau_out: float = Field(description="The threshold r_out had to stay under.")


def gate_verdict(r_in: float, r_out: float, *, tau_in: float, tau_out: float) -> GateVerdict:
    """The pass rule on the two change ratios: ``change_outside_target`` when r_out ≥ τ_out
    (reported first), ``no_change_in_target`` when r_in ≤ τ_in, else ``pass``."""
    if r_out >= tau_out:
        return "change_outside_target"
    if r_in <= tau_in:
        return "no_change_in_target"
    return "pass"


def gate_decision(
    changed: np.ndarray,
    region: np.ndarray,
    *,
    valid: np.ndarray | None = None,
    tau_in: float = 0.10,
    tau_out: float = 0.30,
) -> GateResult:
    """Apply the pass rule to a change map and a (dilated) target region.

    Parameters
    ----------
    changed : ndarray of bool, shape (H, W)
        Δ.
    region : ndarray of bool, shape (H, W)
        The dilated target mask M.
    valid : ndarray of bool, shape (H, W), optional
        Pixels to count; all when None.
    tau_in, tau_out : float
        Pass iff r_in > tau_in and r_out < tau_out (the paper: 0.10 and 0.30).

    Returns
    -------
    GateResult

    Raises
    ------
    ValueError
        If the arrays are not 2-D or their shapes differ.
    """
    d = validate_mask(changed, name="changed")
    m = validate_mask(region, name="region")
    if d.shape != m.shape:
        raise ValueError(f"changed and region must have the same shape, got {d.shape} and {m.shape}")
    v = np.ones_like(d) if valid is None else validate_mask(valid, name="valid")
    if v.shape != d.shape:
        raise ValueError(f"valid must have the shape of changed {d.shape}, got {v.shape}")
    inside, outside = m & v, ~m & v
    n_in, n_out = int(inside.sum()), int(outside.sum())
    r_in = float((d & inside).sum()) / n_in if n_in else 0.0
    r_out = float((d & outside).sum()) / n_out if n_out else 0.0
    verdict = gate_verdict(r_in, r_out, tau_in=tau_in, tau_out=tau_out)
    return GateResult(
        passed=verdict == "pass",
        verdict=verdict,
        r_in=r_in,
        r_out=r_out,
        n_in=n_in,
        n_out=n_out,
        tau_in=tau_in,
        tau_out=tau_out,
    )


@dataclass(frozen=True)
class GateOutcome:
    """Everything ``evaluate_gate`` computed, arrays included (for artefacts)."""

    result: GateResult
    region: np.ndarray
    """The dilated mask M, bool H×W in the original's frame."""
    compared: np.ndarray
    """The edited image as compared: resized and (when enabled) aligned, uint8 H×W×3."""
    valid: np.ndarray
    """Pixels counted, bool H×W."""
    change: ChangeMap
    alignment: Alignment | None
    """None when ``params.align`` is False."""
    resized_from: tuple[int, int] | None
    """The edited image's (H, W) when it was resized to the original's size."""


def evaluate_gate(
    original: np.ndarray,
    edited: np.ndarray,
    mask: np.ndarray,
    params: GateParams | None = None,
) -> GateOutcome:
    """Run the gate on arrays: dilate m → M, align, Δ, r_in / r_out, decision.

    Parameters
    ----------
    original : ndarray, uint8, shape (H, W, 3)
        Original RGB image.
    edited : ndarray, uint8, shape (H', W', 3)
        Edited RGB image; resized to (H, W) when its size differs.
    mask : ndarray of bool, shape (H, W)
        Target mask m in the original's frame (from the searched image, resized if needed).
    params : GateParams, optional
        Defaults when None.

    Returns
    -------
    GateOutcome

    Raises
    ------
    ValueError
        On malformed arrays (shape, dtype, empty mask), with a message naming the rule.
    """
    p = params or GateParams()
    m = validate_mask(mask)
    if m.shape != np.asarray(original).shape[:2]:
        raise ValueError(f"mask must have the original's H×W {np.asarray(original).shape[:2]}, got {m.shape}")
    if not m.any():
        raise ValueError("mask must contain at least one pixel (target not found is the caller's verdict)")
    region = dilate_mask(m, dilation_radius(m.shape, px=p.dilation_px, fraction=p.dilation_fraction))
    alignment: Alignment | None = None
    if p.align:
        alignment = align_images(original, edited, ignore=region, params=p.alignment)
        compared, valid, resized_from = alignment.image, alignment.valid, alignment.report.resized_from
    else:
        compared, resized_from = match_size(original, edited)
        valid = np.ones(m.shape, dtype=bool)
    cm = change_map(original, compared, valid=valid, params=p.change)
    result = gate_decision(cm.changed, region, valid=valid, tau_in=p.tau_in, tau_out=p.tau_out)
    return GateOutcome(
        result=result,
        region=region,
        compared=compared,
        valid=valid,
        change=cm,
        alignment=alignment,
        resized_from=resized_from,
    )
