"""Calibration scenes saved as an EDCT-Bench dataset, with chosen rows' image bytes replaced
(truncated, tiny, not an image) to inject bad inputs."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import datasets
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from edct_task.bench_data.format import features
from edct_task.calibration import generate_samples
from edct_task.engine.stage_cache import IMAGE_META_PREFIX


def scene_png(image: Image.Image) -> bytes:
    """The scene as PNG bytes, its ``edct_`` scene graph kept as text chunks."""
    info = PngInfo()
    for k, v in image.info.items():
        if isinstance(k, str) and k.startswith(IMAGE_META_PREFIX) and isinstance(v, str):
            info.add_text(k, v)
    buf = io.BytesIO()
    image.save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def bomb_png(side: int = 20_000) -> bytes:
    """A PNG of a few hundred KB claiming ``side``² pixels (1-bit, all black): a decompression bomb."""
    buf = io.BytesIO()
    Image.new("1", (side, side)).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def write_calibration_dataset(path: Path, n: int, replace: Mapping[int, bytes] = ()) -> list[str]:
    """``n`` calibration samples as a dataset at ``path`` (split ``test``); row i's image bytes are
    ``replace[i]`` where given. Returns the sample ids in row order."""
    replace = dict(replace)
    rows = []
    for i, s in enumerate(generate_samples(n=n, seed=0)):
        rows.append(
            {
                "id": s.id,
                "domain": s.domain,
                "question": s.question,
                "system_prompt": s.system_prompt or "",
                "source": "calibration",
                "source_id": str(i),
                "metadata": "{}",
                "image": {"bytes": replace.get(i, scene_png(s.image)), "path": None},
            }
        )
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows, features=features())}).save_to_disk(
        str(path)
    )
    return [r["id"] for r in rows]
