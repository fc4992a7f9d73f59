"""Issue 19, rows 3-5: a bad reply or a bad image costs one sample, never the run.

Row 3: a reply holding a lone surrogate; row 4: a decompression bomb; row 5: the pixel budget and
EXIF orientation."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from support.backends import stand_in
from support.calibration_dataset import bomb_png, write_calibration_dataset

from edct_task import roles as roles_mod
from edct_task.bench_data.format import bench_samples
from edct_task.calibration import ReferenceVLM
from edct_task.cli.main import main
from edct_task.config import calibration_config, config_from_dict
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.run.runner import run
from model_adapters.contracts import Completion


def _config(tmp_path: Path, name: str, n: int = 4, data: Path | None = None, **extra: Any) -> Any:
    raw = calibration_config("faithful", n=n, output_dir=tmp_path / name).model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    if data is not None:
        raw["data"] = {"source": "dataset", "path": str(data), **extra}
    return raw


class _SurrogateVLM(ReferenceVLM):
    """The faithful reference, except that the first conversation's reply holds a lone surrogate
    (what ``json.loads('"\\\\ud800"')`` gives for a server's reply)."""

    def generate(self, conversations, params):
        out = super().generate(conversations, params)
        first = out[0]
        return [Completion(first.text + "\ud800", "why \udfff"), *out[1:]]


def test_a_reply_with_a_lone_surrogate_costs_nothing_and_is_written_as_utf8(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setitem(
        roles_mod.REGISTRY["target"],
        "surrogate",
        stand_in("target", "surrogate", lambda o: _SurrogateVLM("faithful")),
    )
    raw = _config(tmp_path, "out")
    raw["roles"]["target"] = {"backend": "surrogate"}
    outcome = run(config_from_dict(raw))
    assert len(outcome.records) == 4
    text = (tmp_path / "out" / "samples.jsonl").read_bytes().decode("utf-8")  # strict: valid UTF-8
    assert "\ufffd" in "".join(json.loads(line)["baseline"]["answer"] for line in text.splitlines())
    cache = StageCache(outcome.output_dir / "cache")
    try:
        assert cache.counts()["target"] > 0
    finally:
        cache.close()
    assert Completion("a\ud800b", "\udc00").text == "a\ufffdb"
    assert Completion("😀").text == "😀"  # a real pair is kept


def test_a_decompression_bomb_is_refused_without_decoding() -> None:
    from edct_task.bench_data.image_decode import ImageRefused, decode_bounded

    with pytest.raises(ImageRefused, match=r"20000×20000|decompression bomb"):
        decode_bounded(bomb_png())


def test_a_bomb_row_costs_its_row_and_the_run_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "bench"
    write_calibration_dataset(data, 3, {1: bomb_png()})
    records = run(config_from_dict(_config(tmp_path, "out", n=3, data=data))).records
    assert [r.status for r in records] == ["scored", "error", "scored"]
    assert "image refused" in records[1].reason


def test_the_pixel_budget_refuses_a_large_row_before_decoding(tmp_path: Path) -> None:
    big = io.BytesIO()
    Image.new("RGB", (800, 600), "white").save(big, format="PNG")
    data = tmp_path / "bench"
    write_calibration_dataset(data, 3, {2: big.getvalue()})
    items = bench_samples(data, ImageStore(tmp_path / "store"), max_pixels=400_000)
    assert items[2].status == "error"
    assert "800×600 = 480000 pixels, over the pixel budget of 400000" in items[2].reason
    assert all(not hasattr(i, "status") for i in items[:2])  # 512×512 scenes pass
    raw = _config(tmp_path, "out", n=3, data=data, max_pixels=400_000)
    assert config_from_dict(raw).data.max_pixels == 400_000


def _exif_jpeg(orientation: int) -> bytes:
    image = Image.new("RGB", (40, 20), "white")
    image.paste((255, 0, 0), (0, 0, 10, 20))  # a red band on the left of the stored pixels
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    image.save(buf, format="JPEG", exif=exif.tobytes(), quality=95)
    return buf.getvalue()


def test_exif_orientation_is_applied_and_recorded(tmp_path: Path) -> None:
    data = tmp_path / "bench"
    write_calibration_dataset(data, 2, {1: _exif_jpeg(6)})
    store = ImageStore(tmp_path / "store")
    items = bench_samples(data, store)
    photo = items[1]
    assert photo.metadata["exif_orientation"] == "6"
    upright = store.get(photo.image)
    assert upright.size == (20, 40)  # orientation 6: turned 90° clockwise for display
    assert upright.getpixel((10, 2))[0] > 200 and upright.getpixel((10, 2))[1] < 80  # red on top now
    assert "exif_orientation" not in items[0].metadata


def test_edct_verify_refuses_a_bomb_with_one_line(tmp_path: Path, capsys) -> None:
    bomb, other = tmp_path / "bomb.png", tmp_path / "x.png"
    bomb.write_bytes(bomb_png())
    Image.new("RGB", (64, 64)).save(other)
    rc = main(
        ["verify", str(bomb), str(other), "--box", "1,1,10,10", "--edit-type", "MODIFY", "--target", "cup"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "bomb.png" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
