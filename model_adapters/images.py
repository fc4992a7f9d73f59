"""Images on the wire: PIL → PNG bytes / data URIs and back, and bringing outputs to the original size.

PNG is lossless, so what a remote model sees is exactly the pixels we hold. Image ``info`` entries
whose key starts with :data:`META_PREFIX` and whose value is ``str`` (this project's own
metadata, e.g. the calibration world's scene graph) travel as PNG text chunks and come back when
a server returns them; nothing else of ``info`` (EXIF, ICC profile) is sent.
"""

from __future__ import annotations

import base64
import binascii
import io

from PIL import Image, UnidentifiedImageError
from PIL.PngImagePlugin import PngInfo

from model_adapters.errors import BadInput, PermanentBackendError

META_PREFIX = "edct_"
RESIZE_INFO_KEY = "edct_resized_from"
"""``info`` key set on an editor output that was resized back to the original's size: the size the
editor returned, as ``"WxH"``. Stored with the image, so the record of the resize survives."""


def png_bytes(image: Image.Image) -> bytes:
    """Lossless PNG bytes of ``image`` as RGB, with its ``edct_`` text metadata."""
    if not isinstance(image, Image.Image):
        raise BadInput(f"expected a PIL image, got {type(image).__name__}")
    if image.width < 1 or image.height < 1:
        raise BadInput(f"image is empty ({image.width}x{image.height})")
    info = PngInfo()
    for key in sorted(k for k in image.info if isinstance(k, str) and k.startswith(META_PREFIX)):
        value = image.info[key]
        if isinstance(value, str):
            info.add_text(key, value)
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG", compress_level=1, pnginfo=info)
    return buf.getvalue()


def data_uri(image: Image.Image) -> str:
    """``data:image/png;base64,...`` for an OpenAI-style ``image_url`` part."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(image)).decode("ascii")


def decode_image(data: bytes, *, source: str = "reply") -> Image.Image:
    """An RGB image from encoded bytes (PNG, JPEG, WebP…), keeping ``edct_`` text metadata.

    Raises ``PermanentBackendError`` when the bytes are not an image (the server sent garbage).
    """
    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            meta = {
                k: v
                for k, v in opened.info.items()
                if isinstance(k, str) and k.startswith(META_PREFIX) and isinstance(v, str)
            }
            rgb = opened.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise PermanentBackendError(f"{source} is not a decodable image ({type(exc).__name__})") from None
    rgb.info.update(meta)
    return rgb


def decode_data_uri(uri: str, *, source: str = "reply") -> Image.Image:
    """The image of a ``data:`` URI (or of bare base64 text)."""
    text = uri.strip()
    if text.startswith("data:"):
        header, sep, text = text.partition(",")
        if not sep or not header.endswith(";base64"):
            raise PermanentBackendError(f"{source} has a malformed or non-base64 data URI")
    try:
        raw = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        raise PermanentBackendError(f"{source} has invalid base64 image data") from None
    return decode_image(raw, source=source)


def match_size(edited: Image.Image, original: Image.Image) -> Image.Image:
    """``edited`` at ``original``'s size (Lanczos), recording a resize in ``info``.

    Editors often return another resolution (multiples of 16/64, fixed aspect ratios). The
    verification gate compares pixel grids, so the output is resized back; when that happened,
    ``info[RESIZE_INFO_KEY]`` holds the returned size as ``"WxH"``. The ``edct_`` metadata of the
    edited image is kept.
    """
    if edited.size == original.size:
        return edited
    meta = {k: v for k, v in edited.info.items() if isinstance(k, str) and k.startswith(META_PREFIX)}
    out = edited.convert("RGB").resize(original.size, Image.Resampling.LANCZOS)
    out.info.update(meta)
    out.info[RESIZE_INFO_KEY] = f"{edited.width}x{edited.height}"
    return out
