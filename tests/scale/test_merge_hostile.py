"""``edct merge`` on a stranger's shard folders (issue 46, point 5): shards checked against their
own steps and images, a manifest's slice count bounded, and a merge that dies leaves a folder that
reads as unfinished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SHARDS

import edct_task.scale.merge as merge_module
from edct_task.cli.main import main
from edct_task.run.outputs import RunReadError, image_files, load_run
from edct_task.scale.merge import merge_shards, write_merged


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("cache"))
    return dst


def _refused(paths: list[Path], out: Path, capsys) -> str:
    assert main(["merge", *map(str, paths), "--output", str(out / "merged")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (out / "merged" / "results.json").exists()
    return err


def _rewrite(samples: Path, change) -> None:
    lines = samples.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if change(rec):
            lines[i] = json.dumps(rec)
            break
    else:
        pytest.fail("no record to change")
    samples.write_text("\n".join(lines) + "\n")


def test_a_shard_whose_scores_were_altered_is_refused(runs, tmp_path: Path, capsys) -> None:
    p = _copy(runs["s1"], tmp_path / "s1")

    def raise_score(rec: dict) -> bool:
        if rec["status"] == "scored" and rec["scores"]["ccs_binary"] < 1:
            rec["scores"]["ccs_binary"] = 1.0
            return True
        return False

    _rewrite(p / "samples.jsonl", raise_score)
    err = _refused([runs["s0"], p, runs["s2"]], tmp_path, capsys)
    assert f"damaged shard {p}: the scores of item" in err and "do not follow from its steps" in err


def test_a_shard_whose_images_were_swapped_is_refused(runs, tmp_path: Path, capsys) -> None:
    p = _copy(runs["s1"], tmp_path / "s1")
    records = load_run(p).records
    a, b = (next(iter(image_files(r))) for r in records[:2])  # two samples' originals
    (p / a).rename(tmp_path / "tmp.png")
    (p / b).rename(p / a)
    (tmp_path / "tmp.png").rename(p / b)
    err = _refused([runs["s0"], p, runs["s2"]], tmp_path, capsys)
    assert "is not the image its record names" in err


def test_a_manifest_with_a_huge_slice_count_is_refused_before_listing_slices(
    runs, tmp_path: Path, capsys
) -> None:
    p = _copy(runs["s1"], tmp_path / "s1")
    results = json.loads((p / "results.json").read_text())
    results["config"]["data"]["shard"]["count"] = 100_000_000
    (p / "results.json").write_text(json.dumps(results))
    err = _refused([p], tmp_path, capsys)  # read as a typed manifest: refused at its field
    assert str(p) in err and "config.data.shard.count" in err


def test_a_merge_that_dies_leaves_no_results_file(runs, tmp_path: Path, monkeypatch) -> None:
    merged = merge_shards([runs[f"s{i}"] for i in range(SHARDS)])
    out = tmp_path / "merged"
    calls = []

    def full_disk(source: Path, target: Path) -> None:
        calls.append(target)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(merge_module, "place", full_disk)
    with pytest.raises(OSError):
        write_merged(merged, out)
    assert calls and not (out / "results.json").exists()
    with pytest.raises(RunReadError, match="unfinished"):
        load_run(out)


def test_a_partial_merge_keeps_its_label_and_is_never_ranked(runs, tmp_path: Path, capsys) -> None:
    from edct_task.leaderboard.board import build_board
    from edct_task.leaderboard.verify import BoardScoring

    partial, whole = tmp_path / "partial", tmp_path / "whole"
    assert main(["merge", str(runs["s0"]), str(runs["s2"]), "--output", str(partial), "--allow-missing"]) == 0
    assert main(["merge", *(str(runs[f"s{i}"]) for i in range(SHARDS)), "--output", str(whole)]) == 0
    bundles = []
    for run in (partial, whole):
        bundle = tmp_path / f"{run.name}.edct.zip"
        assert main(["submit", str(run), "--output", str(bundle)]) == 0
        bundles.append(bundle)
    capsys.readouterr()
    board = build_board(bundles, scoring=BoardScoring(n_resamples=200))
    ranked = [e["bundle"] for t in board["tracks"] for e in t["entries"]]
    assert ranked == [str(bundles[1])]
    (rejected,) = board["rejected"]
    assert rejected["code"] == "partial" and "slices 1/3 missing" in rejected["reason"]


def test_a_partial_merge_keeps_its_label_in_report_and_audit(runs, tmp_path: Path, capsys) -> None:
    """`edct report` and `edct audit` of an `--allow-missing` merge say PARTIAL and name the missing
    slice (report.md's notice and report.json; the audit's title, banner, audit.json
    and its printed lines); a complete merge says nothing of it."""
    partial, whole = tmp_path / "partial", tmp_path / "whole"
    assert main(["merge", str(runs["s0"]), str(runs["s2"]), "--output", str(partial), "--allow-missing"]) == 0
    assert main(["merge", *(str(runs[f"s{i}"]) for i in range(SHARDS)), "--output", str(whole)]) == 0
    capsys.readouterr()
    for run, is_partial in ((partial, True), (whole, False)):
        rep = tmp_path / f"report-{run.name}"
        assert main(["report", str(run), "--output", str(rep)]) == 0
        md = (rep / "report.md").read_text()
        report = json.loads((rep / "report.json").read_text())
        audit = tmp_path / f"audit-{run.name}"
        assert main(["audit", str(run), "--output", str(audit)]) == 0
        out = capsys.readouterr().out
        index = (audit / "index.html").read_text()
        manifest = json.loads((audit / "audit.json").read_text())
        if is_partial:
            assert "**PARTIAL RUN**" in md and "slices 1/3 missing" in md
            (entry,) = report["partial"]
            assert "slices 1/3 missing" in entry["label"]
            assert "<title>EDCT audit report (PARTIAL RUN)" in index and "<h2>PARTIAL RUN</h2>" in index
            assert manifest["partial"].startswith("PARTIAL: merged with slices 1/3 missing")
            assert "PARTIAL: merged with slices 1/3 missing" in out
        else:
            assert "PARTIAL" not in md and report["partial"] == []
            assert "PARTIAL" not in index and manifest["partial"] is None and "PARTIAL" not in out
