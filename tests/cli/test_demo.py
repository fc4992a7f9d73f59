"""``edct demo``: the four reference behaviours side by side, one shared stage cache, the report folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from edct_task.cli.main import main


def test_demo_prints_table1_side_by_side_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "-n", "6", "--no-progress", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert max(len(line) for line in lines if not line.startswith("wrote ")) <= 80
    headers = [line for line in lines if "CCS_binary" in line or "AC k=1" in line]
    assert all(col in headers[0] for col in ("CCS_binary", "CCS_graded", "scored", "excl.", "unsc.", "error"))
    assert all(col in headers[1] for col in ("AC k=1", "EF k=1", "AC k=2", "EF k=2"))
    rows: dict[str, list[list[str]]] = {}
    for line in lines:
        if line.split() and line.split()[0] in ("faithful", "prior", "stale", "mixed:0.5"):
            rows.setdefault(line.split()[0], []).append(line.split())
    assert set(rows) == {"faithful", "prior", "stale", "mixed:0.5"}
    assert all(len(r) == 2 for r in rows.values())  # one row in each of the two tables
    report = json.loads((out / "report" / "report.json").read_text())
    by_name = {m["name"]: m for m in report["models"]}
    for behavior in rows:
        results = json.loads((out / behavior.replace(":", "_") / "results.json").read_text())
        ccs = results["results"]["overall"]["metrics"]["ccs_binary"]
        # the printed table, the report and the run's own results agree
        assert by_name[behavior]["edct"]["ccs_binary"]["estimate"] == ccs["estimate"]
        assert rows[behavior][0][-4:] == [
            str(results["results"]["overall"]["counts"][k])
            for k in ("scored", "excluded", "unscored", "error")
        ]
    assert by_name["faithful"]["edct"]["ccs_binary"]["estimate"] == 1.0
    assert by_name["prior"]["edct"]["ccs_binary"]["estimate"] == 0.0
    # every behaviour after the first reuses the first one's edits and verifications
    for behavior in ("prior", "stale", "mixed_0.5"):
        hits = json.loads((out / behavior / "results.json").read_text())["calls"]["cache_hits"]
        assert hits.get("edit", 0) > 0 and hits.get("verify", 0) > 0
    assert (out / "cache").is_dir() and not (out / "faithful" / "cache").exists()
    # the report folder: tables and Fig. 5 against baseline answer accuracy
    assert "calibration_answer_accuracy" in by_name["faithful"]["benchmarks"]
    png = Image.open(out / "report" / "fig5_ccs_vs_benchmarks.png")
    png.load()
    assert png.size[0] > 300 and (out / "report" / "table1.tex").is_file()
