"""Every image a bundle (``edct submit --with-images``) or an export packs is a regular file inside
the run folder: an image replaced by a link to ``/proc/self/environ``, a link to a file outside, or
an ``images/`` folder linked elsewhere never reaches a bundle or an export (issue 46, point 5)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from support.audit_runs import calibration_run

from edct_task.cli.main import main
from edct_task.run.outputs import IMAGES_DIR, image_files, load_run

SECRET = "sk-edct-hostile-images-0123456789abcdef"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return calibration_run(tmp_path_factory.mktemp("img") / "run", n=4)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("cache"))
    return dst


def _first_image(run: Path) -> Path:
    loaded = load_run(run)
    record = next(r for r in loaded.records if r.status == "scored")
    return run / next(iter(image_files(record)))  # the original


def _secret_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside.png"
    outside.write_text(SECRET)
    return outside


def _hostile(kind: str, run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = _first_image(run)
    if kind == "environ":
        monkeypatch.setenv("EDCT_TEST_KEY", SECRET)  # /proc/self/environ holds it from the start below
        image.unlink()
        image.symlink_to("/proc/self/environ")
    elif kind == "link_outside":
        image.unlink()
        image.symlink_to(_secret_file(tmp_path))
    elif kind == "folder_outside":
        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(run / IMAGES_DIR, elsewhere)
        (elsewhere / image.relative_to(run / IMAGES_DIR)).write_text(SECRET)
        shutil.rmtree(run / IMAGES_DIR)
        (run / IMAGES_DIR).symlink_to(elsewhere)
    elif kind == "fifo":
        image.unlink()
        import os

        os.mkfifo(image)


def _holds_secret(path: Path) -> bool:
    if path.is_file():
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                return any(SECRET.encode() in z.read(n) for n in z.namelist())
        return SECRET.encode() in path.read_bytes()
    return any(_holds_secret(p) for p in path.rglob("*") if p.is_file() and not p.is_symlink())


KINDS = ["environ", "link_outside", "folder_outside", "fifo"]


@pytest.mark.parametrize("kind", KINDS)
def test_submit_with_images_packs_only_regular_files_inside_the_run(
    real_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, kind: str
) -> None:
    run = _copy(real_run, tmp_path / "run")
    _hostile(kind, run, tmp_path, monkeypatch)
    bundle = tmp_path / "b.edct.zip"
    rc = main(["submit", str(run), "--with-images", "--output", str(bundle)])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "image(s) are not in the run folder" in err
    assert not bundle.exists() or not _holds_secret(bundle)


@pytest.mark.parametrize("kind", KINDS)
def test_export_copies_only_regular_files_inside_the_run(
    real_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, kind: str
) -> None:
    run = _copy(real_run, tmp_path / "run")
    _hostile(kind, run, tmp_path, monkeypatch)
    out = tmp_path / "export"
    rc = main(["export-counterfactuals", str(run), "--output", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and "not found in the run" in err, err
    assert not out.exists() or not _holds_secret(out)


def test_an_honest_run_still_packs_every_image(real_run: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b.edct.zip"
    assert main(["submit", str(real_run), "--with-images", "--output", str(bundle)]) == 0
    with zipfile.ZipFile(bundle) as z:
        packed = {n for n in z.namelist() if n.startswith("images/")}
    refs = {ref for r in load_run(real_run).records for ref in image_files(r).values()}
    assert packed and packed <= {f"images/{ref}.png" for ref in refs}
