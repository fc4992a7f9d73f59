"""Ground-truth masks for calibration images: a MaskProvider that reads the scene graph.

Part of the calibration instrument, not the product. It stands in for detector + segmenter when
testing the verification gate: the mask of the object the target phrase names, exactly as drawn.
"""

from __future__ import annotations

import re

import numpy as np
from PIL import Image

from edct_task.calibration.render import object_mask
from edct_task.calibration.scenes import scene_of
from verification.localization import Localization

SYNONYMS: dict[str, tuple[str, ...]] = {
    "traffic light": ("traffic light", "traffic signal", "signal", "stoplight", "light"),
    "pedestrian": ("pedestrian", "person", "man", "woman", "walker", "people"),
    "ball": ("ball", "football", "basketball", "tennis ball"),
    "racket": ("racket", "racquet", "paddle", "bat"),
    "car": ("car", "vehicle", "automobile"),
    "tree": ("tree",),
    "crosswalk": ("crosswalk", "zebra crossing", "crossing"),
    "road": ("road", "street"),
}


def category_of(target: str) -> str | None:
    """The scene category a target phrase names, or None.

    The earliest mention wins ("the racket next to the ball" → racket), then the longest synonym.
    """
    t = target.lower()
    best: tuple[int, int, str] | None = None
    for category, words in SYNONYMS.items():
        for word in words:
            m = re.search(rf"\b{re.escape(word)}s?\b", t)
            if m and (best is None or (m.start(), -len(word)) < best[:2]):
                best = (m.start(), -len(word), category)
    return None if best is None else best[2]


class OracleMaskProvider:
    """MaskProvider returning the rendered footprint of the named object from the scene graph."""

    name = "calibration-oracle"

    def locate(self, image: Image.Image, target: str) -> Localization:
        scene = scene_of(image)
        if scene is None:
            return Localization(found=False, detail="calibration-oracle: image has no scene metadata")
        category = category_of(target)
        if category is None:
            return Localization(found=False, detail=f"calibration-oracle: no category matches {target!r}")
        objects = [o for o in scene.objects if o.category == category]
        if not objects:
            return Localization(found=False, detail=f"calibration-oracle: no {category} in the scene")
        mask = np.zeros((scene.height, scene.width), dtype=bool)
        boxes = []
        for obj in objects:
            m = object_mask(scene, obj)
            ys, xs = np.nonzero(m)
            boxes.append((float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)))
            mask |= m
        return Localization(
            found=True,
            mask=mask,
            boxes=tuple(boxes),
            scores=tuple(1.0 for _ in boxes),
            detail=f"calibration-oracle: {len(objects)} {category} object(s)",
        )
