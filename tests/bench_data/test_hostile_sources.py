"""Issue 34: the Hub builders and the local source readers under hostile input.

A Hub table naming ``/dev/zero`` or a file outside its folder as a row's image, a DriveLM zip
member that inflates 1000-fold, source JSON of thousands of digits or nesting, a FIFO given as
a source file: each costs its item (or is one ``BenchDataError`` line), never memory or a hang.
"""

from __future__ import annotations

import json
import os
import zipfile

import pytest
from PIL import Image

from edct_task.bench_data import hub
from edct_task.bench_data.format import BenchDataError, Candidate, read_image
from edct_task.bench_data.image_decode import decode_bounded
from edct_task.bench_data.sources import load_json


def _candidate(reader) -> Candidate:
    return Candidate(
        id="okvqa-1",
        domain="okvqa",
        question="q?",
        source="test",
        source_id="1",
        image_path=None,
        image_reader=reader,
        image_label="table row 0",
    )


def _png(path, size=(8, 8)):
    Image.new("RGB", size, "red").save(path)
    return path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/dev/zero", "outside the table's folder"),
        ("../secret.png", "outside the table's folder"),
        ("link.png", "outside the table's folder"),  # a link to /dev/zero resolves outside
        ("fifo.png", "is a FIFO"),
    ],
)
def test_a_hub_table_cannot_make_the_builder_read_what_it_names(tmp_path, path, reason):
    """Before: ``/dev/zero`` was read until memory ran out; ``../secret.png`` was copied silently."""
    folder = tmp_path / "snapshot"
    folder.mkdir()
    _png(tmp_path / "secret.png")
    (folder / "link.png").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.png")
    table = [{"image": {"bytes": None, "path": path}}]
    with pytest.raises(BenchDataError, match=reason):
        read_image(_candidate(hub.image_reader(table, 0, folder)))


def test_a_hub_table_image_inside_its_folder_is_read(tmp_path):
    folder = tmp_path / "snapshot"
    folder.mkdir()
    _png(folder / "img.png")
    table = [{"image": {"bytes": None, "path": "img.png"}}]
    assert read_image(_candidate(hub.image_reader(table, 0, folder))) == (folder / "img.png").read_bytes()


def test_a_drivelm_zip_member_is_checked_before_it_is_inflated(tmp_path):
    """Before: the member was inflated whole before the image check (a 1000-fold bomb)."""
    archive = tmp_path / "nuscenes.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("samples/CAM_FRONT/bomb.jpg", b"\0" * (40 << 20))
        z.writestr("samples/CAM_FRONT/flat.jpg", b"\0" * (4 << 20))
    with pytest.raises(ValueError, match="over the limit of 33554432"):
        hub._member(hub.ZipMembers(archive), "samples/CAM_FRONT/bomb.jpg")()
    with pytest.raises(ValueError, match=r"inflates [0-9]+-fold"):
        hub._member(hub.ZipMembers(archive), "samples/CAM_FRONT/flat.jpg")()


def test_reading_every_member_opens_the_archive_once(tmp_path, monkeypatch):
    """Before: every image read opened the zip again and parsed its whole directory (work
    growing as images × members); now one open serves every read."""
    archive = tmp_path / "nuscenes.zip"
    names = [f"samples/CAM_FRONT/{i}.jpg" for i in range(300)]
    with zipfile.ZipFile(archive, "w") as z:
        for i, name in enumerate(names):
            z.writestr(name, bytes([i % 256]) * 64)
    opened = []
    real = zipfile.ZipFile

    def counting(*args, **kwargs):
        opened.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(hub.zipfile, "ZipFile", counting)
    members = hub.ZipMembers(archive)
    data = [hub._member(members, name)() for name in names]
    assert data[7] == bytes([7]) * 64 and len(data) == 300
    assert len(opened) == 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"n": ' + "9" * 5000 + "}", "Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"q": "\xff"}', "can.t decode byte 0xff"),
    ],
)
def test_hostile_source_json_is_one_line(tmp_path, text, reason):
    """Before: a traceback (ValueError, RecursionError, UnicodeDecodeError)."""
    path = tmp_path / "v1_1_train_nus.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(BenchDataError, match=reason) as exc:
        load_json(path, "DriveLM-nuScenes QA JSON")
    assert "\n" not in str(exc.value)


def test_a_fifo_given_as_a_source_file_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "questions.json")
    with pytest.raises(BenchDataError, match="is a FIFO, not a regular file"):
        load_json(tmp_path / "questions.json", "OK-VQA questions")
    with pytest.raises(ValueError, match="is a FIFO"):
        decode_bounded(tmp_path / "questions.json")


def test_an_oversized_image_is_refused_by_its_header(tmp_path):
    path = tmp_path / "big.png"
    Image.new("1", (7000, 7000)).save(path)  # 49 M pixels in a small file
    with pytest.raises(BenchDataError, match="over the pixel budget"):
        read_image(Candidate("x", "okvqa", "q", "s", "1", image_path=path))
    assert json.dumps({"ok": True})
