"""The detector contract: find the edit's target in an image and return boxes.

``Detector.detect(image, target) -> Detections``: zero or more boxes with scores, best first.
"Target not found" is an empty ``Detections`` whose ``detail`` says why (nothing above the
threshold, or a target the backend cannot look for) — never an exception. Exceptions are kept
for failures a retry might fix or a person must fix (HTTP errors, a missing model), and HTTP
backends raise them as ``model_adapters.errors.BackendError`` so the engine records a failure
and never caches it.

Every backend passes its raw boxes through ``finalize_detections``: boxes are clipped to the
image, empty ones dropped, scores below the threshold dropped, the rest sorted by score (ties
keep the backend's order) and cut to ``max_boxes``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from PIL import Image

from verification.localization import Box

__all__ = ["Detections", "Detector", "finalize_detections", "normalize_target"]


@dataclass(frozen=True)
class Detections:
    """What a detector found for one target in one image."""

    boxes: tuple[Box, ...] = field(default=())
    """(x0, y0, x1, y1) in pixels of the searched image, best first."""
    scores: tuple[float, ...] = field(default=())
    """One confidence per box in [0, 1] (1.0 for backends that report none)."""
    detail: str = ""
    """Which backend looked, for what, and why nothing was found when ``boxes`` is empty."""

    def __post_init__(self) -> None:
        if len(self.boxes) != len(self.scores):
            raise ValueError(
                f"Detections needs one score per box, got {len(self.boxes)} boxes, {len(self.scores)} scores"
            )

    def __len__(self) -> int:
        return len(self.boxes)

    def __iter__(self) -> Iterator[tuple[Box, float]]:
        return iter(zip(self.boxes, self.scores, strict=True))

    @property
    def found(self) -> bool:
        return bool(self.boxes)


@runtime_checkable
class Detector(Protocol):
    name: str

    def detect(self, image: Image.Image, target: str) -> Detections: ...


def finalize_detections(
    boxes: Sequence[Sequence[float]],
    scores: Sequence[float],
    image_size: tuple[int, int],
    *,
    threshold: float = 0.0,
    max_boxes: int | None = None,
    detail: str = "",
) -> Detections:
    """Clip, filter, sort and cut raw detections.

    Parameters
    ----------
    boxes : sequence of (x0, y0, x1, y1)
        Raw pixel boxes (may run past the image or be inverted by a random model).
    scores : sequence of float
        One score per box.
    image_size : (int, int)
        (width, height) of the searched image.
    threshold : float
        Boxes with ``score < threshold`` are dropped.
    max_boxes : int, optional
        Keep at most this many (the best).
    detail : str
        Prefix of ``Detections.detail``; the count kept (or "nothing above threshold") is appended.

    Returns
    -------
    Detections
    """
    if len(boxes) != len(scores):
        raise ValueError(f"need one score per box, got {len(boxes)} boxes and {len(scores)} scores")
    if max_boxes is not None and max_boxes < 1:
        raise ValueError(f"max_boxes must be >= 1, got {max_boxes}")
    w, h = int(image_size[0]), int(image_size[1])
    kept: list[tuple[float, int, Box]] = []
    n_raw = len(boxes)
    for i, (box, score) in enumerate(zip(boxes, scores, strict=True)):
        if len(box) != 4:
            raise ValueError(f"a box must be (x0, y0, x1, y1), got {box!r}")
        s = float(score)
        arr = np.asarray(box, dtype=np.float64)
        if not np.isfinite(arr).all() or not np.isfinite(s) or s < threshold:
            continue
        x0, x1 = sorted((float(np.clip(arr[0], 0, w)), float(np.clip(arr[2], 0, w))))
        y0, y1 = sorted((float(np.clip(arr[1], 0, h)), float(np.clip(arr[3], 0, h))))
        if x1 - x0 < 1.0 or y1 - y0 < 1.0:
            continue
        kept.append((s, i, (x0, y0, x1, y1)))
    kept.sort(key=lambda t: (-t[0], t[1]))
    if max_boxes is not None:
        kept = kept[:max_boxes]
    if kept:
        note = f"{len(kept)} box(es) kept of {n_raw} (threshold {threshold:g}), best score {kept[0][0]:.3f}"
    elif n_raw:
        note = (
            f"target not found: none of {n_raw} candidate box(es) reached threshold {threshold:g} "
            "inside the image"
        )
    else:
        note = "target not found: the detector returned no boxes"
    return Detections(
        boxes=tuple(b for _, _, b in kept),
        scores=tuple(s for s, _, _ in kept),
        detail=f"{detail}: {note}" if detail else note,
    )


_ARTICLES = re.compile(r"^(?:the|a|an|this|that|its|his|her|their)\s+")


def normalize_target(target: str) -> str:
    """A detector-friendly phrase: lower case, one space, no leading article, no trailing punctuation."""
    t = " ".join(str(target).strip().lower().split())
    t = t.strip(" .,;:!?\"'")
    while True:
        stripped = _ARTICLES.sub("", t)
        if stripped == t:
            break
        t = stripped
    return t
