"""Localised edit verification (SPEC §4, Algorithm 1): masks, alignment, change maps, the gate.

A leaf package: it imports nothing from ``edct_task``. Kernels are pure functions on numpy
arrays; ``check_edit`` is the PIL-level entry point that returns an ``EditCheck`` record.
"""

from verification.alignment import Alignment, AlignmentParams, AlignmentReport, align_images, match_size
from verification.cascade_detector import CascadeDetector
from verification.change_map import ChangeMap, ChangeMapParams, change_map, local_ssim
from verification.check import (
    CHECK_SCHEMA_VERSION,
    EDIT_TYPES,
    EditCheck,
    Verdict,
    check_edit,
    image_to_rgb_array,
)
from verification.detect_and_segment import DetectAndSegment, FixedBoxDetector
from verification.detection import Detections, Detector, finalize_detections, normalize_target
from verification.edit_parsing import EditTarget, rule_based_edit_target
from verification.gate import GateOutcome, GateParams, GateResult, GateVerdict, evaluate_gate, gate_decision
from verification.localization import Box, Localization, MaskProvider
from verification.masks import (
    BoxMaskProvider,
    StaticMaskProvider,
    boxes_to_mask,
    dilate_mask,
    dilation_radius,
    mask_fraction,
    resize_mask,
    validate_mask,
)
from verification.sam2_segmenter import Sam2Segmenter
from verification.segmentation import BoxSegmenter, GrabCutSegmenter, Segmenter
from verification.zero_shot_detector import ZeroShotDetector

__all__ = [
    "CHECK_SCHEMA_VERSION",
    "EDIT_TYPES",
    "Alignment",
    "AlignmentParams",
    "AlignmentReport",
    "Box",
    "BoxMaskProvider",
    "BoxSegmenter",
    "CascadeDetector",
    "ChangeMap",
    "ChangeMapParams",
    "DetectAndSegment",
    "Detections",
    "Detector",
    "EditCheck",
    "EditTarget",
    "FixedBoxDetector",
    "GateOutcome",
    "GateParams",
    "GateResult",
    "GateVerdict",
    "GrabCutSegmenter",
    "Localization",
    "MaskProvider",
    "Sam2Segmenter",
    "Segmenter",
    "StaticMaskProvider",
    "Verdict",
    "ZeroShotDetector",
    "align_images",
    "boxes_to_mask",
    "change_map",
    "check_edit",
    "dilate_mask",
    "dilation_radius",
    "evaluate_gate",
    "finalize_detections",
    "gate_decision",
    "image_to_rgb_array",
    "local_ssim",
    "mask_fraction",
    "match_size",
    "normalize_target",
    "resize_mask",
    "rule_based_edit_target",
    "validate_mask",
]
