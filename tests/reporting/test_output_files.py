"""Issue 19, rows 9 and 24: every output file is written atomically, with the user's umask.

Row 9: a report or leaderboard killed while writing leaves the previous report.json /
leaderboard.json intact (never a truncated one). Row 24: with ``umask 022`` output files are
``0644`` (not ``mkstemp``'s ``0600``) and folders ``0755``."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest
from support.edct_runs import records, write_edct_run

from edct_task.audit.report import write_audit
from edct_task.config import calibration_config
from edct_task.leaderboard.board import build_board, write_board
from edct_task.leaderboard.bundle import create_bundle
from edct_task.reporting.report import build_report
from edct_task.run.outputs import load_run
from edct_task.run.runner import run


class _Killed(BaseException):
    """Stands for the SIGTERM that arrives in the middle of a write."""


def _dying_writes(monkeypatch, name: str) -> None:
    """Every file opened for writing whose path (or, for a temporary file, whose name) contains
    ``name`` takes half of its first write and then the process 'dies'."""
    real_open = io.open

    def target(file: object) -> str:
        if isinstance(file, int):
            return os.readlink(f"/proc/self/fd/{file}")
        return os.fspath(file)

    def dying_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if any(c in mode for c in "wax") and name in Path(target(file)).name:
            write = f.write

            def half(data):
                write(data[: len(data) // 2])
                f.flush()
                raise _Killed

            f.write = half
        return f

    monkeypatch.setattr(io, "open", dying_open)


def test_a_report_killed_while_writing_keeps_the_previous_report_json(tmp_path: Path, monkeypatch) -> None:
    write_edct_run(tmp_path / "run", records(0.5, n=6))
    out = tmp_path / "report"
    build_report([tmp_path / "run"], out)
    before = (out / "report.json").read_text()
    json.loads(before)
    _dying_writes(monkeypatch, "report.json")
    with pytest.raises(_Killed):
        build_report([tmp_path / "run"], out)
    monkeypatch.undo()
    assert (out / "report.json").read_text() == before
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_leaderboard_killed_while_writing_keeps_the_previous_json(tmp_path: Path, monkeypatch) -> None:
    write_edct_run(tmp_path / "run", records(0.5, n=6))
    create_bundle(tmp_path / "run", tmp_path / "a.edct.zip")
    board = build_board([tmp_path / "a.edct.zip"])
    out = tmp_path / "board"
    write_board(board, out)
    before = (out / "leaderboard.json").read_text()
    _dying_writes(monkeypatch, "leaderboard.json")
    with pytest.raises(_Killed):
        write_board(board, out)
    monkeypatch.undo()
    assert (out / "leaderboard.json").read_text() == before


def test_json_output_never_holds_nan_or_infinity(tmp_path: Path) -> None:
    from edct_task.engine.files import atomic_write, json_text

    text = json_text({"a": float("nan"), "b": [float("inf"), 1.5], "c": (float("-inf"),)})
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": [None]}
    atomic_write(tmp_path / "x.json", text)
    assert "NaN" not in (tmp_path / "x.json").read_text()


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}


def test_output_files_follow_the_users_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        raw = calibration_config("faithful", n=2, output_dir=tmp_path / "run").model_dump(mode="json")
        raw.update(progress=False, bootstrap_resamples=200)
        from edct_task.config import config_from_dict

        run(config_from_dict(raw))
        write_audit(load_run(tmp_path / "run"), tmp_path / "audit", source="run")
        build_report([tmp_path / "run"], tmp_path / "report")
    finally:
        os.umask(old)
    modes = {**_modes(tmp_path / "run"), **{f"audit/{k}": v for k, v in _modes(tmp_path / "audit").items()}}
    modes.update({f"report/{k}": v for k, v in _modes(tmp_path / "report").items()})
    files = {
        k: v
        for k, v in modes.items()
        if (tmp_path / k if k.startswith(("audit", "report")) else tmp_path / "run" / k).is_file()
    }
    for must in ("results.json", "samples.jsonl", "audit/index.html", "report/report.json"):
        assert must in files, must
    assert any(k.startswith("images/") and k.endswith(".png") for k in files)
    wrong = {
        k: oct(v) for k, v in files.items() if v != 0o644 and not k.endswith((".lock", "stages.sqlite-shm"))
    }
    assert not wrong
