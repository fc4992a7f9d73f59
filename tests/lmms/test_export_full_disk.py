"""An export onto a full disk fails (issue 46, point 5): lmms-eval's ``EvaluationTracker`` logs a
failed write and goes on, leaving an empty results file; ``lmms.export.written_whole`` reads the
files back, removes them and raises, so the export's process exits non-zero with one line."""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import pytest

from edct_task.lmms.export import ExportWriteError, written_whole


class _FullDisk(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def _tracker(tmp_path: Path):
    from lmms_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(tmp_path / "lmms"))
    tracker.general_config_tracker.log_experiment_args(
        model_source="edct",
        model_args="",
        system_instruction=None,
        chat_template=None,
        fewshot_as_multiturn=False,
    )
    return tracker


def test_a_results_file_left_empty_by_a_full_disk_fails_the_export(tmp_path: Path, monkeypatch) -> None:
    tracker = _tracker(tmp_path)
    real_open = Path.open

    def full_disk_open(self, mode="r", *args, **kwargs):
        if "w" in mode and self.name.endswith("_results.json"):
            real_open(self, mode, *args, **kwargs).close()  # the file is created, then the disk is full
            return _FullDisk()
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full_disk_open)
    tracker.save_results_aggregated(results={"results": {}}, samples=None, datetime_str="2026-01-01T00:00:00")
    monkeypatch.setattr(Path, "open", real_open)
    (left,) = (tmp_path / "lmms").rglob("*_results.json")
    assert left.read_text() == ""  # what lmms-eval leaves, logging the error and going on
    with pytest.raises(ExportWriteError) as failed:
        written_whole(tracker, {})
    assert "could not be written whole" in str(failed.value) and "\n" not in str(failed.value)
    assert not left.exists()  # no empty file that reads as this run's export


def test_a_cut_sample_log_fails_the_export(tmp_path: Path) -> None:
    tracker = _tracker(tmp_path)
    tracker.save_results_aggregated(results={"results": {}}, samples=None, datetime_str="2026-01-01T00:00:00")
    (results,) = (tmp_path / "lmms").rglob("*_results.json")
    log = results.with_name(results.name.replace("_results.json", "_samples_edct_calibration.jsonl"))
    log.write_text(json.dumps({"doc_id": 0}) + "\n")
    written_whole(tracker, {"edct_calibration": 1})  # whole: nothing raised, nothing removed
    assert results.exists() and log.exists()
    with pytest.raises(ExportWriteError, match="holds 1 of 2 lines"):
        written_whole(tracker, {"edct_calibration": 2})
    assert not results.exists() and not log.exists()
