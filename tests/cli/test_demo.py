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


@pytest.mark.slow
def test_demo_tiny_vlm_tests_a_real_transformers_model_and_audits_its_replies(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``edct demo --model tiny-vlm``: the trained checkpoint through lmms-eval's ``qwen3_vl``; the
    table row, the report and the audit pages all come from the model's own replies."""
    from edct_task.run.outputs import load_run

    out = tmp_path / "demo"
    args = ["demo", "--model", "tiny-vlm", "--behavior", "faithful", "-n", "4", "--no-progress"]
    assert main([*args, "--output", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert max(len(line) for line in lines if not line.startswith(("wrote ", "audit ", "faithful c"))) <= 80
    rows = [line.split() for line in lines if line.split()[:1] == ["faithful"] and "[" in line]
    assert len(rows) == 2, text  # one row in each of the two tables
    run = load_run(out / "tiny-vlm-faithful")
    assert len(run.records) == 4
    report = json.loads((out / "report" / "report.json").read_text())
    (model,) = report["models"]
    assert model["name"] == "tiny-vlm faithful"
    statuses = ("scored", "excluded", "unscored", "error")
    counts = [str(sum(r.status == s for r in run.records)) for s in statuses]
    assert rows[0][-4:] == counts
    # the audit shows what the model said (HTML-escaped), for every sample
    pages = {p.name: p.read_text() for p in (out / "tiny-vlm-faithful" / "audit").rglob("*.html")}
    assert "index.html" in pages and len(pages) > 4
    import html

    body = "\n".join(pages.values())
    for record in run.records:
        answer = record.baseline.answer if record.baseline else None
        assert answer and html.escape(answer.strip()) in body, (record.sample.id, answer)
    assert "audit (the model's real replies): file://" in text


def test_demo_tiny_vlm_refuses_reference_behaviours(capsys: pytest.CaptureFixture) -> None:
    assert main(["demo", "--model", "tiny-vlm", "--behavior", "stale", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "faithful and prior" in err and "Traceback" not in err
