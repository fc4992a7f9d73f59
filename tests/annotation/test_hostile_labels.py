"""Issue 34: label files with bad bytes, huge numbers, deep nesting, or that are not files."""

from __future__ import annotations

import os

import pytest

from edct_task.annotation.labels import LabelFileError, LabelLog, read_label_files


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"intervention": ' + "9" * 5000 + "}", "not a label line"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"intervention": "\\ud800"}', "not a label line"),
    ],
)
def test_a_hostile_label_line_is_one_line_naming_file_and_line(tmp_path, line, reason):
    """Before: a traceback (ValueError, RecursionError)."""
    path = tmp_path / "alice.jsonl"
    path.write_text("\n" + line + "\n")
    with pytest.raises(LabelFileError, match=reason) as exc:
        read_label_files([path])
    assert str(exc.value).startswith(f"{path}:2: ") and "\n" not in str(exc.value)


def test_a_fifo_or_a_link_to_dev_zero_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    with pytest.raises(LabelFileError, match="is a FIFO, not a regular file"):
        read_label_files([tmp_path / "fifo.jsonl"])
    with pytest.raises(LabelFileError, match="is a symbolic link, not a regular file"):
        LabelLog(tmp_path / "zero.jsonl", "alice")
