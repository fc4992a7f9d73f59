"""The images of an audit report: full images, thumbnails and the gate's Fig. 2 renderings.

Every image is written once per report, named by its image-store reference: ``img/<ref>.png``
(the run's file, hard-linked or copied) and ``thumb/<ref>.jpg`` (at most ``THUMB_SIDE`` px on
its longer side), so a 300-sample page list loads small files and a click opens the full one.
For an attempt whose check kept the gate's maps (``EditCheck.maps``), the change heatmap and the
overlay (changed pixels in red, the mask's outline in green, on the image that was edited) are
rendered with the same functions as ``check_edit``'s artefacts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from edct_task.engine.files import place
from verification.gate_maps import heatmap_rgb, overlay_rgb, unpack_gate_maps

__all__ = ["THUMB_SIDE", "ImageWriter", "Picture"]

_REF_RE = re.compile(r"[0-9a-f]{64}")

THUMB_SIDE = 200
"""Longer side of thumbnails, px."""

_THUMB_QUALITY = 80
_FIGURE_EXT = {"heatmap": "png", "overlay": "jpg"}
"""The heatmap stays PNG (sharp edges, small); the overlay, a darkened photo, is a JPEG (q 90) at
less than half the bytes. Both are renderings: the run keeps the maps themselves losslessly."""


@dataclass(frozen=True)
class Picture:
    """An image of the report: paths relative to the report folder, and its size."""

    full: str
    thumb: str
    width: int
    height: int

    def as_json(self) -> dict[str, object]:
        return {"full": self.full, "thumb": self.thumb, "width": self.width, "height": self.height}


class ImageWriter:
    """Writes a report's images under ``out_dir`` (``img/`` and ``thumb/``), each at most once.

    Parameters
    ----------
    out_dir : Path
        The report folder.
    resolve : callable
        Image-store reference → path of the PNG in the run, or None when the run does not have it.
    """

    def __init__(self, out_dir: Path, resolve: Callable[[str], Path | None]) -> None:
        self.out_dir = Path(out_dir)
        self.resolve = resolve
        (self.out_dir / "img").mkdir(parents=True, exist_ok=True)
        (self.out_dir / "thumb").mkdir(parents=True, exist_ok=True)
        self._done: dict[str, Picture | None] = {}
        self._figures: dict[str, dict[str, Picture] | None] = {}
        self.missing: list[str] = []
        """References the run could not provide (shown as 'not available' in the report)."""

    def _paths(self, name: str, ext: str = "png") -> tuple[Path, Path]:
        return self.out_dir / "img" / f"{name}.{ext}", self.out_dir / "thumb" / f"{name}.jpg"

    def _thumb(self, image: Image.Image, dst: Path) -> None:
        thumb = image.convert("RGB")
        thumb.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
        tmp = dst.with_name(dst.name + ".tmp")
        thumb.save(tmp, format="JPEG", quality=_THUMB_QUALITY)
        os.replace(tmp, dst)

    def _picture(self, name: str, size: tuple[int, int], ext: str = "png") -> Picture:
        return Picture(f"img/{name}.{ext}", f"thumb/{name}.jpg", size[0], size[1])

    def image(self, ref: str | None) -> Picture | None:
        """The report's copy of a run image (None when the run does not have it)."""
        if not ref:
            return None
        if not _REF_RE.fullmatch(ref):  # never a file name: only content ids name files here
            self.missing.append(ref[:80])
            return None
        if ref in self._done:
            return self._done[ref]
        src = self.resolve(ref)
        picture = None
        if src is not None and Path(src).is_file():
            full, thumb = self._paths(ref)
            try:
                with Image.open(src) as im:
                    size = im.size
                    if not thumb.exists():
                        self._thumb(im, thumb)
            except (OSError, UnidentifiedImageError, ValueError):
                self.missing.append(ref)
            else:
                if not full.exists():
                    place(Path(src), full)
                picture = self._picture(ref, size)
        else:
            self.missing.append(ref)
        self._done[ref] = picture
        return picture

    def gate_figures(self, maps_ref: str | None, before_ref: str | None) -> dict[str, Picture] | None:
        """Change heatmap and mask overlay of one check, from its stored maps (None without them).

        ``before_ref`` is the image the edit was applied to: the overlay is drawn on it.
        """
        if not maps_ref or not before_ref:
            return None
        if not (_REF_RE.fullmatch(maps_ref) and _REF_RE.fullmatch(before_ref)):
            return None
        key = f"{maps_ref}|{before_ref}"
        if key not in self._figures:
            self._figures[key] = self._render_figures(maps_ref, before_ref)
        return self._figures[key]

    def _render_figures(self, maps_ref: str, before_ref: str) -> dict[str, Picture] | None:
        names = {kind: f"{maps_ref}-{before_ref[:12]}-{kind}" for kind in ("heatmap", "overlay")}
        if all(all(p.exists() for p in self._paths(n, _FIGURE_EXT[k])) for k, n in names.items()):
            out = {}  # drawn by an earlier report into this folder
            for kind, name in names.items():
                with Image.open(self._paths(name, _FIGURE_EXT[kind])[0]) as im:
                    out[kind] = self._picture(name, im.size, _FIGURE_EXT[kind])
            return out
        maps_src, before_src = self.resolve(maps_ref), self.resolve(before_ref)
        if maps_src is None or before_src is None:
            self.missing.append(maps_ref if maps_src is None else before_ref)
            return None
        try:
            with Image.open(maps_src) as im:
                maps = unpack_gate_maps(im.convert("RGB"))
            with Image.open(before_src) as im:
                before = np.asarray(im.convert("RGB"))
            if before.shape[:2] != maps.heat.shape:
                raise ValueError("the maps and the edited image differ in size")
            figures = {
                "heatmap": Image.fromarray(heatmap_rgb(maps.heat)),
                "overlay": Image.fromarray(overlay_rgb(before, maps.changed, maps.mask)),
            }
        except (OSError, UnidentifiedImageError, ValueError):
            self.missing.append(maps_ref)
            return None
        out = {}
        for kind, img in figures.items():
            name, ext = names[kind], _FIGURE_EXT[kind]
            full, thumb = self._paths(name, ext)
            if not full.exists():
                tmp = full.with_name(full.name + ".tmp")
                if ext == "png":
                    img.save(tmp, format="PNG", compress_level=1)
                else:
                    img.save(tmp, format="JPEG", quality=90)
                os.replace(tmp, full)
            if not thumb.exists():
                self._thumb(img, thumb)
            out[kind] = self._picture(name, img.size, ext)
        return out
