"""Deterministic OpenCV rendering of calibration scenes (and ground-truth object masks).

Part of the calibration instrument, not the product. A scene renders to the same bytes every time:
the background is a seeded texture (low-frequency shading plus dense gravel dots, so feature
matchers find corners and small shifts change most background pixels) in the context tint, with
low saturation and brightness so that no background pixel looks like a cue colour; objects are
flat shapes with anti-aliased edges drawn in scene order.
``object_mask`` draws one object with the same primitives into a boolean mask, so masks and pixels
agree exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import cv2
import numpy as np
from PIL import Image
from PIL.PngImagePlugin import PngInfo

if TYPE_CHECKING:
    from edct_task.calibration.scenes import Scene, SceneObject

RGB = tuple[int, int, int]
Paint = Callable[[RGB], RGB]

TINTS: dict[str, RGB] = {
    "sand": (170, 150, 110),
    "slate": (100, 115, 150),
    "moss": (105, 140, 100),
    "rose": (165, 110, 120),
    "teal": (95, 140, 140),
    "stone": (130, 130, 130),
}
"""Context tints (all with HSV saturation below 100 and value at most 170)."""

COLOURS: dict[str, RGB] = {
    "red": (230, 20, 20),
    "yellow": (245, 200, 0),
    "green": (20, 200, 60),  # traffic lamps
    "orange": (255, 120, 0),
    "white": (245, 245, 245),
    "ball yellow": (225, 235, 30),
    "lamp off": (75, 75, 75),
    "housing": (35, 35, 38),
    "pole": (60, 60, 60),
    "road": (90, 90, 95),
    "stripe": (235, 235, 235),
    "jacket": (30, 60, 220),
    "skin": (230, 180, 140),
    "trousers": (40, 40, 50),
    "racket": (140, 40, 160),
    "strings": (200, 185, 205),
    "handle": (100, 70, 45),
    "car": (200, 30, 30),
    "window": (150, 200, 230),
    "wheel": (30, 30, 30),
    "headlight": (255, 230, 0),
    "trunk": (100, 75, 50),
    "leaves": (40, 140, 50),
    "leaves dark": (30, 110, 40),
    "outline": (40, 40, 40),
}

_AA = cv2.LINE_AA


BACKGROUNDS_KEPT = 512
"""Rendered backgrounds kept (330 kB each at 384×288): every sample's scene is rendered again for
each of its edits, long after its first rendering when a pipelined run has hundreds of samples in
flight, so fewer than a run's samples would be evicted before their reuse."""


@lru_cache(maxsize=BACKGROUNDS_KEPT)
def _background(context: str, seed: int, width: int, height: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(-1.0, 1.0, size=(7, 9)).astype(np.float32)
    shade = np.clip(cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC), -1.2, 1.2)
    factor = 1.0 + 0.12 * shade
    # Dense gravel, like the fine texture of real photographs: a shift of a few pixels changes
    # most background pixels, so the gate's alignment is exercised for real.
    n_dots = width * height // 40
    xs, ys = rng.integers(0, width, n_dots), rng.integers(0, height, n_dots)
    values = np.where(rng.random(n_dots) < 0.5, 0.8, 1.12)
    radii = rng.integers(1, 3, n_dots)
    for x, y, value, radius in zip(xs.tolist(), ys.tolist(), values.tolist(), radii.tolist(), strict=True):
        cv2.circle(factor, (x, y), radius, value, -1)
    tint = np.asarray(TINTS[context], dtype=np.float32)
    out = np.clip(np.rint(factor[..., None] * tint), 0, 255).astype(np.uint8)
    out.setflags(write=False)
    return out


def _ball(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    colour = COLOURS["ball yellow"] if o.colour == "yellow" else COLOURS[o.colour]
    cv2.circle(c, (o.x, o.y), o.size, p(colour), -1, _AA)
    seam = tuple(int(v * 0.6) for v in colour)
    cv2.ellipse(c, (o.x, o.y), (o.size // 2, o.size - 3), 25, 0, 360, p(seam), 2, _AA)  # type: ignore[arg-type]
    cv2.circle(c, (o.x, o.y), o.size, p(COLOURS["outline"]), 2, _AA)


def _racket(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    cx, cy = o.x, o.y - 15
    cv2.ellipse(c, (cx, cy), (22, o.size), 0, 0, 360, p(COLOURS["strings"]), -1, _AA)
    for d in range(-15, 16, 6):
        cv2.line(c, (cx + d, cy - o.size + 4), (cx + d, cy + o.size - 4), p(COLOURS["racket"]), 1)
    cv2.ellipse(c, (cx, cy), (22, o.size), 0, 0, 360, p(COLOURS["racket"]), 5, _AA)
    cv2.rectangle(c, (o.x - 4, cy + o.size), (o.x + 4, cy + o.size + 45), p(COLOURS["handle"]), -1)


def _traffic_light(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    x, y = o.x, o.y
    cv2.rectangle(c, (x - 3, y + o.size), (x + 3, 202), p(COLOURS["pole"]), -1)
    cv2.rectangle(c, (x - 15, y - o.size), (x + 15, y + o.size), p(COLOURS["housing"]), -1)
    for lamp, dy in (("red", -24), ("yellow", 0), ("green", 24)):
        colour = COLOURS[lamp] if lamp == o.colour else COLOURS["lamp off"]
        cv2.circle(c, (x, y + dy), 9, p(colour), -1, _AA)


def _pedestrian(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    x, y = o.x, o.y
    cv2.line(c, (x - 7, y), (x, y - 24), p(COLOURS["trousers"]), 5, _AA)
    cv2.line(c, (x + 7, y), (x, y - 24), p(COLOURS["trousers"]), 5, _AA)
    cv2.line(c, (x - 9, y - 44), (x - 16, y - 24), p(COLOURS["jacket"]), 4, _AA)
    cv2.line(c, (x + 9, y - 44), (x + 16, y - 24), p(COLOURS["jacket"]), 4, _AA)
    cv2.rectangle(c, (x - 9, y - 48), (x + 9, y - 22), p(COLOURS["jacket"]), -1)
    cv2.circle(c, (x, y - 56), 8, p(COLOURS["skin"]), -1, _AA)


def _road(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    cv2.rectangle(c, (0, o.y - o.size), (c.shape[1] - 1, c.shape[0] - 1), p(COLOURS["road"]), -1)


def _crosswalk(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    for i in range(-2, 3):
        cx = o.x + 26 * i
        cv2.rectangle(c, (cx - 7, o.y - o.size), (cx + 7, o.y + o.size), p(COLOURS["stripe"]), -1)


def _car(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    x, y, s = o.x, o.y, (1 if o.facing == "right" else -1)
    cv2.rectangle(c, (x - o.size, y - 17), (x + o.size, y + 17), p(COLOURS["car"]), -1)
    cabin = np.array([[x - s * 45, y - 17], [x - s * 35, y - 40], [x + s * 8, y - 40], [x + s * 25, y - 17]])
    cv2.fillPoly(c, [cabin.astype(np.int32)], p(COLOURS["car"]), _AA)
    window = np.array([[x - s * 36, y - 20], [x - s * 30, y - 36], [x + s * 5, y - 36], [x + s * 18, y - 20]])
    cv2.fillPoly(c, [window.astype(np.int32)], p(COLOURS["window"]), _AA)
    for wx in (x - 32, x + 32):
        cv2.circle(c, (wx, y + 17), 11, p(COLOURS["wheel"]), -1, _AA)
    cv2.circle(c, (x + s * (o.size - 6), y - 6), 5, p(COLOURS["headlight"]), -1, _AA)


def _tree(c: np.ndarray, o: SceneObject, p: Paint) -> None:
    x, y = o.x, o.y
    cv2.rectangle(c, (x - 5, y - 40), (x + 5, y), p(COLOURS["trunk"]), -1)
    cv2.circle(c, (x, y - 58), o.size, p(COLOURS["leaves"]), -1, _AA)
    cv2.circle(c, (x + 8, y - 64), 12, p(COLOURS["leaves dark"]), -1, _AA)


_DRAW: dict[str, Callable[[np.ndarray, SceneObject, Paint], None]] = {
    "ball": _ball,
    "racket": _racket,
    "traffic light": _traffic_light,
    "pedestrian": _pedestrian,
    "road": _road,
    "crosswalk": _crosswalk,
    "car": _car,
    "tree": _tree,
}


def render_array(scene: Scene) -> np.ndarray:
    """The scene as an H×W×3 uint8 RGB array."""
    canvas = _background(scene.context, scene.texture_seed, scene.width, scene.height).copy()
    for obj in scene.objects:
        _DRAW[obj.category](canvas, obj, lambda colour: colour)
    return canvas


def render_scene(scene: Scene) -> Image.Image:
    """The scene as an RGB PIL image carrying its scene JSON in ``info["edct_scene"]``."""
    from edct_task.calibration.scenes import SCENE_INFO_KEY

    image = Image.fromarray(render_array(scene), mode="RGB")
    image.info[SCENE_INFO_KEY] = scene.to_json()
    return image


def png_info(image: Image.Image) -> PngInfo:
    """The ``edct_`` metadata of an image as PNG text chunks (for saving calibration images)."""
    info = PngInfo()
    for key, value in image.info.items():
        if key.startswith("edct_") and isinstance(value, str):
            info.add_text(key, value)
    return info


def object_mask(scene: Scene, obj: SceneObject) -> np.ndarray:
    """Boolean H×W footprint of one object as drawn (anti-aliased fringe included)."""
    canvas = np.zeros((scene.height, scene.width), dtype=np.uint8)
    _DRAW[obj.category](canvas, obj, lambda colour: (255, 255, 255))
    return canvas > 0


def background_mask(scene: Scene) -> np.ndarray:
    """Boolean H×W mask of the pixels no object covers."""
    covered = np.zeros((scene.height, scene.width), dtype=bool)
    for obj in scene.objects:
        covered |= object_mask(scene, obj)
    return ~covered
