"""Decoding a dataset row's image with a bound: a pixel budget, no decompression bomb, EXIF applied.

A PNG of a few kilobytes can claim 20000×20000 pixels (1.2 GB once decoded), and a phone JPEG
stores its pixels sideways with an EXIF orientation tag that tells viewers to turn it. So an image
is opened (header only), its size checked against the budget *before* any pixel is decoded, then
decoded strictly (a truncated file is refused, even where lmms-eval told Pillow to pad such files)
and turned upright. A refused image costs its row: the caller records the reason.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageFile, ImageOps

from edct_task.core.inputs import open_regular

__all__ = ["DEFAULT_MAX_PIXELS", "ORIENTATION_KEY", "ImageRefused", "decode_bounded"]

DEFAULT_MAX_PIXELS = 40_000_000
"""Largest image (width × height) a row may hold: the gate's own ``max_pixels`` (an image the gate
would refuse cannot be tested anyway); 40 M pixels decode to 120 MB of RGB."""

ORIENTATION_KEY = "exif_orientation"
"""Sample metadata key recording an EXIF orientation (2..8) that was applied to the pixels."""

_EXIF_ORIENTATION_TAG = 0x0112


class ImageRefused(ValueError):
    """The image is over the pixel budget or is a decompression bomb; the message says which."""


def decode_bounded(
    source: bytes | str | Path, *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[Image.Image, dict[str, str]]:
    """``(upright RGB image, notes)`` of encoded bytes or a file path.

    ``notes`` holds ``{"exif_orientation": "<n>"}`` when an EXIF orientation other than 1 was
    applied (the pixels are turned as a viewer shows them), else nothing.

    Raises
    ------
    ImageRefused
        When width × height exceeds ``max_pixels`` (checked from the header, before decoding) or
        Pillow calls the file a decompression bomb.
    OSError, ValueError, SyntaxError
        When the bytes are not a complete, decodable image.
    """
    # a path is opened only when it is a regular file (a FIFO or a link to /dev/zero never is)
    owned = None if isinstance(source, (bytes, bytearray)) else open_regular(Path(source))
    stream: Any = io.BytesIO(source) if owned is None else owned
    lenient = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False  # lmms-eval sets it True at import
    try:
        with Image.open(stream) as image:
            w, h = image.size
            if w * h > max_pixels:
                raise ImageRefused(
                    f"image is {w}×{h} = {w * h} pixels, over the pixel budget of {max_pixels} "
                    "(data.max_pixels)"
                )
            image.load()
            orientation = image.getexif().get(_EXIF_ORIENTATION_TAG, 1)
            upright = ImageOps.exif_transpose(image) if orientation in range(2, 9) else image
            rgb = upright.convert("RGB")
    except Image.DecompressionBombError as exc:
        raise ImageRefused(f"image refused as a decompression bomb ({exc})") from None
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = lenient
        if owned is not None:
            owned.close()
    notes = {ORIENTATION_KEY: str(orientation)} if orientation in range(2, 9) else {}
    return rgb, notes
