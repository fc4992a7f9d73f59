"""The audit report's files: self-contained, escaped, every image present; ``edct audit`` errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image
from support.audit_runs import HOSTILE_ID

from edct_task.audit.embed import json_for_script, script_json_element
from edct_task.audit.images import THUMB_SIDE
from edct_task.audit.report import write_audit
from edct_task.cli.main import main
from edct_task.run.outputs import LoadedRun, load_run

_FORBIDDEN = ("<", ">", "&", "\u2028", "\u2029")


def _page_data(path: Path) -> dict:
    html = path.read_text(encoding="utf-8")
    (payload,) = re.findall(r'<script type="application/json" id="edct-data">(.*?)</script>', html, re.S)
    return json.loads(payload)


@pytest.mark.parametrize(
    "value",
    [
        "</script><script>alert(1)</script>",
        "<!-- <script>",
        "a & b &amp; c",
        "line\u2028sep\u2029para",
        {"k</script>": ["<img src=x onerror=alert(1)>", "\"'"]},
    ],
)
def test_json_for_script_escapes_what_could_end_or_change_the_element(value):
    text = json_for_script(value)
    assert not any(c in text for c in _FORBIDDEN)
    assert json.loads(text) == value
    element = script_json_element("d", value)
    assert element.count("</script>") == 1 and element.endswith("</script>")


@given(
    st.recursive(st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=8)
)
def test_json_for_script_round_trips_any_text(value):
    text = json_for_script(value)
    assert not any(c in text for c in _FORBIDDEN)
    assert json.loads(text) == value


def test_the_report_is_self_contained_with_every_image_and_thumbnail(report_dir: Path, loaded: LoadedRun):
    index = _page_data(report_dir / "index.html")
    assert [row["id"] for row in index["rows"]] == [r.sample.id for r in loaded.records]
    pages = sorted((report_dir / "samples").glob("*.html"))
    assert len(pages) == len(loaded.records)
    for f in [report_dir / "index.html", *pages, *(report_dir / "assets").iterdir()]:
        text = f.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), f  # nothing from a network
        assert "@import" not in text and "fetch(" not in text
    manifest = json.loads((report_dir / "audit.json").read_text())
    assert manifest["samples"] == 12 and manifest["missing_images"] == []
    assert manifest["by_status"] == {
        s: sum(r.status == s for r in loaded.records) for s in {r.status for r in loaded.records}
    }

    n_figures = 0
    for position, record in enumerate(loaded.records):
        data = _page_data(report_dir / "samples" / f"{position + 1:04d}.html")
        sample = data["sample"]
        assert sample["id"] == record.sample.id and sample["status"] == record.status
        pictures = [sample["original"]]
        for step, view in zip(record.steps, sample["steps"], strict=True):
            assert len(view["attempts"]) == len(step.attempts)
            for attempt, a_view in zip(step.attempts, view["attempts"], strict=True):
                pictures.append(a_view["image"])
                if attempt.check is not None:
                    assert a_view["check"]["r_in"] == attempt.check.r_in
                    assert a_view["check"]["r_out"] == attempt.check.r_out
                    assert a_view["check"]["mask_fraction"] == attempt.check.mask_fraction
                    pictures += [a_view["figures"]["heatmap"], a_view["figures"]["overlay"]]
                    n_figures += 1
        for pic in pictures:
            with Image.open(report_dir / pic["full"]) as full:
                assert full.size == (pic["width"], pic["height"])
            with Image.open(report_dir / pic["thumb"]) as thumb:
                assert max(thumb.size) <= THUMB_SIDE
    assert n_figures > 24  # every checked attempt (retries included) has its heatmap and overlay


def test_the_hostile_run_stays_data_in_the_html_files(hostile_report):
    report, run = hostile_report
    for f in [report / "index.html", report / "samples" / "0001.html"]:
        html = f.read_text(encoding="utf-8")
        assert "<script>window" not in html and "<img" not in html and "<b " not in html
        assert "\u2028" not in html and "\u2029" not in html
        assert html.count("<script") == 2 and html.count("</script>") == 2
    data = _page_data(report / "samples" / "0001.html")
    assert data["sample"]["id"] == HOSTILE_ID
    assert data["sample"]["baseline"]["answer"] == run.records[0].baseline.answer


def test_a_run_that_kept_no_gate_maps_is_reported_without_figures(run_dir: Path, tmp_path: Path):
    copy = tmp_path / "old-run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("cache", "*_maps.png"))
    lines = (copy / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    old = []
    for line in lines:
        record = json.loads(line)
        for step in record["steps"]:
            for attempt in step["attempts"]:
                if attempt.get("check"):
                    attempt["check"].pop("maps", None)
                    attempt["check"]["schema_version"] = 1
        old.append(json.dumps(record))
    (copy / "samples.jsonl").write_text("\n".join(old) + "\n", encoding="utf-8")
    summary = write_audit(load_run(copy), tmp_path / "report")
    assert summary.missing_images == 0
    step = _page_data(tmp_path / "report" / "samples" / "0001.html")["sample"]["steps"][0]
    assert step["attempts"][0]["figures"] is None and step["attempts"][0]["check"]["maps_stored"] is False


def test_edct_audit_writes_the_report_and_prints_where(run_dir: Path, tmp_path: Path, capsys):
    assert main(["audit", str(run_dir), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "r" / "index.html").as_uri() in out and "12 samples" in out


def test_edct_audit_user_errors_exit_2_with_one_message(tmp_path: Path, run_dir: Path, capsys):
    assert main(["audit", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is not a run folder" in err and "Traceback" not in err
    (tmp_path / "file").write_text("x")
    assert main(["audit", str(run_dir), "--out", str(tmp_path / "file")]) == 2
    assert "is not a folder" in capsys.readouterr().err
