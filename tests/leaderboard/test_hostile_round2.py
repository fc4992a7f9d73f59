"""Issue 34's probe of the leaderboard, case by case: what a stranger's file can do, round two.

Every hostile input here must cost its own entry (one line, with its reason) and never the board:
a bundle name that is a link to ``/dev/zero`` or a FIFO, Hub eval-results files with a 5,000-digit
number, an impossible date or an alias bomb, someone else's bundle resealed under another model
name, spreadsheet formulas in names, a full disk under ``edct submit`` and ``edct leaderboard``,
and an archive of thousands of members (verified in work linear in its members).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import zipfile

import pytest
from support.bundles import ALPHA, submitted
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.leaderboard.board import build_board, to_csv
from edct_task.leaderboard.bundle import read_bundle, reseal, sha256_bytes, write_zip
from edct_task.leaderboard.verify import BoardScoring, Verified, verify_bundle

SCORING = BoardScoring(n_resamples=200)


@pytest.fixture
def honest(tmp_path):
    return submitted(tmp_path, "alpha", 0.6)


def _board(out):
    return json.loads((out / "leaderboard.json").read_text())


def test_a_link_to_dev_zero_and_a_fifo_cost_one_line_each(honest, tmp_path, capsys):
    """Before: the link read 11.4 GB in 22 s and was killed; the FIFO hung the board forever."""
    folder = honest.parent
    (folder / "zero.edct.zip").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.edct.zip")
    out = tmp_path / "board"
    assert main(["leaderboard", str(folder), "--out", str(out)]) == 0
    board = _board(out)
    assert [e["model"] for t in board["tracks"] for e in t["entries"]] == ["org/alpha-vl@abc123"]
    reasons = {os.path.basename(r["bundle"]): r["reason"] for r in board["rejected"]}
    assert "is a symbolic link, not a regular file; not read" in reasons["zero.edct.zip"]
    assert "is a FIFO, not a regular file; not read" in reasons["fifo.edct.zip"]
    assert "Traceback" not in capsys.readouterr().err


HOSTILE_EVAL_RESULTS = {
    "digits.yaml": "- dataset: {id: org/b, task_id: ccs_binary}\n  value: " + "9" * 5000 + "\n",
    "date.yaml": "- dataset: {id: org/b, task_id: ccs_binary}\n  value: 0.5\n  date: 2026-02-30\n",
    "huge.yaml": "- dataset: {id: org/b, task_id: ccs_binary}\n  value: " + "9" * 400 + "\n",
    "bytes.yaml": "- dataset: {id: org/b, task_id: \xff\xfe}\n  value: 0.5\n",
    "aliases.yaml": "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
}


def test_hostile_eval_results_files_are_refused_and_the_board_is_built(honest, tmp_path, capsys):
    """Before: a 5,000-digit value or 2026-02-30 raised a traceback and no board was written."""
    repo = tmp_path / "repo" / ".eval_results"
    repo.mkdir(parents=True)
    for name, text in HOSTILE_EVAL_RESULTS.items():
        (repo / name).write_bytes(text.encode("latin-1"))
    (repo / "good.yaml").write_text("- dataset: {id: org/b, task_id: ccs_binary}\n  value: 0.5\n")
    (repo / "fifo.yaml").unlink(missing_ok=True)
    os.mkfifo(repo / "fifo.yaml")
    out = tmp_path / "board"
    args = ["leaderboard", str(honest), "--out", str(out), "--eval-results", str(tmp_path / "repo")]
    assert main(args) == 0
    board = _board(out)
    assert [u["value"] for u in board["unverified"]] == [0.5]
    reasons = {os.path.basename(r["bundle"]): r["reason"] for r in board["rejected"]}
    assert set(reasons) == {*HOSTILE_EVAL_RESULTS, "fifo.yaml"}
    assert "Exceeds the limit (4300 digits)" in reasons["digits.yaml"]
    assert "day is out of range for month" in reasons["date.yaml"]
    assert "value is not a finite number" in reasons["huge.yaml"]
    assert "is not UTF-8" in reasons["bytes.yaml"]
    assert "once its aliases are expanded" in reasons["aliases.yaml"]
    assert "is a FIFO" in reasons["fifo.yaml"]
    assert all("\n" not in r for r in reasons.values())
    assert "Traceback" not in capsys.readouterr().err


def test_someone_elses_bundle_resealed_under_another_name_is_a_duplicate(honest, tmp_path):
    """Before: accepted and ranked beside the original with identical records."""
    b = read_bundle(honest)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    stolen = {"backend": "openai-chat", "model": "org/thief-vl"}
    results = json.loads(members["results.json"])
    results["config"]["roles"]["target"] = stolen
    members["results.json"] = json.dumps(results).encode()
    meta["model"] = {"key": "thief", "name": "Thief VL", "identity": stolen}
    meta["setup"]["target"] = stolen
    resealed = tmp_path / "thief.edct.zip"
    write_zip(resealed, reseal(meta, members), members)
    assert isinstance(verify_bundle(resealed), Verified)  # consistent on its own
    board = build_board([honest, resealed], scoring=SCORING)
    assert [e["model"] for t in board["tracks"] for e in t["entries"]] == ["org/alpha-vl@abc123"]
    (dup,) = board["duplicates"]
    assert dup["same_as"] == str(honest)
    assert dup["reason"] == "the same sample records, resealed as org/thief-vl"


def test_csv_cells_cannot_start_a_formula(tmp_path):
    """Before: ``=HYPERLINK(…)`` in a name was written unchanged into leaderboard.csv."""
    formula = '=HYPERLINK("http://127.0.0.1/x","click")'
    evil = submitted(tmp_path, "evil", 0.5, target={"backend": "openai-chat", "model": formula})
    b = read_bundle(evil)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    meta["model"]["name"] = "@SUM(1+1)"
    write_zip(evil, reseal(meta, members), members)
    rows = list(csv.DictReader(io.StringIO(to_csv(build_board([evil], scoring=SCORING)))))
    (row,) = rows
    assert row["model"] == "'" + formula
    assert row["label"] == "'@SUM(1+1)"
    for cell in row.values():  # numbers stay numbers; no text cell opens a formula
        assert not cell.startswith(("=", "+", "@", "\t", "\r"))


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_submit_on_a_full_disk_gives_one_line_and_leaves_no_tmp(tmp_path, monkeypatch, capsys):
    """Before: a traceback, and ``x.edct.zip.tmp`` left beside the bundle."""
    write_edct_run(tmp_path / "run", records(0.5, n=4), target=ALPHA, resamples=200)
    monkeypatch.setattr(zipfile.ZipFile, "writestr", _enospc)
    out = tmp_path / "out" / "x.edct.zip"
    assert main(["submit", str(tmp_path / "run"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list((tmp_path / "out").iterdir()) == []


def test_leaderboard_on_a_full_disk_gives_one_line(honest, tmp_path, monkeypatch, capsys):
    import edct_task.leaderboard.board as board_module

    monkeypatch.setattr(board_module, "atomic_write", _enospc)
    assert main(["leaderboard", str(honest), "--out", str(tmp_path / "board")]) == 2
    err = capsys.readouterr().err
    assert "the board could not be written (No space left on device)" in err and "Traceback" not in err


def _with_members(honest, dst, count):
    """``honest`` with ``count`` tiny extra image members, each listed and hashed in bundle.json."""
    b = read_bundle(honest)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    for i in range(count):
        members[f"images/{sha256_bytes(str(i).encode())}.png"] = b"x"
    write_zip(dst, reseal(meta, members), members)
    return dst


def test_verification_opens_the_archive_once_whatever_its_member_count(honest, tmp_path, monkeypatch):
    """Before: every listed member reopened the archive and re-read its whole central directory
    (quadratic: 426 CPU-s for 8,000 tiny members). The count of archive opens is the invariant;
    benchmarks/bench_hostile_inputs.py measures the time."""
    many = _with_members(honest, tmp_path / "many.edct.zip", 300)
    opened = []
    real = zipfile.ZipFile.__init__

    def counting(self, *args, **kwargs):
        opened.append(args[0] if args else kwargs.get("file"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", counting)
    result = verify_bundle(many, scoring=SCORING)
    assert len(opened) == 1  # every member hashed through the one open archive
    assert result.code == "tampered"  # images nobody references: padding, refused after hashing
    assert "300 packed image(s) are not referenced by the records" in result.reason
