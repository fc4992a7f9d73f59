"""The mask-provider contract: find the edit's target object in an image and give its mask.

Detector + segmenter backends (OWLv2, Grounding DINO, Moondream, OpenCV cascades; SAM2, GrabCut)
and the calibration world's oracle all implement ``MaskProvider``. "Target not found" is a
``Localization`` with ``found=False``, never an exception.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]
"""(x0, y0, x1, y1) in pixels of the searched image."""


@dataclass(frozen=True)
class Localization:
    """Where the target is in one image."""

    found: bool
    mask: np.ndarray | None = None
    """Boolean H×W mask of the target (union over all detections), None when not found."""
    boxes: tuple[Box, ...] = field(default=())
    scores: tuple[float, ...] = field(default=())
    detail: str = ""
    """Human-readable note: which backend, how many boxes, why nothing was found."""


@runtime_checkable
class MaskProvider(Protocol):
    name: str

    def locate(self, image: Image.Image, target: str) -> Localization: ...


def weights_identity(backend: str, model: str, revision: str | None, **params: object) -> dict[str, object]:
    """The identity of a backend that loads weights (recorded in results and cache keys): what it
    is, which weights at which revision (a local folder's ``folder_stamp`` too), and every
    parameter that changes its output."""
    out: dict[str, object] = {"backend": backend, "model": model, "revision": revision, **params}
    stamp = folder_stamp(model)
    return {**out, "checkpoint": stamp} if stamp else out


def folder_stamp(model: str) -> str | None:
    """A fingerprint of the local model folder ``model`` names (its files' names, sizes and
    modification times), or None when it names no folder (a hub id).

    Part of a backend's identity, so of every cache key of its outputs: weights written again
    under the same path (a model trained or fine-tuned again in place) are another model, and a
    run must not be answered with the old weights' cached outputs. Names, sizes and times, not a
    hash of the weights: free for a 16 GB model, and a copy that only changes the times costs
    cache misses, never a stale answer."""
    folder = Path(model).expanduser() if model else None
    if folder is None or not folder.is_dir():
        return None
    stats = [(e.name, e.stat()) for e in os.scandir(folder) if e.is_file() and not e.name.startswith(".")]
    files = sorted((name, st.st_size, st.st_mtime_ns) for name, st in stats)
    return hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16]
