"""Photo fixtures and programmatic edits for the verification tests.

Photos are scikit-image's *bundled* samples (no download): astronaut, chelsea, coffee, rocket and
the left view of stereo_motorcycle, downscaled so the longer side is ``MAX_SIDE``. Each comes
with a hand-picked box around one object (fractions of width/height), which the tests use as the
target mask through ``BoxMaskProvider``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import skimage.data

MAX_SIDE = 384

# name → (loader, object box as fractions x0, y0, x1, y1)
PHOTO_SPECS: dict[str, tuple[str, tuple[float, float, float, float]]] = {
    "astronaut": ("astronaut", (0.27, 0.02, 0.60, 0.30)),  # face and hair
    "chelsea": ("chelsea", (0.28, 0.25, 0.72, 0.90)),  # cat's eyes and nose
    "coffee": ("coffee", (0.30, 0.03, 0.68, 0.65)),  # the cup
    "rocket": ("rocket", (0.40, 0.25, 0.60, 0.97)),  # the rocket on its pad
    "motorcycle": ("stereo_motorcycle", (0.30, 0.22, 0.62, 0.55)),  # red tank and seat
}
PHOTO_NAMES = tuple(PHOTO_SPECS)


@dataclass(frozen=True)
class Photo:
    name: str
    image: np.ndarray
    """uint8 H×W×3 RGB."""
    box: tuple[float, float, float, float]
    """Object box in pixels (x0, y0, x1, y1)."""


def load_photo(name: str, max_side: int = MAX_SIDE) -> Photo:
    loader, frac = PHOTO_SPECS[name]
    img = getattr(skimage.data, loader)()
    if isinstance(img, tuple):  # stereo_motorcycle → (left, right, disparity)
        img = img[0]
    img = np.ascontiguousarray(img[..., :3]).astype(np.uint8)
    s = min(1.0, max_side / max(img.shape[:2]))
    if s < 1.0:
        img = cv2.resize(
            img, (round(img.shape[1] * s), round(img.shape[0] * s)), interpolation=cv2.INTER_AREA
        )
    h, w = img.shape[:2]
    box = (frac[0] * w, frac[1] * h, frac[2] * w, frac[3] * h)
    return Photo(name=name, image=img, box=box)


# ----------------------------------------------------------------------------- edit helpers


def box_ellipse(
    shape: tuple[int, int], box: tuple[float, float, float, float], fill: float = 1.0
) -> np.ndarray:
    """Boolean ellipse inscribed in ``box`` (scaled by ``fill``)."""
    h, w = shape
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    ax, ay = fill * (x1 - x0) / 2, fill * (y1 - y0) / 2
    yy, xx = np.mgrid[0:h, 0:w]
    return ((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2 <= 1.0


def hue_shift(
    img: np.ndarray, where: np.ndarray | None = None, shift_deg: float = 120.0, min_sat: float = 0.55
) -> np.ndarray:
    """Recolour: rotate hue by ``shift_deg``; raise saturation to at least ``min_sat`` (greys get colour)."""
    hsv = cv2.cvtColor(img.astype(np.float32) / 255.0, cv2.COLOR_RGB2HSV_FULL)
    hsv[..., 0] = (hsv[..., 0] + shift_deg) % 360.0
    hsv[..., 1] = np.maximum(hsv[..., 1], min_sat)
    out = (np.clip(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL), 0, 1) * 255 + 0.5).astype(np.uint8)
    if where is None:
        return out
    res = img.copy()
    res[where] = out[where]
    return res


def inpaint_away(img: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Remove a region with OpenCV's Telea inpainting."""
    return cv2.inpaint(img, where.astype(np.uint8) * 255, 5, cv2.INPAINT_TELEA)


def paste_patch(
    img: np.ndarray, box: tuple[float, float, float, float], patch_src: np.ndarray, fill: float = 0.8
) -> np.ndarray:
    """Paste a rectangle cut from another photo into the centre of ``box`` (``fill`` of its size)."""
    x0, y0, x1, y1 = box
    bw, bh = (x1 - x0) * fill, (y1 - y0) * fill
    px0, py0 = round((x0 + x1 - bw) / 2), round((y0 + y1 - bh) / 2)
    pw, ph = round(bw), round(bh)
    patch = cv2.resize(patch_src, (pw, ph), interpolation=cv2.INTER_AREA)
    out = img.copy()
    out[py0 : py0 + ph, px0 : px0 + pw] = patch
    return out


def tint(
    img: np.ndarray, where: np.ndarray, colour: tuple[int, int, int] = (255, 40, 200), strength: float = 0.5
) -> np.ndarray:
    """Blend ``colour`` over the pixels in ``where``."""
    out = img.astype(np.float32)
    out[where] = (1 - strength) * out[where] + strength * np.asarray(colour, np.float32)
    return (out + 0.5).astype(np.uint8)


def posterise(img: np.ndarray, levels: int = 3) -> np.ndarray:
    step = 255.0 / (levels - 1)
    return (np.round(img.astype(np.float32) / step) * step).astype(np.uint8)


def stylise(img: np.ndarray) -> np.ndarray:
    """OpenCV's edge-preserving stylisation (a 'watercolour' filter)."""
    bgr = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    return cv2.cvtColor(cv2.stylization(bgr, sigma_s=60, sigma_r=0.45), cv2.COLOR_BGR2RGB)


def blur(img: np.ndarray, sigma: float = 4.0) -> np.ndarray:
    return cv2.GaussianBlur(img, (0, 0), sigma)


def _affine(img: np.ndarray, m: np.ndarray) -> np.ndarray:
    h, w = img.shape[:2]
    return cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)


def translate(img: np.ndarray, dx: float, dy: float) -> np.ndarray:
    return _affine(img, np.float32([[1, 0, dx], [0, 1, dy]]))


def rotate(img: np.ndarray, deg: float) -> np.ndarray:
    h, w = img.shape[:2]
    return _affine(img, cv2.getRotationMatrix2D((w / 2, h / 2), deg, 1.0))


def rescale(img: np.ndarray, factor: float) -> np.ndarray:
    """Zoom about the centre, keeping the size (an editor that crops/zooms slightly)."""
    h, w = img.shape[:2]
    return _affine(img, cv2.getRotationMatrix2D((w / 2, h / 2), 0.0, factor))


def local_edit(photo: Photo, kind: str, donor: np.ndarray) -> np.ndarray:
    """One of the local edits used across the tests: recolour, inpaint or paste."""
    ell = box_ellipse(photo.image.shape[:2], photo.box, fill=0.95)
    if kind == "recolour":
        return hue_shift(photo.image, ell)
    if kind == "inpaint":
        return inpaint_away(photo.image, ell)
    if kind == "paste":
        return paste_patch(photo.image, photo.box, donor)
    raise ValueError(kind)


EDITS = SimpleNamespace(
    box_ellipse=box_ellipse,
    hue_shift=hue_shift,
    inpaint_away=inpaint_away,
    paste_patch=paste_patch,
    tint=tint,
    posterise=posterise,
    stylise=stylise,
    blur=blur,
    translate=translate,
    rotate=rotate,
    rescale=rescale,
    local_edit=local_edit,
)


@pytest.fixture(scope="session")
def photos() -> dict[str, Photo]:
    """The five bundled photographs, downscaled, with their object boxes."""
    return {name: load_photo(name) for name in PHOTO_NAMES}


@pytest.fixture(scope="session")
def donor() -> np.ndarray:
    """A colourful crop used as the pasted 'new object' (the astronaut's mission patch area)."""
    img = skimage.data.astronaut()
    return np.ascontiguousarray(img[300:480, 20:220])


@pytest.fixture(scope="session")
def edits() -> SimpleNamespace:
    """The programmatic edit helpers."""
    return EDITS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise any test taking ``photo_name`` over the five photographs."""
    if "photo_name" in metafunc.fixturenames:
        metafunc.parametrize("photo_name", PHOTO_NAMES)
