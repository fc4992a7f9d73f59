"""The annotation server's API: seeded draw, no EDCT verdict shown, labels saved at once, clear 4xx."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from support.hang_guard import finish, hang_limit

from edct_task.annotation.app import AnnotationSession, create_app
from edct_task.annotation.interventions import draw, judgeable_interventions
from edct_task.annotation.labels import LabelLog
from edct_task.run.outputs import LoadedRun


def _session(loaded: LoadedRun, path: Path, *, n: int = 8, seed: int = 0, annotator: str = "alice"):
    population = judgeable_interventions(loaded.records)
    return AnnotationSession(
        run_name="run",
        draw=draw(population, n, seed),
        log=LabelLog(path, annotator),
        image_path=loaded.image_path,
        n_requested=n,
        seed=seed,
    )


@pytest.fixture
def client(loaded: LoadedRun, tmp_path: Path):
    session = _session(loaded, tmp_path / "alice.jsonl")
    with TestClient(create_app(session)) as c:
        c.session_obj = session
        yield c


def test_the_draw_is_seeded_independent_of_annotator_and_record_order(loaded: LoadedRun):
    population = judgeable_interventions(loaded.records)
    assert len(population) > 8
    for item in population:
        assert item.step.verified and item.step.requery is not None
        assert item.id == f"{item.record.sample.id}#{item.step.index}"
    first = [i.id for i in draw(population, 8, seed=0)]
    assert [i.id for i in draw(list(reversed(population)), 8, seed=0)] == first
    assert [i.id for i in draw(population, 8, seed=1)] != first
    assert len(set(first)) == 8
    everything = draw(population, 10_000, seed=0)
    assert sorted(i.id for i in everything) == sorted(i.id for i in population)


def test_items_show_what_an_annotator_needs_and_no_verdict(client, loaded: LoadedRun):
    session = client.get("/api/session").json()
    assert session["annotator"] == "alice" and session["total"] == 8 and session["position"] == 0
    assert session["done"] == 0 and session["labels"] == {}
    drawn = client.session_obj.draw
    assert session["ids"] == [i.id for i in drawn]
    for k, iv in enumerate(drawn):
        item = client.get(f"/api/items/{k}").json()
        assert item["id"] == iv.id and item["question"] == iv.record.sample.question
        assert item["original"] == {
            "answer": iv.record.baseline.answer,
            "explanation": iv.record.baseline.explanation,
        }
        assert item["new"] == {"answer": iv.step.requery.answer, "explanation": iv.step.requery.explanation}
        assert item["instruction"]["change"] == iv.step.instruction.change
        assert len(item["earlier_edits"]) == iv.step.index - 1
        text = json.dumps(item)
        for hidden in ("r_in", "r_out", "verified", "ccs", "binary", "graded", "status", "judge", "verdict"):
            assert hidden not in text, hidden
        if iv.step.binary is not None:
            assert iv.step.binary.ac_reason not in text
        before, after = client.get(item["before_url"]), client.get(item["after_url"])
        assert before.status_code == after.status_code == 200
        assert before.headers["content-type"] == "image/png"
        assert after.content == loaded.image_path(iv.step.image).read_bytes()
    assert client.get("/").status_code == 200


def test_labels_are_on_disk_when_the_reply_comes_and_the_session_resumes(client, loaded, tmp_path: Path):
    ids = client.get("/api/session").json()["ids"]
    reply = client.post("/api/labels", json={"intervention": ids[0], "edit_valid": "valid", "ac": 1})
    assert reply.status_code == 200
    assert reply.json()["saved"]["complete"] is False and reply.json()["position"] == 0
    lines = (tmp_path / "alice.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ac"] == 1 and json.loads(lines[0])["ef"] is None
    reply = client.post("/api/labels", json={"intervention": ids[0], "edit_valid": "valid", "ac": 1, "ef": 0})
    assert reply.json() | {"saved": None} == {"saved": None, "done": 1, "total": 8, "position": 1}
    client.post("/api/labels", json={"intervention": ids[1], "edit_valid": "not_assessable"})
    assert len((tmp_path / "alice.jsonl").read_text().splitlines()) == 3

    # a new server on the same file (the annotator reopens the tool) resumes at the third
    again = _session(loaded, tmp_path / "alice.jsonl")
    with TestClient(create_app(again)) as c:
        s = c.get("/api/session").json()
        assert s["position"] == 2 and s["done"] == 2
        assert s["labels"][ids[0]] == {"edit_valid": "valid", "ac": 1, "ef": 0, "complete": True}
        assert c.get("/api/items/0").json()["label"]["ef"] == 0


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"intervention": "nope#1", "edit_valid": "invalid"}, 404, "unknown intervention: not among the 8"),
        ({"intervention": "ID", "edit_valid": "invalid", "ac": 1}, 422, "only be given when edit_valid"),
        ({"intervention": "ID", "edit_valid": "valid", "ac": 5}, 422, "must be 0, 1 or null"),
        ({"intervention": "ID", "edit_valid": "maybe"}, 422, "'valid', 'invalid' or 'not_assessable'"),
        ({"intervention": "ID", "edit_valid": "valid", "annotator": "mallory"}, 422, "Extra inputs"),
        ({"edit_valid": "valid"}, 422, "Field required"),
    ],
)
def test_unknown_ids_and_malformed_labels_get_a_clear_4xx_and_write_nothing(
    client, tmp_path: Path, body, status, message
):
    first = client.session_obj.draw[0].id
    body = {k: (first if v == "ID" else v) for k, v in body.items()}
    reply = client.post("/api/labels", json=body)
    assert reply.status_code == status
    assert message in json.dumps(reply.json()["detail"])
    assert not (tmp_path / "alice.jsonl").exists()


def test_other_bad_requests_are_4xx(client):
    assert (
        client.post(
            "/api/labels", content=b"{not json", headers={"content-type": "application/json"}
        ).status_code
        == 422
    )
    assert client.get("/api/items/8").status_code == 404
    assert "this session has 8" in client.get("/api/items/-1").json()["detail"]
    assert client.get("/images/0/sideways").status_code == 404
    assert client.get("/assets/../app.py").status_code == 404
    assert client.get("/assets/secret.txt").status_code == 404


def test_edct_annotate_binds_localhost_prints_the_url_and_serves(run_dir: Path, tmp_path: Path):
    labels = tmp_path / "bob.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edct_task.cli.main",
            "annotate",
            str(run_dir),
            "--annotator",
            "bob",
            "--n",
            "5",
            "--port",
            "0",
            "--labels",
            str(labels),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        header = [proc.stdout.readline() for _ in range(3)]
        assert "annotating 5 interventions as bob" in header[0]
        (url,) = re.findall(r"open (http://127\.0\.0\.1:\d+/) in a browser", header[2])
        timeout = hang_limit(10)  # a hang guard (httpx's own default is 5 s)
        session = httpx.get(url + "api/session", timeout=timeout).json()
        assert session["annotator"] == "bob" and session["total"] == 5
        reply = httpx.post(
            url + "api/labels",
            json={"intervention": session["ids"][0], "edit_valid": "invalid"},
            timeout=timeout,
        )
        assert reply.status_code == 200 and len(labels.read_text().splitlines()) == 1
        # another site's page reaching the port by DNS rebinding names its own host: refused
        evil = httpx.get(url + "api/session", headers={"Host": "evil.example"}, timeout=timeout)
        assert evil.status_code == 400
        page = httpx.get(url, timeout=timeout)
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    finally:
        proc.terminate()
        finish(proc, 10)  # killed if it does not stop


def test_edct_annotate_user_errors_exit_2(run_dir: Path, tmp_path: Path, capsys):
    from edct_task.cli.main import main

    assert main(["annotate", str(run_dir), "--annotator", "a b"]) == 2
    assert "annotator name 'a b' is not allowed" in capsys.readouterr().err
    assert main(["annotate", str(tmp_path), "--annotator", "x"]) == 2
    assert "is not a run folder" in capsys.readouterr().err
    (tmp_path / "c.jsonl").write_text("oops\n")
    assert main(["annotate", str(run_dir), "--annotator", "x", "--labels", str(tmp_path / "c.jsonl")]) == 2
    assert "c.jsonl:1: not a JSON line" in capsys.readouterr().err
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        args = ["annotate", str(run_dir), "--annotator", "x", "--port", str(port)]
        assert main([*args, "--labels", str(tmp_path / "x.jsonl")]) == 2
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
