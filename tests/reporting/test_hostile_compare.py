"""``edct compare`` and every run reader on a stranger's folders: a JSONL file is read line by line
(a newline flood or a sparse multi-GB file costs bounded memory), scores out of range or not finite
and one id twice are refused in one line, and ``--resamples`` is bounded (issue 46, point 5)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from support.cli_errors import one_line_exit_2
from support.edct_runs import records, write_edct_run

from edct_task.core.errors import UserError
from edct_task.run.outputs import load_records, load_run

MiB = 1 << 20


def _run(folder: Path, level: float = 0.6, recs=None) -> Path:
    write_edct_run(folder, recs if recs is not None else records(level, n=6))
    return folder


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        try:
            out: object = fn()
        except UserError as exc:
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_newline_flood_costs_no_memory_per_line(tmp_path: Path) -> None:
    run = _run(tmp_path / "a")
    body = (run / "samples.jsonl").read_bytes()
    (run / "samples.jsonl").write_bytes(b"\n" * (24 * MiB) + body + b"\n \r\n\t\n" * MiB)
    loaded, peak = _peak(lambda: load_run(run))
    assert [r.sample.id for r in loaded.records] == [r.sample.id for r in records(0.6, n=6)]
    assert peak < 48 * MiB, peak  # the old reader held the text and a list entry per line: > 200 MiB


def test_a_sparse_file_without_newlines_is_refused_after_one_line_cap(tmp_path: Path) -> None:
    run = _run(tmp_path / "a")
    with (run / "samples.jsonl").open("r+b") as f:
        f.truncate(300 * MiB)  # a hole: 300 MiB of zero bytes on no disk
    err, peak = _peak(lambda: load_records(run / "samples.jsonl"))
    assert isinstance(err, UserError) and "longer than 67,108,864 bytes" in str(err)
    assert peak < 100 * MiB, peak  # the old reader read and decoded all of it


def test_compare_refuses_a_flooded_sparse_samples_file_in_one_line(tmp_path: Path, capsys) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", 0.3)
    with (b / "samples.jsonl").open("r+b") as f:
        f.truncate(200 * MiB)
    one_line_exit_2(capsys, ["compare", str(a), str(b)], "samples.jsonl", "longer than")


def test_one_id_twice_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    recs = records(0.6, n=6)
    a, b = _run(tmp_path / "a", recs=[*recs, recs[2]]), _run(tmp_path / "b", 0.3)
    for argv in (["compare", str(a), str(b), "--force"], ["compare", str(b), str(a), "--force"]):
        one_line_exit_2(capsys, argv, recs[2].sample.id, "twice")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1.5", "-0.25", "1e309"])
@pytest.mark.parametrize("metric", ["ccs_binary", "ccs_graded"])
def test_a_score_not_in_0_1_is_refused_in_one_line(tmp_path: Path, capsys, value: str, metric: str) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", 0.3)
    lines = (b / "samples.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if f'"{metric}":1.0' in line)
    lines[at] = lines[at].replace(f'"{metric}":1.0', f'"{metric}":{value}', 1)
    (b / "samples.jsonl").write_text("\n".join(lines) + "\n")
    one_line_exit_2(capsys, ["compare", str(a), str(b), "--force"], "samples.jsonl", f"line {at + 1}")


@pytest.mark.parametrize("count", ["1000000000", "99", "-5"])
def test_resamples_is_bounded_before_it_allocates(tmp_path: Path, capsys, count: str) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", 0.3)
    one_line_exit_2(capsys, ["compare", str(a), str(b), "--resamples", count], "--resamples")
