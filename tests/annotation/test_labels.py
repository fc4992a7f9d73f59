"""Label records and the append-only label file: validation, fsync per label, last line wins."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from edct_task.annotation.interventions import parse_intervention_id
from edct_task.annotation.labels import LabelChoice, LabelFileError, LabelLog, read_label_files


@pytest.mark.parametrize(
    "body, message",
    [
        (
            {"intervention": "s#1", "edit_valid": "invalid", "ac": 1},
            "only be given when edit_valid is 'valid'",
        ),
        (
            {"intervention": "s#1", "edit_valid": "not_assessable", "ef": 0},
            "only be given when edit_valid is 'valid'",
        ),
        ({"intervention": "s#1", "edit_valid": "valid", "ac": 2}, "must be 0, 1 or null"),
        ({"intervention": "s#1", "edit_valid": "valid", "ac": True}, "valid integer"),
        ({"intervention": "s#1", "edit_valid": "valid", "ef": "1"}, "valid integer"),
        ({"intervention": "s#1", "edit_valid": "yes"}, "'valid', 'invalid' or 'not_assessable'"),
        ({"intervention": "s#1"}, "edit_valid"),
        ({"intervention": "s#1", "edit_valid": "valid", "verdict": 1}, "Extra inputs are not permitted"),
    ],
)
def test_malformed_labels_are_refused_with_what_is_wrong(body, message):
    with pytest.raises(ValidationError, match=message):
        LabelChoice.model_validate(body)


def test_complete_and_ccs_follow_the_rules():
    assert LabelChoice(intervention="s#1", edit_valid="invalid").complete
    assert LabelChoice(intervention="s#1", edit_valid="invalid").ccs is None
    partial = LabelChoice(intervention="s#1", edit_valid="valid", ac=1)
    assert not partial.complete and partial.ccs is None
    assert LabelChoice(intervention="s#1", edit_valid="valid", ac=1, ef=0).ccs == 0
    assert LabelChoice(intervention="s#1", edit_valid="valid", ac=1, ef=1).ccs == 1


def test_the_log_appends_one_fsynced_line_per_label_and_the_last_wins(tmp_path: Path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "labels" / "alice.jsonl"
    log = LabelLog(path, "alice")
    when = datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)
    log.append(LabelChoice(intervention="a#1", edit_valid="valid", ac=1), now=when)
    log.append(LabelChoice(intervention="a#1", edit_valid="valid", ac=1, ef=0), now=when)
    log.append(LabelChoice(intervention="b#2", edit_valid="not_assessable"), now=when)
    assert len(synced) == 3
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert json.loads(lines[1]) == {
        "intervention": "a#1",
        "annotator": "alice",
        "edit_valid": "valid",
        "ac": 1,
        "ef": 0,
        "time": "2026-12-01T09:30:00+00:00",
    }
    assert list(json.loads(lines[0])) == ["intervention", "annotator", "edit_valid", "ac", "ef", "time"]
    reopened = LabelLog(path, "alice").latest
    assert {k: (v.edit_valid, v.ac, v.ef) for k, v in reopened.items()} == {
        "a#1": ("valid", 1, 0),
        "b#2": ("not_assessable", None, None),
    }
    with pytest.raises(LabelFileError, match="holds labels of annotator 'alice', not 'bob'"):
        LabelLog(path, "bob")


def test_label_files_with_a_bad_line_name_the_file_and_line(tmp_path: Path):
    path = tmp_path / "x.jsonl"
    good = json.dumps(
        {
            "intervention": "a#1",
            "annotator": "x",
            "edit_valid": "invalid",
            "ac": None,
            "ef": None,
            "time": "2026-12-01T09:00:00Z",
        }
    )
    path.write_text(good + "\n" + "{not json\n", encoding="utf-8")
    with pytest.raises(LabelFileError, match=r"x.jsonl:2: not a JSON line"):
        read_label_files([path])
    path.write_text(good + "\n" + good.replace('"invalid", "ac": null', '"invalid", "ac": 1') + "\n")
    with pytest.raises(LabelFileError, match=r"x.jsonl:2: not a label .*only be given when edit_valid"):
        read_label_files([path])
    with pytest.raises(LabelFileError, match="no such label file"):
        read_label_files([tmp_path / "missing.jsonl"])
    # a model's text never reaches a label file, but U+2028 inside a line must not split it
    path.write_text(good.replace('"a#1"', '"a\u2028b#1"') + "\n", encoding="utf-8")
    assert list(read_label_files([path])["x"]) == ["a\u2028b#1"]


@pytest.mark.parametrize("name", ["", "a b", "../x", "-x", "x" * 65, "ä"])
def test_annotator_names_that_cannot_be_file_names_are_refused(tmp_path: Path, name: str):
    with pytest.raises(ValueError, match="annotator name"):
        LabelLog(tmp_path / "f.jsonl", name)


def test_intervention_ids_split_at_the_last_hash():
    assert parse_intervention_id("cal-#x#2") == ("cal-#x", 2)
    for bad in ["abc", "abc#0", "abc#", "#1", "a#b"]:
        with pytest.raises(ValueError, match="not an intervention id"):
            parse_intervention_id(bad)
