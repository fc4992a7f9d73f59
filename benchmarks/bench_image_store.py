"""Per-image cost of the image store (put / get) on one core; prints one JSON line.

Run: ``.venv/bin/python benchmarks/bench_image_store.py [--runs N] [--images N]``. Two image
kinds: calibration-world images (384×288 with an ``edct_scene`` text chunk, what every
calibration sample stores) and scikit-image's astronaut upscaled to 1024×1024. For each, the
median over ``--runs`` rounds of the per-image time of

- ``put_new``: put an image the store has not seen (id + PNG encode + atomic write);
- ``put_known``: put a *fresh* PIL object with pixels already stored (what a resumed run does
  for every dataset image);
- ``put_read_back``: put the very object ``get`` returned (an image passed along unchanged);
- ``get``: read an image back (PNG decode) that this store has already checked;
- ``put_known_resumed``: ``put_known`` in a new process (a fresh store object): the file on disk
  is checked against its id once (PNG decode + sha256), so a damaged file is written again;
- ``get_first``: the first read of a file in a new process (decode, checked against its id).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import cv2  # noqa: E402
import skimage.data  # noqa: E402
from PIL import Image  # noqa: E402

from edct_task.calibration import generate_samples  # noqa: E402
from edct_task.engine.stage_cache import ImageStore  # noqa: E402


def _calibration_images(n: int) -> list[Image.Image]:
    return [s.image for s in generate_samples(n=n, seed=0)]


def _photo_images(n: int) -> list[Image.Image]:
    base = cv2.resize(skimage.data.astronaut(), (1024, 1024), interpolation=cv2.INTER_CUBIC)
    out = []
    for i in range(n):
        arr = base.copy()
        arr[i, :8] = (i * 37) % 256  # distinct pixels, one row of eight changed
        out.append(Image.fromarray(arr))
    return out


def _fresh(image: Image.Image) -> Image.Image:
    """A new PIL object with the same pixels and ``info`` (no link to the store)."""
    out = Image.frombytes(image.mode, image.size, image.tobytes())
    out.info = dict(image.info)
    return out


def _per_image(fn: Callable[[Any], object], items: Sequence[Any]) -> tuple[float, list[Any]]:
    """Seconds per item of ``fn`` over ``items``, and what it returned."""
    start = time.perf_counter()
    out = [fn(item) for item in items]
    return (time.perf_counter() - start) / len(items), out


def measure(make: Callable[[int], list[Image.Image]], n: int, runs: int) -> dict[str, float]:
    """Median per-image milliseconds of each operation over ``runs`` fresh stores."""
    results: dict[str, list[float]] = {
        "put_new": [],
        "put_known": [],
        "put_read_back": [],
        "get": [],
        "put_known_resumed": [],
        "get_first": [],
    }
    images = make(n)
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            store = ImageStore(Path(tmp))
            seconds, refs = _per_image(store.put, images)
            results["put_new"].append(seconds)
            seconds, again = _per_image(store.put, [_fresh(im) for im in images])
            results["put_known"].append(seconds)
            seconds, read = _per_image(store.get, refs)
            results["get"].append(seconds)
            seconds, back = _per_image(store.put, read)
            results["put_read_back"].append(seconds)
            seconds, resumed = _per_image(ImageStore(Path(tmp)).put, [_fresh(im) for im in images])
            results["put_known_resumed"].append(seconds)
            seconds, _ = _per_image(ImageStore(Path(tmp)).get, refs)
            results["get_first"].append(seconds)
            assert refs == again == back == resumed
    return {k: round(1e3 * statistics.median(v), 3) for k, v in results.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--images", type=int, default=20)
    args = ap.parse_args()
    cv2.setNumThreads(1)
    print(
        json.dumps(
            {
                "bench": "image_store",
                "unit": "ms per image",
                "runs": args.runs,
                "images": args.images,
                "calibration_384x288": measure(_calibration_images, args.images, args.runs),
                "photo_1024x1024": measure(_photo_images, args.images, args.runs),
            }
        )
    )


if __name__ == "__main__":
    main()
