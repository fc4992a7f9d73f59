"""Duplicate evidence on the board is a duplicate whatever its name and however little was changed,
and the bundle made first keeps the entry, whatever the file names (issue 46, point 5)."""

from __future__ import annotations

import json
import shutil

import pytest
from support.bundles import submitted

from edct_task.leaderboard.board import build_board
from edct_task.leaderboard.bundle import read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import BoardScoring, Verified, verify_bundle

BETA = {"backend": "openai-chat", "model": "org/beta-vl"}
THIEF = {"backend": "openai-chat", "model": "org/thief-vl"}
SCORING = BoardScoring(n_resamples=200)


@pytest.fixture
def honest(tmp_path):
    return submitted(tmp_path, "alpha", 0.6)


def _touch_text(text: str, how: str) -> str:
    return {
        "space": text.replace(" ", "  ", 1),
        "zero_width": text[:3] + "\u200b" + text[3:],
        "upper": text.upper(),
        "trailing": text + " ",
        "nbsp": text.replace(" ", "\u00a0", 1),
    }[how]


def _steal(honest, out, *, how: str | None, created: str, every: bool = False):
    """``honest``'s records under THIEF's name: the first (or every) baseline explanation touched
    as ``how`` says, ``created`` as the bundle's time."""
    b = read_bundle(honest)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    lines = members["samples.jsonl"].decode().splitlines()
    touched = 0
    for i, line in enumerate(lines):
        rec = json.loads(line)
        base = rec.get("baseline") or {}
        if how and base.get("explanation") and (every or touched == 0):
            base["explanation"] = _touch_text(base["explanation"], how)
            lines[i] = json.dumps(rec)
            touched += 1
    assert touched or how is None
    members["samples.jsonl"] = ("\n".join(lines) + "\n").encode()
    results = json.loads(members["results.json"])
    results["config"]["roles"]["target"] = THIEF
    members["results.json"] = json.dumps(results).encode()
    meta["model"] = {"key": "thief", "name": "Thief VL", "identity": THIEF}
    meta["setup"]["target"] = THIEF
    meta["created"] = created
    write_zip(out, reseal(meta, members), members)
    return out


@pytest.mark.parametrize("how", ["space", "zero_width", "upper", "trailing", "nbsp"])
@pytest.mark.parametrize("every", [False, True])
def test_a_relabelled_copy_with_a_text_touched_is_a_duplicate(honest, tmp_path, how, every) -> None:
    later = "2099-01-01T00:00:00+00:00"
    stolen = _steal(honest, tmp_path / "aaa-thief.edct.zip", how=how, created=later, every=every)
    if not isinstance(verify_bundle(stolen), Verified):
        pytest.skip(f"the touched bundle is rejected on its own: {verify_bundle(stolen)}")
    for order in ([honest, stolen], [stolen, honest]):
        board = build_board(order, scoring=SCORING)
        assert [e["model"] for t in board["tracks"] for e in t["entries"]] == ["org/alpha-vl@abc123"]
        (dup,) = board["duplicates"]
        assert dup["bundle"] == str(stolen) and dup["same_as"] == str(honest)


def test_the_bundle_made_first_keeps_the_rank_whatever_the_file_names(honest, tmp_path) -> None:
    """A resealed exact copy (same records, another name) whose file name sorts first, given first."""
    stolen = _steal(honest, tmp_path / "0000.edct.zip", how=None, created="2099-01-01T00:00:00+00:00")
    assert isinstance(verify_bundle(stolen), Verified)
    for order in ([stolen, honest], [honest, stolen]):
        board = build_board(order, scoring=SCORING)
        (entry,) = [e for t in board["tracks"] for e in t["entries"]]
        assert entry["bundle"] == str(honest) and entry["model"] == "org/alpha-vl@abc123"
        assert [(d["bundle"], d["same_as"]) for d in board["duplicates"]] == [(str(stolen), str(honest))]
    undated = _steal(honest, tmp_path / "0001.edct.zip", how=None, created="not a time")
    board = build_board([undated, honest], scoring=SCORING)
    assert [d["bundle"] for d in board["duplicates"]] == [str(undated)]
    copy = tmp_path / "0002.edct.zip"
    shutil.copy(honest, copy)  # the very same bundle under a name that sorts first
    board = build_board([copy, honest], scoring=SCORING)
    assert len([e for t in board["tracks"] for e in t["entries"]]) == 1 and len(board["duplicates"]) == 1


def test_independent_runs_of_other_targets_are_not_duplicates(tmp_path) -> None:
    a = submitted(tmp_path, "alpha", 0.6)
    b = submitted(tmp_path, "beta", 0.3, target=BETA, offset=5)
    board = build_board([a, b], scoring=SCORING)
    assert board["duplicates"] == []
    assert sorted(e["model"] for t in board["tracks"] for e in t["entries"]) == [
        "org/alpha-vl@abc123",
        "org/beta-vl",
    ]
