"""Localised edit verification (the paper's Algorithm 1): masks, alignment, change maps, the gate.

A leaf package: it imports nothing from ``edct_task``. Kernels are pure functions on numpy
arrays; ``check_edit`` is the PIL-level entry point that returns an ``EditCheck`` record.

The public names below are imported on first use (PEP 562 ``__getattr__``): ``import verification``
loads neither numpy, OpenCV nor PIL, so the engine's records can embed ``verification.records``
without the gate's libraries.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC: dict[str, str] = {
    "Alignment": "verification.alignment",
    "align_images": "verification.alignment",
    "match_size": "verification.alignment",
    "CascadeDetector": "verification.cascade_detector",
    "ChangeMap": "verification.change_map",
    "change_map": "verification.change_map",
    "local_ssim": "verification.change_map",
    "check_edit": "verification.check",
    "image_to_rgb_array": "verification.check",
    "DetectAndSegment": "verification.detect_and_segment",
    "FixedBoxDetector": "verification.detect_and_segment",
    "Detections": "verification.detection",
    "Detector": "verification.detection",
    "finalize_detections": "verification.detection",
    "normalize_target": "verification.detection",
    "EditTarget": "verification.edit_parsing",
    "rule_based_edit_target": "verification.edit_parsing",
    "GateOutcome": "verification.gate",
    "GateResult": "verification.gate",
    "GateVerdict": "verification.gate",
    "evaluate_gate": "verification.gate",
    "gate_decision": "verification.gate",
    "Box": "verification.localization",
    "Localization": "verification.localization",
    "MaskProvider": "verification.localization",
    "BoxMaskProvider": "verification.masks",
    "StaticMaskProvider": "verification.masks",
    "boxes_to_mask": "verification.masks",
    "dilate_mask": "verification.masks",
    "dilation_radius": "verification.masks",
    "mask_fraction": "verification.masks",
    "resize_mask": "verification.masks",
    "validate_mask": "verification.masks",
    "AlignmentParams": "verification.records",
    "AlignmentReport": "verification.records",
    "CHECK_SCHEMA_VERSION": "verification.records",
    "ChangeMapParams": "verification.records",
    "EDIT_TYPES": "verification.records",
    "EditCheck": "verification.records",
    "GateParams": "verification.records",
    "Verdict": "verification.records",
    "Sam2Segmenter": "verification.sam2_segmenter",
    "BoxSegmenter": "verification.segmentation",
    "GrabCutSegmenter": "verification.segmentation",
    "Segmenter": "verification.segmentation",
    "ZeroShotDetector": "verification.zero_shot_detector",
}
"""Public name → the module that defines it."""

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'verification' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
