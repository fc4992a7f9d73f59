"""Known-answer controls on the board (issue 44): an unreliable run is verified but listed apart,
never ranked, in every format; its bundle carries controls.jsonl, and a results' controls block
that its records do not support is refused like any other forgery."""

from __future__ import annotations

import csv
import io
import json

import pytest
from support.edct_runs import control_records, records, write_edct_run

from edct_task.cli.main import main
from edct_task.leaderboard.board import build_board, to_csv, to_markdown
from edct_task.leaderboard.bundle import read_bundle, reseal, write_zip
from edct_task.leaderboard.html import render_html
from edct_task.leaderboard.verify import BoardScoring, Rejected, verify_bundle
from edct_task.scoring.controls import summarise_controls

SCORING = BoardScoring(n_resamples=200)


def _bundle(tmp_path, name, level, model, controls):
    target = {"backend": "openai-chat", "model": model}
    write_edct_run(tmp_path / "runs" / name, records(level, n=12), target=target, controls=controls)
    out = tmp_path / "bundles" / f"{name}.edct.zip"
    assert main(["submit", str(tmp_path / "runs" / name), "--out", str(out)]) == 0
    return out


@pytest.fixture
def board_bundles(tmp_path):
    return {
        "good": _bundle(tmp_path, "good", 0.6, "org/good-vl", control_records(16)),
        "also": _bundle(tmp_path, "also", 0.5, "org/also-vl", control_records(15)),
        # the best score, from a judge that gets 4 of 16 controls right
        "bad": _bundle(tmp_path, "bad", 0.95, "org/bad-vl", control_records(4)),
    }


def test_bundle_carries_controls_and_the_verdict_is_rederived(board_bundles):
    with read_bundle(board_bundles["bad"]) as b:
        assert "controls.jsonl" in b.members and "controls.jsonl" in b.meta["files"]
    bad = verify_bundle(board_bundles["bad"], scoring=SCORING)
    assert not isinstance(bad, Rejected)
    assert bad.unreliable and "binary judge: 4/16" in bad.unreliable[0]
    good = verify_bundle(board_bundles["good"], scoring=SCORING)
    assert not isinstance(good, Rejected) and good.unreliable == [] and good.controls["calls"] == 4 * 16


def test_unreliable_entry_is_listed_apart_and_never_ranked_in_every_format(board_bundles, tmp_path, capsys):
    out = tmp_path / "board"
    assert main(["leaderboard", str(tmp_path / "bundles"), "--out", str(out), "--resamples", "200"]) == 0
    assert "unreliable, not ranked  org/bad-vl" in capsys.readouterr().out
    board = json.loads((out / "leaderboard.json").read_text())
    ranked = [e["model"] for t in board["tracks"] for e in t["entries"]]
    assert ranked == ["org/good-vl", "org/also-vl"]
    assert all(e["controls"] == "passed" for t in board["tracks"] for e in t["entries"])
    assert all("org/bad-vl" not in (p["a"], p["b"]) for t in board["tracks"] for p in t["pairwise"])
    (u,) = board["unreliable"]
    assert u["model"] == "org/bad-vl" and u["rank"] is None and u["controls"] == "below the bar"
    assert "binary judge: 4/16" in u["reasons"][0]
    md = (out / "leaderboard.md").read_text()
    section = md.split("## Unreliable runs (not ranked)")[1]
    assert "org/bad-vl" in section and "binary judge: 4/16" in section
    assert "org/bad-vl" not in md.split("## Unreliable runs (not ranked)")[0]
    html = (out / "leaderboard.html").read_text()
    assert "Unreliable runs (not ranked)" in html and "binary judge: 4/16" in html.split("Unreliable runs")[1]
    rows = list(csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text())))
    bad = [r for r in rows if r["model"] == "org/bad-vl"]
    assert len(bad) == 1 and bad[0]["rank"] == "" and "binary judge: 4/16" in bad[0]["unranked"]
    assert bad[0]["controls"] == "below the bar"


def test_a_run_made_before_controls_is_ranked_as_controls_not_run(tmp_path):
    target = {"backend": "openai-chat", "model": "org/old-vl"}
    write_edct_run(tmp_path / "runs" / "old", records(0.6, n=12), target=target)
    out = tmp_path / "old.edct.zip"
    assert main(["submit", str(tmp_path / "runs" / "old"), "--out", str(out)]) == 0
    board = build_board([out], scoring=SCORING)
    assert board["unreliable"] == [] and board["rejected"] == []
    (entry,) = board["tracks"][0]["entries"]
    assert entry["rank"] == 1 and entry["controls"] == "not run"
    assert "| not run |" in to_markdown(board) and "not run" in render_html(board)
    (row,) = csv.DictReader(io.StringIO(to_csv(board)))
    assert row["controls"] == "not run"


def _forge(src, dst, edit):
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    edit(members)
    write_zip(dst, reseal(meta, members), members)
    return dst


def _results(members, change):
    results = json.loads(members["results.json"])
    change(results)
    members["results.json"] = json.dumps(results).encode()


def test_forged_controls_are_rejected(board_bundles, tmp_path):
    bad = board_bundles["bad"]

    def hide(members):  # claim reliability the records do not support
        _results(members, lambda r: r["controls"].update(unreliable=[]))

    def strip_block(members):  # drop the block and the records: pose as a run without controls
        del members["controls.jsonl"]
        _results(members, lambda r: r.pop("controls"))

    def flip_records(members):  # count wrong replies right, and re-summarise to match
        from edct_task.run.checks import parse_controls

        recs = [
            c.model_copy(update={"correct": True})
            for c in parse_controls("x", enumerate(members["controls.jsonl"].decode().splitlines(), 1))
        ]
        members["controls.jsonl"] = "".join(c.model_dump_json() + "\n" for c in recs).encode()
        _results(members, lambda r: r.update(controls=summarise_controls(recs, bar=0.8, requested=16)))

    def lower_bar(members):  # a bar the setup does not say
        _results(members, lambda r: r.update(controls=summarise_controls([], bar=0.0, requested=16)))

    def drop_member(members):
        del members["controls.jsonl"]

    for name, edit, words in (
        ("hide", hide, "hides a role below the bar"),
        ("strip", strip_block, "no controls block"),
        ("flip", flip_records, "counted right, but its recorded reply does not give the answer"),
        ("bar", lower_bar, "is not what controls.jsonl gives"),
        ("drop", drop_member, "controls.jsonl"),
    ):
        forged = verify_bundle(_forge(bad, tmp_path / f"{name}.edct.zip", edit), scoring=SCORING)
        assert isinstance(forged, Rejected), name
        assert words in forged.reason, (name, forged.reason)
        assert forged.code in ("controls_mismatch", "incomplete", "tampered"), (name, forged.code)
