"""Issue 34: ``edct attention`` on hostile pairs: refused by pixel count before decoding, paths
kept inside the export folder, a FIFO never waited on."""

from __future__ import annotations

import json
import os

import pytest
from PIL import Image

from edct_task.attention.analyse import map_pair
from edct_task.attention.pairs import Pair, load_mask, read_pairs
from edct_task.bench_data.format import BenchDataError
from edct_task.counterfactuals.export import JSONL_NAME, MANIFEST_NAME


def _pair(original, edited) -> Pair:
    return Pair(
        id="s-step1",
        sample_id="s",
        step=1,
        question="q?",
        system_prompt="",
        original_image=original,
        edited_image=edited,
        edit_mask=None,
        original_answer=None,
        new_answer=None,
    )


def test_a_pair_over_the_pixel_budget_is_that_pairs_error_before_any_decoding(tmp_path):
    """Before: the 144-megapixel pair (1 MB of PNGs) decoded to 11.6 GB and was killed. Here the
    probe is never reached: the header alone refuses the pair."""
    big = tmp_path / "big.png"
    Image.new("1", (7000, 7000)).save(big)  # 49 M pixels, a few KB on disk
    result = map_pair(None, _pair(big, big))  # type: ignore[arg-type]
    assert result.error is not None and "over the pixel budget of 40000000" in result.error
    with pytest.raises(BenchDataError, match="over the pixel budget"):
        load_mask(big, (7000, 7000))


def test_a_fifo_as_an_image_is_that_pairs_error(tmp_path):
    os.mkfifo(tmp_path / "fifo.png")
    result = map_pair(None, _pair(tmp_path / "fifo.png", tmp_path / "fifo.png"))  # type: ignore[arg-type]
    assert "is a FIFO, not a regular file" in result.error


def test_an_export_row_cannot_name_a_file_outside_its_folder(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / MANIFEST_NAME).write_text("{}")
    row = {
        "id": "s-step1",
        "sample_id": "s",
        "step": 1,
        "question": "q?",
        "original_image": "../../../../etc/passwd",
        "edited_image": "e.png",
    }
    (folder / JSONL_NAME).write_text(json.dumps(row) + "\n")
    with pytest.raises(BenchDataError, match=r"line 1: not an export row .*leads outside the export folder"):
        read_pairs(folder)
