"""The report's "differences" table beside Table 1: pairs of runs of one setup, compared item by item."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main


def _target(behavior: str) -> dict:
    return {"backend": "calibration-reference", "behavior": behavior}


def test_report_writes_paired_differences_of_runs_of_one_setup(tmp_path: Path) -> None:
    # records(level, n=10): 0.9 passes items 1..8 of each domain, 0.6 items 1..5, 0.5 items 1..4
    write_edct_run(tmp_path / "a", records(0.9, n=10), target=_target("faithful"))
    write_edct_run(tmp_path / "b", records(0.6, n=10), target=_target("mixed:0.6"))
    write_edct_run(tmp_path / "c", records(0.5, n=10), target=_target("mixed:0.5"), judge="openai-chat")
    out = tmp_path / "r"
    assert (
        main(["report", str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c"), "--out", str(out)])
        == 0
    )
    report = json.loads((out / "report.json").read_text())
    (row,) = report["differences"]  # c is another setup (judge): never paired with a or b
    assert (row["a"], row["b"]) == (
        "calibration-reference(behavior=faithful)",
        "calibration-reference(behavior=mixed:0.6)",
    )
    b = row["ccs_binary"]
    assert b["n_paired"] == 27 and b["difference"] == pytest.approx(9 * 0.5 / 27)
    assert b["p"] == pytest.approx(2 / 2**9) and b["p_holm"] == b["p"] and b["test"] == "exact"
    assert b["dropped"] == {"a": {"excluded": 3}, "b": {"excluded": 3}}
    md = (out / "report.md").read_text()
    assert md.index("### Table 1") < md.index("### Differences") < md.index("### Table 3")
    assert "+0.167 [" in md and "| 27 |" in md
    rows = list(csv.DictReader((out / "differences.csv").open()))
    assert float(rows[0]["ccs_binary_difference"]) == pytest.approx(1 / 6)
    assert "differences" in report["tables"]


def test_no_differences_table_with_one_run(tmp_path: Path) -> None:
    write_edct_run(tmp_path / "a", records(0.9, n=10))
    assert main(["report", str(tmp_path / "a"), "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["differences"] == [] and "differences" not in report["tables"]
    assert not (tmp_path / "r" / "differences.md").exists()
