"""Soak of the board (issue 34's high cases together): 50 honest bundles plus every hostile kind
the probe found — a link to ``/dev/zero``, a FIFO, someone else's bundle resealed under another
model name, 2,000 unreferenced tiny members, a byte-flipped copy, Hub eval-results files with a
5,000-digit number, an impossible date and an alias bomb. The board is built, every hostile item
costs its own line, and the ranking is exactly the ranking of the honest bundles alone."""

from __future__ import annotations

import json
import os

import pytest
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.leaderboard.bundle import create_bundle, read_bundle, reseal, sha256_bytes, write_zip

pytestmark = pytest.mark.slow
HONEST = 50


def _honest(tmp_path):
    """50 runs with distinct records: 10 pass counts (5..14 of 20 per domain) × 0..4 excluded."""
    out = []
    for i in range(HONEST):
        passing, excluded = 5 + i % 10, i // 10
        name = f"m{i:02d}"
        target = {"backend": "openai-chat", "model": f"org/model-{i:02d}"}
        recs = records(passing / 20, n=20, excluded=excluded)
        write_edct_run(tmp_path / "runs" / name, recs, target=target, resamples=200)
        path = tmp_path / "honest" / f"{name}.edct.zip"
        create_bundle(tmp_path / "runs" / name, path)
        out.append(path)
    return out


def _hostile(tmp_path, honest):
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "zero.edct.zip").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.edct.zip")
    b = read_bundle(honest[0])
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    thief = {"backend": "openai-chat", "model": "org/thief"}
    results = json.loads(members["results.json"])
    results["config"]["roles"]["target"] = thief
    members["results.json"] = json.dumps(results).encode()
    meta["model"] = {"key": "thief", "name": "thief", "identity": thief}
    meta["setup"]["target"] = thief
    write_zip(folder / "resealed.edct.zip", reseal(meta, members), members)
    b = read_bundle(honest[1])
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    for i in range(2000):
        members[f"images/{sha256_bytes(str(i).encode())}.png"] = b"x"
    write_zip(folder / "members.edct.zip", reseal(meta, members), members)
    data = bytearray(honest[2].read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / "flipped.edct.zip").write_bytes(bytes(data))
    repo = tmp_path / "repo" / ".eval_results"
    repo.mkdir(parents=True)
    (repo / "digits.yaml").write_text("- dataset: {id: o/b, task_id: t}\n  value: " + "9" * 5000 + "\n")
    (repo / "date.yaml").write_text("- dataset: {id: o/b, task_id: t}\n  value: 1\n  date: 2026-02-30\n")
    (repo / "bomb.yaml").write_text(
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    )
    return folder, tmp_path / "repo"


def _ranking(board):
    return [(e["model"], e["rank"], e["rank_interval"]) for t in board["tracks"] for e in t["entries"]]


def test_fifty_honest_bundles_and_the_hostile_ones_rank_as_the_honest_alone(tmp_path, capsys):
    honest = _honest(tmp_path)
    hostile, repo = _hostile(tmp_path, honest)
    alone, mixed = tmp_path / "alone", tmp_path / "mixed"
    assert main(["leaderboard", str(tmp_path / "honest"), "--out", str(alone), "--resamples", "200"]) == 0
    args = [str(tmp_path / "honest"), str(hostile), "--eval-results", str(repo), "--resamples", "200"]
    assert main(["leaderboard", *args, "--out", str(mixed)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    a, m = (json.loads((p / "leaderboard.json").read_text()) for p in (alone, mixed))
    assert len(_ranking(a)) == HONEST
    assert _ranking(m) == _ranking(a)
    rejected = {os.path.basename(r["bundle"]): r["code"] for r in m["rejected"]}
    assert rejected == {
        "zero.edct.zip": "unreadable",
        "fifo.edct.zip": "unreadable",
        "members.edct.zip": "tampered",
        "flipped.edct.zip": rejected.get("flipped.edct.zip"),
        "digits.yaml": "eval_results",
        "date.yaml": "eval_results",
        "bomb.yaml": "eval_results",
    }
    assert rejected["flipped.edct.zip"] in ("unreadable", "tampered")
    assert [os.path.basename(d["bundle"]) for d in m["duplicates"]] == ["resealed.edct.zip"]
