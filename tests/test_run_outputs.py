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
