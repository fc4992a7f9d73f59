"""The calibration world's image editor: parse an instruction, edit the scene graph, re-render.

Part of the calibration instrument, not the product. ``SceneEditor`` reads the scene graph from
``image.info["edct_scene"]``, applies the instruction's Change sentence (grammar in
``instructions``), and re-renders, so the edit is exactly local: only the target object's old and
new footprints change. The edited scene goes into the output's ``info``. Optional, composable,
seeded ``Degradation``s imitate real editors' faults to exercise the verification gate: a global
shift/rotation/scale, Gaussian noise and background spill. Degradations do not accumulate along a
chain: every output is a clean render of its scene plus this call's degradation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import cv2
import numpy as np
from PIL import Image

from edct_task.calibration.instructions import SceneEdit, change_line, parse_change
from edct_task.calibration.render import background_mask, render_array
from edct_task.calibration.scenes import (
    SCENE_INFO_KEY,
    Scene,
    pedestrian_for,
    racket_for,
    scene_of,
)
from model_adapters.errors import BadInput, EditRefused


@dataclass(frozen=True)
class Degradation:
    """Faults added after the edit; all zero means none. Deterministic given the edit seed."""

    shift: tuple[float, float] = (0.0, 0.0)
    """Global translation (dx, dy) in pixels."""
    rotation_deg: float = 0.0
    """Global rotation about the image centre, degrees."""
    scale: float = 1.0
    """Global scale about the image centre."""
    noise_sigma: float = 0.0
    """Standard deviation of additive Gaussian noise, in 8-bit levels."""
    spill: float = 0.0
    """Share of the image width (a seeded band) whose background is strongly recoloured; 0 = none."""

    def __post_init__(self) -> None:
        if self.noise_sigma < 0 or not 0.0 <= self.spill <= 1.0 or self.scale <= 0:
            raise ValueError("need noise_sigma >= 0, 0 <= spill <= 1 and scale > 0")

    def apply(self, pixels: np.ndarray, scene: Scene, seed: int) -> np.ndarray:
        """Degrade an RGB uint8 array of ``scene``'s render."""
        out = pixels.astype(np.float32)
        rng = np.random.default_rng(seed)
        if self.spill > 0:
            h, w = pixels.shape[:2]
            band = round(self.spill * w)
            x0 = int(rng.integers(0, w - band + 1))
            region = np.zeros((h, w), dtype=bool)
            region[:, x0 : x0 + band] = True
            region &= background_mask(scene)
            out[region] = 0.35 * out[region] + 0.65 * np.array([40.0, 200.0, 230.0])
        if self.shift != (0.0, 0.0) or self.rotation_deg != 0.0 or self.scale != 1.0:
            h, w = pixels.shape[:2]
            matrix = cv2.getRotationMatrix2D((w / 2.0, h / 2.0), self.rotation_deg, self.scale)
            matrix[:, 2] += np.asarray(self.shift, dtype=np.float64)
            out = cv2.warpAffine(out, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        if self.noise_sigma > 0:
            out = out + rng.normal(0.0, self.noise_sigma, size=out.shape).astype(np.float32)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def apply_edit(scene: Scene, edit: SceneEdit) -> Scene:
    """The scene after one parsed edit; raises EditRefused when it cannot be applied."""
    target = scene.find(edit.obj)
    if edit.attr == "presence" and edit.new == "present":
        if target is not None:
            raise EditRefused(f"cannot add a {edit.obj}: the scene already has one")
        anchor = scene.find("crosswalk" if edit.obj == "pedestrian" else "ball")
        if anchor is None:
            raise EditRefused(f"cannot add a {edit.obj}: the scene has no place for it")
        return scene.with_object(pedestrian_for(anchor) if edit.obj == "pedestrian" else racket_for(anchor))
    if target is None:
        raise EditRefused(f"the scene has no {edit.obj}")
    if edit.attr == "presence":
        return scene.replace_object(target, None)
    if edit.attr == "colour":
        if edit.old is not None and target.colour != edit.old:
            raise EditRefused(f"the {edit.obj} is {target.colour}, not {edit.old}")
        return scene.replace_object(target, replace(target, colour=edit.new))
    if edit.attr == "facing":
        if target.facing == edit.new or (edit.old is not None and target.facing != edit.old):
            raise EditRefused(f"the car already faces {target.facing}")
        return scene.replace_object(target, replace(target, facing=edit.new))
    car = scene.find("car")
    if car is None:
        raise EditRefused("the scene has no car to place the tree against")
    side = "left" if target.x < car.x else "right"
    if side == edit.new:
        raise EditRefused(f"the tree is already to the {side} of the car")
    return scene.replace_object(target, replace(target, x=2 * car.x - target.x))


class SceneEditor:
    """An ImageEditor for calibration images (those carrying ``info["edct_scene"]``)."""

    name = "calibration-scene-editor"

    def __init__(self, degradation: Degradation | None = None) -> None:
        self.degradation = degradation

    def identity(self) -> dict[str, Any]:
        deg = None if self.degradation is None else repr(self.degradation)
        return {"backend": "calibration-scene-editor", "version": 1, "degradation": deg}

    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        scene = scene_of(image)
        if scene is None:
            raise BadInput(f"image has no {SCENE_INFO_KEY!r} metadata: not a calibration image")
        parsed = parse_change(instruction)
        if parsed is None:
            change = change_line(instruction)[:120]
            raise EditRefused(f"instruction outside the calibration grammar: {change!r}")
        edited = apply_edit(scene, parsed)
        pixels = render_array(edited)
        if self.degradation is not None:
            pixels = self.degradation.apply(pixels, edited, seed)
        out = Image.fromarray(pixels, mode="RGB")
        out.info[SCENE_INFO_KEY] = edited.to_json()
        return out
