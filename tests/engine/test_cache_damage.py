"""Issue 19, rows 6-8: a damaged stage cache costs the calls it held, never the run.

Row 6: ``stages.sqlite`` truncated, overwritten or with garbage mid-file is moved aside (one line
naming it) and the run goes on from an empty cache. Rows 7 and 8: cached images that were deleted
or truncated are found when read (checked against their content id) and made again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from PIL import Image

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.engine.stage_cache import ImageStore, StageCache, image_id


def _argv(tmp_path: Path, n: int = 4) -> tuple[list[str], Path]:
    out = tmp_path / "out"
    raw = calibration_config("faithful", n=n, output_dir=out).model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return ["run", "--config", str(path)], out


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def _cached_pngs(out: Path) -> list[Path]:
    return sorted((out / "cache" / "images").rglob("*.png"))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "garbage-mid-file"])
def test_a_damaged_sqlite_cache_is_moved_aside_and_the_run_goes_on(
    tmp_path: Path, capsys, caplog, damage: str
) -> None:
    argv, out = _argv(tmp_path)
    assert main(argv) == 0
    first = _records(out)
    db = out / "cache" / "stages.sqlite"
    data = db.read_bytes()
    assert len(data) > 16_384
    if damage == "truncated":
        db.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        db.write_bytes(os.urandom(len(data)))
    else:
        db.write_bytes(data[:4096] + os.urandom(8192) + data[4096 + 8192 :])
    capsys.readouterr()
    caplog.clear()
    assert main(argv) == 0
    assert "Traceback" not in capsys.readouterr().err
    lines = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(lines) == 1 and str(db) in lines[0] and "moved it aside" in lines[0]
    assert list(db.parent.glob("stages.sqlite.damaged-*"))
    assert _records(out) == first
    with StageCache(out / "cache") as cache:
        assert cache.counts()["target"] > 0  # refilled


def test_deleted_cached_images_are_made_again_on_resume(tmp_path: Path, capsys) -> None:
    argv, out = _argv(tmp_path)
    assert main(argv) == 0
    first = _records(out)
    pngs = _cached_pngs(out)
    assert len(pngs) >= 8
    for p in pngs[::2]:
        p.unlink()
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    assert _records(out) == first
    assert all(p.is_file() for p in pngs)
    for p in (out / "images").rglob("*.png"):
        with Image.open(p) as im:
            im.load()


def test_truncated_cached_images_are_found_and_made_again(tmp_path: Path, capsys, caplog) -> None:
    argv, out = _argv(tmp_path)
    assert main(argv) == 0
    first = _records(out)
    pngs = _cached_pngs(out)
    for p in pngs[::2]:
        with p.open("r+b") as f:  # in place: the run folder's hard links see it too
            f.truncate(100)
    capsys.readouterr()
    caplog.clear()
    assert main(argv) == 0
    assert "Traceback" not in capsys.readouterr().err and "damaged" in caplog.text
    assert _records(out) == first
    store = ImageStore(out / "cache")
    for p in pngs:
        assert store.intact(p.stem), p
    for p in (out / "images").rglob("*.png"):
        with Image.open(p) as im:
            im.load()


def test_the_store_checks_a_file_against_its_id(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    red, blue = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    ref = store.put(red)
    other = ImageStore(tmp_path)  # another process: nothing verified yet
    store.path(ref).write_bytes(store.path(store.put(blue)).read_bytes())  # the wrong picture
    with pytest.raises(KeyError, match="damaged"):
        other.get(ref)
    assert not store.path(ref).exists()
    assert other.put(red) == ref and image_id(other.get(ref)) == ref
