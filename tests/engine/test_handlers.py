"""Request handlers' shared pieces: the decoded-image cache over the image store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edct_task.engine.handlers import PixelCache
from edct_task.engine.stage_cache import ImageStore


def test_an_image_put_through_the_pixel_cache_is_not_decoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ImageStore(tmp_path)
    pixels = PixelCache(store, size=2)
    edited = Image.fromarray(np.random.default_rng(0).integers(0, 256, (24, 32, 3), dtype=np.uint8))
    edited.info["edct_scene"] = "{}"
    ref = pixels.put(edited)
    assert store.has(ref)

    def no_reads(ref: str) -> Image.Image:
        raise AssertionError(f"{ref} was read back from the store")

    monkeypatch.setattr(store, "get", no_reads)
    kept = pixels(ref)
    assert np.array_equal(np.asarray(kept), np.asarray(edited)) and kept.info == {"edct_scene": "{}"}
    assert pixels(ref) is kept
    monkeypatch.undo()
    # Only the `size` most recent images are kept; older ones are read from the store again.
    other = [pixels.put(Image.new("RGB", (8, 8), (i, 0, 0))) for i in range(2)]
    assert pixels(ref) is not kept and np.array_equal(np.asarray(pixels(ref)), np.asarray(kept))
    assert len(set(other)) == 2
