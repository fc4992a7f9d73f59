"""Reading finished runs back: sample folders are injective and safe; records and images load."""

from __future__ import annotations

from pathlib import Path

import pytest

from edct_task.config import calibration_config
from edct_task.run.outputs import RunReadError, image_files, load_run, sample_folder
from edct_task.run.runner import run


def test_sample_folders_are_injective_and_stay_inside_images() -> None:
    ids = ["x/y", "x_y", "x y", "..", ".", "", "../../etc", "a" * 300]
    folders = [sample_folder(i) for i in ids]
    assert len(set(folders)) == len(ids)
    for f in folders:
        assert "/" not in f and f not in ("", ".", "..") and not f.startswith(".")
        assert len(f) <= 48 + 13


def test_an_edct_run_reads_back_with_its_images(tmp_path: Path) -> None:
    config = calibration_config("faithful", n=4, output_dir=tmp_path / "run")
    outcome = run(config.model_copy(update={"progress": False, "bootstrap_resamples": 200}))
    loaded = load_run(tmp_path / "run")
    assert loaded.kind == "edct"
    assert [r.sample.id for r in loaded.records] == [r.sample.id for r in outcome.records]
    assert loaded.results["results"] == outcome.results["results"]
    record = loaded.records[0]
    names = image_files(record)
    assert len(names) >= 2  # the original and at least one edit attempt
    for ref in names.values():
        path = loaded.image_path(ref)
        assert path is not None and path.is_file() and path.is_relative_to(tmp_path / "run")
    assert loaded.image_path("0" * 64) is None


def test_a_folder_that_is_no_run_is_refused_with_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(RunReadError, match=r"results.json \+ samples.jsonl"):
        load_run(tmp_path)
    (tmp_path / "results.json").write_text("{}")
    (tmp_path / "samples.jsonl").write_text('{"not": "a record"}\n')
    with pytest.raises(RunReadError, match=r"samples.jsonl, line 1: not a sample record"):
        load_run(tmp_path)


def test_results_json_is_written_last_so_a_stopped_write_leaves_no_finished_looking_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills while the images are placed stops the write before results.json: the
    folder does not look finished (on the old main results.json was written first)."""
    import edct_task.run.runner as runner

    config = calibration_config("faithful", n=2, output_dir=tmp_path / "run")
    config = config.model_copy(update={"progress": False, "bootstrap_resamples": 50})
    run(config)
    assert (tmp_path / "run" / "results.json").is_file()

    def full_disk(source: Path, target: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "place", full_disk)
    with pytest.raises(Exception, match=r"No space left|full"):
        run(config)  # the rerun replaces the folder's output: the old results.json goes first
    assert not (tmp_path / "run" / "results.json").exists()
    with pytest.raises(RunReadError, match=r"results\.json: missing"):
        load_run(tmp_path / "run")


@pytest.mark.parametrize("member", ["results.json", "samples.jsonl"])
@pytest.mark.parametrize("kind", ["link", "fifo", "folder", "huge"])
def test_load_run_reads_only_bounded_regular_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, member: str, kind: str
) -> None:
    import os

    from support.edct_runs import records, write_edct_run

    import edct_task.run.checks as checks

    folder = tmp_path / "run"
    write_edct_run(folder, records(1.0, n=2))
    path = folder / member
    if kind == "link":
        path.rename(tmp_path / "elsewhere")
        path.symlink_to(tmp_path / "elsewhere")
        expected = "is a link, not a regular file"
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)  # reading would block for ever
        expected = "is a FIFO, socket or device, not a regular file"
    elif kind == "folder":
        path.unlink()
        path.mkdir()
        expected = "is a folder, not a regular file"
    else:
        if member == "results.json":
            monkeypatch.setattr(checks.read_json_object, "__defaults__", (100,))
        else:
            monkeypatch.setattr(checks.read_lines, "__defaults__", (100, checks.MAX_LINE_BYTES))
        expected = "larger than 100 bytes"
    with pytest.raises(RunReadError) as exc:
        load_run(folder)
    message = str(exc.value)
    assert message.startswith(str(path)) and expected in message and "\n" not in message
