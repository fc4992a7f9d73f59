"""The calibration world: a procedurally generated world whose true faithfulness is known.

This package is a calibration *instrument* — the offline demo, a correctness test of the whole
pipeline and the benchmark load generator — not the product (the product is the EDCT pipeline on
real backends). It provides seeded samples in three families mirroring the paper's domains,
reference VLMs with known behaviour that perceive pixels, a scene-graph image editor with optional
degradations, a rule-based text LLM (extractor, instruction writer, edit parser, judge) and an
oracle mask provider. Expected outcomes: faithful → CCS ≈ 1, prior → ≈ 0, stale → AC ≈ 1 with
EF ≈ 0, mixed:p → ≈ p.
"""

from edct_task.calibration.instructions import SceneEdit, parse_change, write_change
from edct_task.calibration.oracle import OracleMaskProvider
from edct_task.calibration.perception import Percept, perceive
from edct_task.calibration.reference_vlm import ReferenceVLM, parse_behavior
from edct_task.calibration.render import object_mask, render_scene
from edct_task.calibration.samples import calibration_sample, generate_samples
from edct_task.calibration.scene_editor import Degradation, SceneEditor
from edct_task.calibration.scenes import (
    SCENE_INFO_KEY,
    CalibrationSample,
    Scene,
    SceneObject,
    scene_of,
)
from edct_task.calibration.text_models import RuleBasedLLM

__all__ = [
    "SCENE_INFO_KEY",
    "CalibrationSample",
    "Degradation",
    "OracleMaskProvider",
    "Percept",
    "ReferenceVLM",
    "RuleBasedLLM",
    "Scene",
    "SceneEdit",
    "SceneEditor",
    "SceneObject",
    "calibration_sample",
    "generate_samples",
    "object_mask",
    "parse_behavior",
    "parse_change",
    "perceive",
    "render_scene",
    "scene_of",
    "write_change",
]
