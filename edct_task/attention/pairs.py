"""Counterfactual pairs read back for analysis: from an ``edct export-counterfactuals`` folder or a run.

Both ``edct attention`` and ``edct finetune`` take either folder. A pair is one verified chain
step: the original image, the verified edited image, the question (and system prompt), the
target's answers on both, and the gate's edit mask M (None when the export or run did not keep
it; then the pair gets saliency maps but no localization score).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from edct_task.bench_data.format import BenchDataError
from edct_task.bench_data.image_decode import DEFAULT_MAX_PIXELS
from edct_task.core.inputs import InputFileError, read_regular, read_text
from edct_task.counterfactuals.export import JSONL_NAME, MANIFEST_NAME, collect_pairs

__all__ = ["Pair", "load_mask", "read_pairs"]


@dataclass(frozen=True)
class Pair:
    """One verified counterfactual pair."""

    id: str
    """``<sample id>-step<j>``."""
    sample_id: str
    step: int
    question: str
    system_prompt: str
    original_image: Path
    edited_image: Path
    edit_mask: Path | None
    """A mode-L mask PNG (export) or the gate's packed maps PNG (run folder); None when not kept."""
    original_answer: str | None
    """The target's answer on the original in the run (not a gold label)."""
    new_answer: str | None
    """The target's answer on the counterfactual in the run (not a gold label)."""
    edit_type: str | None = None
    """ADD, MODIFY or REMOVE as the gate parsed edit j (None in exports before version 2)."""


def load_mask(path: Path, size: tuple[int, int]) -> np.ndarray:
    """M as a bool array of ``size`` = (width, height): a white-inside L PNG, or packed gate maps.

    Raises
    ------
    BenchDataError
        When the mask's size differs from the image's.
    """
    from verification.gate_maps import unpack_gate_maps

    with _open_bounded(path) as img:
        mask = unpack_gate_maps(img).mask if img.mode == "RGB" else np.asarray(img.convert("L")) > 127
    if (mask.shape[1], mask.shape[0]) != tuple(size):
        raise BenchDataError(
            f"{path}: mask is {mask.shape[1]}×{mask.shape[0]}, the image {size[0]}×{size[1]}"
        )
    return mask


MAX_IMAGE_BYTES = 32 << 20
"""Largest image or mask file read (the leaderboard's cap for one packed image too)."""
MAX_PAIRS_BYTES = 256 << 20
"""Largest export JSONL read."""


def _open_bounded(path: Path) -> Image.Image:
    """An image file opened (header only) when it is a regular file of at most
    :data:`MAX_IMAGE_BYTES` whose width × height is within the pixel budget."""
    try:
        data = read_regular(path, MAX_IMAGE_BYTES)
    except InputFileError as exc:
        raise BenchDataError(str(exc)) from None
    img = Image.open(io.BytesIO(data))
    w, h = img.size
    if w * h > DEFAULT_MAX_PIXELS:
        img.close()
        raise BenchDataError(
            f"{path}: {w}×{h} = {w * h} pixels, over the pixel budget of {DEFAULT_MAX_PIXELS}; not decoded"
        )
    return img


def open_image(path: Path) -> Image.Image:
    """An image file as RGB, bounded like :func:`_open_bounded` (and Pillow's bomb check)."""
    with _open_bounded(path) as img:
        return img.convert("RGB")


def _inside(folder: Path, name: object) -> Path:
    """``folder / name`` when it stays inside ``folder`` (no ``..``, no absolute path out)."""
    path = folder / str(name)
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"path {str(name)[:200]!r} leads outside the export folder")
    return path


def _from_export(folder: Path) -> list[Pair]:
    pairs = []
    try:
        text = read_text(folder / JSONL_NAME, MAX_PAIRS_BYTES)
    except InputFileError as exc:
        raise BenchDataError(str(exc)) from None
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
            mask = row.get("edit_mask")
            pairs.append(
                Pair(
                    id=str(row["id"]),
                    sample_id=str(row["sample_id"]),
                    step=int(row["step"]),
                    question=str(row["question"]),
                    system_prompt=str(row.get("system_prompt") or ""),
                    original_image=_inside(folder, row["original_image"]),
                    edited_image=_inside(folder, row["edited_image"]),
                    edit_mask=None if mask is None else _inside(folder, mask),
                    original_answer=row.get("original_answer"),
                    new_answer=row.get("new_answer"),
                    edit_type=row.get("edit_type"),
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise BenchDataError(
                f"{folder / JSONL_NAME}, line {number}: not an export row ({first})"
            ) from None
    return pairs


def _from_run(folder: Path) -> list[Pair]:
    rows, _ = collect_pairs(folder)
    return [
        Pair(
            id=r["id"],
            sample_id=r["sample_id"],
            step=r["step"],
            question=r["question"],
            system_prompt=r["system_prompt"],
            original_image=Path(r["original_image"]),
            edited_image=Path(r["edited_image"]),
            edit_mask=None if r["gate_maps"] is None else Path(r["gate_maps"]),
            original_answer=r["original_answer"],
            new_answer=r["new_answer"],
            edit_type=r["edit_type"],
        )
        for r in rows
    ]


def read_pairs(source: Path) -> tuple[list[Pair], str]:
    """The pairs of an export folder or a run folder, and which of the two it was ("export"/"run").

    Raises
    ------
    BenchDataError
        When ``source`` is neither, or holds no verified pair.
    """
    source = Path(source)
    if not source.is_dir():
        raise BenchDataError(
            f"{source}: not a folder (give an export-counterfactuals folder or a run folder)"
        )
    if (source / MANIFEST_NAME).is_file() and (source / JSONL_NAME).is_file():
        pairs, kind = _from_export(source), "export"
    else:
        pairs, kind = _from_run(source), "run"
    if not pairs:
        raise BenchDataError(f"{source}: no verified counterfactual pair to analyse")
    return pairs, kind
