"""Classical cascade detection: the offline default for the few targets cascades know.

Target words map to cascade files (``CASCADE_TARGETS``): faces, cat faces, eyes, smiles, bodies,
licence plates. Two engines run a cascade:

- ``opencv``: ``cv2.CascadeClassifier`` on OpenCV's Haar/LBP XML files (``cascade_dir``, default
  ``cv2.data.haarcascades``). OpenCV 4.x wheels ship both; **OpenCV 5 ships neither** (the
  cascade module moved out of the main package), so this engine needs OpenCV 4.x or a
  ``cascade_dir`` plus a build that has ``CascadeClassifier``.
- ``skimage``: ``skimage.feature.Cascade`` with the LBP frontal-face cascade bundled in
  scikit-image (``skimage.data.lbp_frontal_face_cascade_filename()``). Faces only.

``engine: auto`` (default) uses OpenCV when it has the target's cascade, else scikit-image when
the target is a face. A target no engine covers is "not found" with a detail naming what is
supported. Cascades report no confidence: every box scores 1.0, and ``min_neighbors`` (how many
overlapping raw hits a detection needs) is the strictness knob.

Images are searched at most ``max_side`` pixels on their longer side (boxes are scaled back).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from verification.detection import Detections, finalize_detections, normalize_target

__all__ = ["CASCADE_TARGETS", "CascadeDetector", "cascade_for_target", "opencv_cascade_dir"]

# cascade key → OpenCV XML files tried in order (first found is used).
OPENCV_FILES: dict[str, tuple[str, ...]] = {
    "frontalface": (
        "haarcascade_frontalface_default.xml",
        "haarcascade_frontalface_alt2.xml",
        "lbpcascade_frontalface_improved.xml",
    ),
    "profileface": ("haarcascade_profileface.xml",),
    "frontalcatface": ("haarcascade_frontalcatface.xml", "haarcascade_frontalcatface_extended.xml"),
    "eye": ("haarcascade_eye.xml", "haarcascade_eye_tree_eyeglasses.xml"),
    "smile": ("haarcascade_smile.xml",),
    "fullbody": ("haarcascade_fullbody.xml",),
    "upperbody": ("haarcascade_upperbody.xml",),
    "plate": ("haarcascade_russian_plate_number.xml", "haarcascade_licence_plate_rus_16stages.xml"),
}

# target phrase (after normalisation) → cascade keys tried in order (the first with hits wins).
CASCADE_TARGETS: dict[str, tuple[str, ...]] = {
    "face": ("frontalface", "profileface"),
    "human face": ("frontalface", "profileface"),
    "person face": ("frontalface", "profileface"),
    "profile face": ("profileface",),
    "side face": ("profileface",),
    "cat face": ("frontalcatface",),
    "cat": ("frontalcatface",),
    "kitten": ("frontalcatface",),
    "eye": ("eye",),
    "eyes": ("eye",),
    "smile": ("smile",),
    "mouth": ("smile",),
    "body": ("fullbody", "upperbody"),
    "person": ("fullbody", "upperbody"),
    "pedestrian": ("fullbody", "upperbody"),
    "man": ("fullbody", "upperbody"),
    "woman": ("fullbody", "upperbody"),
    "people": ("fullbody", "upperbody"),
    "full body": ("fullbody",),
    "upper body": ("upperbody",),
    "licence plate": ("plate",),
    "license plate": ("plate",),
    "number plate": ("plate",),
    "plate": ("plate",),
}
# Head nouns that make a phrase a face ("the astronaut's face", "his smiling face").
_FACE_WORDS = {"face", "faces"}


def cascade_for_target(target: str) -> tuple[str, ...]:
    """The cascade keys to try for a target phrase; ``()`` when no cascade covers it.

    The phrase is normalised (lower case, articles dropped, possessive ``'s`` removed); an exact
    entry of ``CASCADE_TARGETS`` wins, then the last two words, then the last word (the head
    noun: "the astronaut's face" → face, "the red cat" → cat).
    """
    t = normalize_target(target)
    t = re.sub(r"'s\b|s'(?=\s|$)", "", t).replace("-", " ")
    words = t.split()
    if not words:
        return ()
    for cand in (" ".join(words), " ".join(words[-2:]), words[-1]):
        if cand in CASCADE_TARGETS:
            return CASCADE_TARGETS[cand]
    if words[-1] in _FACE_WORDS:
        return CASCADE_TARGETS["face"]
    return ()


def opencv_cascade_dir() -> Path | None:
    """OpenCV's bundled cascade folder when it holds any XML file (OpenCV 4.x wheels), else None."""
    data = getattr(cv2, "data", None)
    folder = getattr(data, "haarcascades", None)
    if not folder or not os.path.isdir(folder):
        return None
    path = Path(folder)
    return path if any(path.glob("*.xml")) else None


class CascadeDetector:
    """A ``Detector`` running OpenCV or scikit-image cascades for the targets they cover.

    Parameters
    ----------
    engine : {"auto", "opencv", "skimage"}
        Which cascade implementation to use (see the module notes).
    cascade_dir : str or Path, optional
        Folder of OpenCV cascade XML files; default ``cv2.data.haarcascades``.
    scale_factor : float
        Image pyramid step (> 1).
    min_neighbors : int
        Overlapping raw hits a detection needs (higher = fewer false positives).
    min_size_fraction : float
        Smallest object side searched, as a fraction of the (searched) image's shorter side.
    max_side : int
        The image is downscaled so its longer side is at most this before searching.
    max_boxes : int
        Keep at most this many detections (largest first, since cascades have no score).
    """

    name = "opencv-cascade"

    def __init__(
        self,
        *,
        engine: str = "auto",
        cascade_dir: str | os.PathLike[str] | None = None,
        scale_factor: float = 1.1,
        min_neighbors: int = 10,
        min_size_fraction: float = 0.06,
        max_side: int = 640,
        max_boxes: int = 10,
    ) -> None:
        if engine not in ("auto", "opencv", "skimage"):
            raise ValueError(f"engine must be auto, opencv or skimage, got {engine!r}")
        if scale_factor <= 1.0:
            raise ValueError(f"scale_factor must be > 1, got {scale_factor}")
        if min_neighbors < 1:
            raise ValueError(f"min_neighbors must be >= 1, got {min_neighbors}")
        if not 0.0 < min_size_fraction < 1.0:
            raise ValueError(f"min_size_fraction must be in (0, 1), got {min_size_fraction}")
        if max_side < 32 or max_boxes < 1:
            raise ValueError("max_side must be >= 32 and max_boxes >= 1")
        self.cascade_dir = Path(cascade_dir) if cascade_dir is not None else opencv_cascade_dir()
        if cascade_dir is not None and not self.cascade_dir.is_dir():  # type: ignore[union-attr]
            raise ValueError(f"cascade_dir {cascade_dir} is not a folder")
        self.has_opencv = hasattr(cv2, "CascadeClassifier") and self.cascade_dir is not None
        if engine == "opencv" and not self.has_opencv:
            missing = "no cascade folder" if hasattr(cv2, "CascadeClassifier") else "no CascadeClassifier"
            raise ValueError(
                f"engine 'opencv' needs cv2.CascadeClassifier and cascade XML files; "
                f"OpenCV {cv2.__version__} has {missing} "
                "(OpenCV 5 dropped them: use engine: skimage for faces, or install OpenCV 4.x)"
            )
        self.engine = engine
        self.scale_factor = float(scale_factor)
        self.min_neighbors = int(min_neighbors)
        self.min_size_fraction = float(min_size_fraction)
        self.max_side = int(max_side)
        self.max_boxes = int(max_boxes)
        self._cache: dict[str, object] = {}
        self._lock = threading.Lock()

    # -------------------------------------------------------------------------------- engines

    def _opencv_file(self, key: str) -> Path | None:
        if not self.has_opencv or self.engine == "skimage":
            return None
        for fname in OPENCV_FILES[key]:
            path = self.cascade_dir / fname  # type: ignore[operator]
            if path.is_file():
                return path
        return None

    def _engine_for(self, key: str) -> tuple[str, Path] | None:
        path = self._opencv_file(key)
        if path is not None:
            return "opencv", path
        if self.engine != "opencv" and key == "frontalface":
            import skimage.data

            return "skimage", Path(skimage.data.lbp_frontal_face_cascade_filename())
        return None

    def _classifier(self, engine: str, path: Path) -> object:
        cache_key = f"{engine}:{path}"
        with self._lock:
            clf = self._cache.get(cache_key)
            if clf is None:
                if engine == "opencv":
                    clf = cv2.CascadeClassifier(str(path))
                    if clf.empty():
                        raise ValueError(f"OpenCV could not load the cascade {path}")
                else:
                    from skimage.feature import Cascade

                    clf = Cascade(str(path))
                self._cache[cache_key] = clf
        return clf

    def _run(
        self, engine: str, path: Path, grey: np.ndarray, rgb: np.ndarray
    ) -> list[tuple[float, float, float, float]]:
        h, w = grey.shape
        min_side = max(20, round(self.min_size_fraction * min(h, w)))
        clf = self._classifier(engine, path)
        if engine == "opencv":
            hits = clf.detectMultiScale(  # type: ignore[attr-defined]
                cv2.equalizeHist(grey),
                scaleFactor=self.scale_factor,
                minNeighbors=self.min_neighbors,
                minSize=(min_side, min_side),
            )
            return [
                (float(x), float(y), float(x + bw), float(y + bh))
                for x, y, bw, bh in np.asarray(hits).reshape(-1, 4)
            ]
        with self._lock:  # skimage's Cascade keeps per-call state: one search at a time
            hits = clf.detect_multi_scale(  # type: ignore[attr-defined]
                img=rgb,
                scale_factor=self.scale_factor,
                step_ratio=1,
                min_size=(min_side, min_side),
                max_size=(min(h, w), min(h, w)),
                min_neighbor_number=self.min_neighbors,
            )
        return [
            (float(d["c"]), float(d["r"]), float(d["c"] + d["width"]), float(d["r"] + d["height"]))
            for d in hits
        ]

    # ------------------------------------------------------------------------------- contract

    def detect(self, image: Image.Image, target: str) -> Detections:
        """Run the target's cascades in order; the first that finds anything wins."""
        keys = cascade_for_target(target)
        supported = sorted({k for k, v in CASCADE_TARGETS.items() if any(self._engine_for(c) for c in v)})
        if not keys:
            return Detections(
                detail=f"{self.name}: no cascade for {target!r}; this installation covers: "
                f"{', '.join(supported) or 'nothing'}"
            )
        runnable = [(k, e) for k in keys if (e := self._engine_for(k)) is not None]
        if not runnable:
            return Detections(
                detail=f"{self.name}: cascade(s) {', '.join(keys)} for {target!r} are not available "
                f"here (OpenCV {cv2.__version__} ships no cascade files; scikit-image has faces "
                f"only); covered: {', '.join(supported) or 'nothing'}"
            )
        rgb = np.asarray(image.convert("RGB"))
        scale = min(1.0, self.max_side / max(rgb.shape[:2]))
        if scale < 1.0:
            rgb = cv2.resize(
                rgb,
                (max(1, round(rgb.shape[1] * scale)), max(1, round(rgb.shape[0] * scale))),
                interpolation=cv2.INTER_AREA,
            )
        grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        tried: list[str] = []
        for key, (engine, path) in runnable:
            tried.append(f"{key} ({engine})")
            raw = self._run(engine, path, grey, rgb)
            if raw:
                boxes = [tuple(v / scale for v in b) for b in raw]
                # No scores: rank by area, largest first, so max_boxes keeps the most prominent.
                boxes.sort(key=lambda b: -(b[2] - b[0]) * (b[3] - b[1]))
                return finalize_detections(
                    boxes,
                    [1.0] * len(boxes),
                    image.size,
                    max_boxes=self.max_boxes,
                    detail=f"{self.name}: {key} cascade ({engine}, {path.name})",
                )
        return Detections(
            detail=f"{self.name}: target not found: no {target!r} hits with cascade(s) {', '.join(tried)}"
        )

    def identity(self) -> dict[str, object]:
        return {
            "backend": self.name,
            "engine": self.engine,
            "scale_factor": self.scale_factor,
            "min_neighbors": self.min_neighbors,
            "min_size_fraction": self.min_size_fraction,
            "max_side": self.max_side,
        }
