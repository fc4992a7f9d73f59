"""Training-only targets for the visual tokens: what each one shows, from the scene graph.

The language model reads the picture through the merger's visual tokens (a 384×288 scene: a 9×12
grid, each token 32×32 pixels). Colour cues shift the mean of those tokens, so the language model
finds them even while its attention is spread evenly; left and right do not: every grid position
holds exactly one token whatever the scene, so the sum of the tokens' position features is the
same in every picture, and a tree on the left changes the mean only through a feature that is
*both* "tree" and "left" — one that nothing asks the vision tower to form (measured: with the
language-model loss alone, or with an auxiliary loss on the mean of the tokens, spatial first turns
stay at the constant answer, 0–4/20).

Three linear heads on the merged tokens, trained with the model and then dropped (they are not
part of the saved checkpoint):

- ``tokens``: each token's object *and* its cue value in one label (``LABELS``: ``tree:left``,
  ``car:right``, ``traffic light:red``, …), rasterised from the scene graph onto the token grid
  (``render.object_mask``, in draw order) — so "tree on the left" becomes a feature of the tree's
  own tokens;
- ``columns``: each token's own third of the picture (left, middle, right);
- ``scene``: every token predicts the scene's two cue values (one head per cue), so that the
  evenly spread attention of an untrained language model already carries them.

With all three (weights 1, 0.3, 1), the thinking format and 600 steps of 8 conversations, held-out
first turns went from 37–43/60 to 59/60 (README, "A trained tiny VLM").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from edct_task.calibration import world
from edct_task.calibration.render import object_mask
from edct_task.calibration.scenes import Scene, SceneObject, scene_of

LABELS: tuple[str, ...] = (
    "background",
    "ball:orange",
    "ball:white",
    "ball:yellow",
    "racket",
    "traffic light:red",
    "traffic light:yellow",
    "traffic light:green",
    "pedestrian",
    "road",
    "crosswalk",
    "car:left",
    "car:right",
    "tree:left",
    "tree:right",
)
"""A visual token's label: the object under it, with its cue value where it has one."""

MIN_COVER = 96
"""Pixels of an object (of a token's 1,024) for the token to count as showing it."""

CUES: tuple[world.CueKey, ...] = tuple(key for family in world.FAMILIES for key in world.FAMILY_CUES[family])


def object_label(scene: Scene, obj: SceneObject) -> str:
    """``obj``'s label in ``LABELS``."""
    if obj.category in ("ball", "traffic light"):
        return f"{obj.category}:{obj.colour}"
    if obj.category == "car":
        return f"car:{obj.facing}"
    if obj.category == "tree":
        car = scene.find("car")
        return "tree:" + ("left" if car is None or obj.x < car.x else "right")
    return obj.category


def token_labels(scene: Scene, rows: int, cols: int) -> np.ndarray:
    """``LABELS`` indices of a ``rows``×``cols`` token grid over ``scene``, row-major: the object
    covering most of a token (at least ``MIN_COVER`` pixels; later objects hide earlier ones)."""
    cell_h, cell_w = scene.height // rows, scene.width // cols
    if cell_h * rows != scene.height or cell_w * cols != scene.width:
        raise ValueError(f"a {scene.width}×{scene.height} scene does not split into a {cols}×{rows} grid")
    painted = np.zeros((scene.height, scene.width), dtype=np.int64)
    for obj in scene.objects:
        painted[object_mask(scene, obj)] = LABELS.index(object_label(scene, obj))
    cells = painted.reshape(rows, cell_h, cols, cell_w).transpose(0, 2, 1, 3).reshape(rows * cols, -1)
    out = np.zeros(rows * cols, dtype=np.int64)
    for i, cell in enumerate(cells):
        counts = np.bincount(cell, minlength=len(LABELS))
        counts[0] = 0
        if counts.max() >= MIN_COVER:
            out[i] = int(counts.argmax())
    return out


def build_heads(width: int) -> Any:
    """The three heads (``tokens``, ``columns``, one ``scene`` head per cue) on ``width``-wide tokens."""
    import torch

    scene = {f"{o}|{a}": torch.nn.Linear(width, len(world.CUE_VALUES[o, a])) for o, a in CUES}
    return torch.nn.ModuleDict(
        {
            "tokens": torch.nn.Linear(width, len(LABELS)),
            "columns": torch.nn.Linear(width, 3),
            "scene": torch.nn.ModuleDict(scene),
        }
    )


def loss(
    heads: Any,
    merged: Any,
    grid_thw: Any,
    images: Sequence[Image.Image],
    *,
    merge: int,
    weights: tuple[float, float, float],
) -> Any:
    """The weighted auxiliary loss of a batch, averaged over its images that carry a scene graph.

    ``merged``: the merger's output (all images' tokens, concatenated in order); ``grid_thw``: the
    processor's patch grids; ``weights``: of the ``tokens``, ``columns`` and ``scene`` losses."""
    import torch
    import torch.nn.functional as F

    w_tokens, w_columns, w_scene = weights
    sizes = [int(t * h * w) // (merge * merge) for t, h, w in grid_thw.tolist()]
    total = merged.new_zeros(())
    counted = 0
    for tokens, (_, h, w), image in zip(torch.split(merged, sizes), grid_thw.tolist(), images, strict=True):
        scene = scene_of(image)
        if scene is None:
            continue
        rows, cols = h // merge, w // merge
        counted += 1
        target = torch.from_numpy(token_labels(scene, rows, cols))
        total = total + w_tokens * F.cross_entropy(heads["tokens"](tokens), target)
        column = torch.arange(rows * cols) % cols * 3 // cols
        total = total + w_columns * F.cross_entropy(heads["columns"](tokens), column)
        for (obj, attr), value in zip(world.FAMILY_CUES[scene.family], scene.config(), strict=True):
            want = torch.full((rows * cols,), world.CUE_VALUES[(obj, attr)].index(value))
            total = total + w_scene * F.cross_entropy(heads["scene"][f"{obj}|{attr}"](tokens), want) / 2
    return total / max(counted, 1)
