"""Issue 19, rows 15-19 and 26: the annotation server and agreement under bad input.

Row 15: non-finite numbers are 422 (not 500); row 16: a large body is 413 and no reply echoes the
input; row 17: a write from another origin is 403 and writes nothing; row 18: a label file without
a final newline; row 19: one annotator in two files; row 26: the paper's edit-validity definition."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from edct_task.annotation.agreement import agreement_report, to_markdown
from edct_task.annotation.app import AnnotationSession, create_app
from edct_task.annotation.interventions import EdctVerdict, draw, judgeable_interventions
from edct_task.annotation.labels import Label, LabelChoice, LabelFileError, LabelLog, read_label_files
from edct_task.cli.main import main
from edct_task.run.outputs import LoadedRun

JSON = {"content-type": "application/json"}


@pytest.fixture
def client(loaded: LoadedRun, tmp_path: Path):
    session = AnnotationSession(
        run_name="run",
        draw=draw(judgeable_interventions(loaded.records), 4, 0),
        log=LabelLog(tmp_path / "alice.jsonl", "alice"),
        image_path=loaded.image_path,
        n_requested=4,
        seed=0,
    )
    with TestClient(create_app(session, allowed_hosts=["testserver"])) as c:
        c.first = session.draw[0].id
        yield c


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_422_and_write_nothing(client, tmp_path: Path, number: str) -> None:
    body = f'{{"intervention": "{client.first}", "edit_valid": "valid", "ac": {number}}}'
    reply = client.post("/api/labels", content=body.encode(), headers=JSON)
    assert reply.status_code == 422, reply.text
    assert not (tmp_path / "alice.jsonl").exists()


def test_a_large_body_is_413_and_never_held_or_echoed(client, tmp_path: Path) -> None:
    big = json.dumps({"intervention": client.first, "edit_valid": "valid", "pad": "A" * 2_000_000})
    reply = client.post("/api/labels", content=big.encode(), headers=JSON)
    assert reply.status_code == 413
    assert len(reply.content) < 500 and "AAAA" not in reply.text
    assert not (tmp_path / "alice.jsonl").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"intervention": "X" * 5000, "edit_valid": "valid"},  # unknown id: 404
        {"intervention": "ID", "edit_valid": "valid", "extra": "Y" * 5000},  # extra field: 422
        {"intervention": "ID", "edit_valid": "Z" * 5000},  # bad value: 422
    ],
)
def test_error_replies_never_echo_the_input(client, body: dict) -> None:
    body = {k: (client.first if v == "ID" else v) for k, v in body.items()}
    reply = client.post("/api/labels", json=body)
    assert reply.status_code in (404, 422)
    assert "XXXX" not in reply.text and "YYYY" not in reply.text and "ZZZZ" not in reply.text
    assert len(reply.content) < 1000


def test_a_write_from_another_origin_is_refused(client, tmp_path: Path) -> None:
    body = {"intervention": client.first, "edit_valid": "invalid"}
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
        reply = client.post("/api/labels", json=body, headers=headers)
        assert reply.status_code == 403, headers
    assert not (tmp_path / "alice.jsonl").exists()
    assert client.post("/api/labels", json=body, headers={"Origin": "http://testserver"}).status_code == 200
    assert client.post("/api/labels", json=body).status_code == 200  # no Origin: not a browser
    assert len((tmp_path / "alice.jsonl").read_text().splitlines()) == 2


def _label(annotator: str, iid: str, valid: str) -> Label:
    return Label(intervention=iid, annotator=annotator, edit_valid=valid, time=datetime.now(timezone.utc))


def test_a_label_file_without_a_final_newline_gets_one(tmp_path: Path) -> None:
    path = tmp_path / "alice.jsonl"
    path.write_text(_label("alice", "s#1", "invalid").line().rstrip("\n"))  # edited by hand
    log = LabelLog(path, "alice")
    log.append(LabelChoice(intervention="s#2", edit_valid="invalid"))
    assert sorted(LabelLog(path, "alice").latest) == ["s#1", "s#2"]
    assert sorted(read_label_files([path])["alice"]) == ["s#1", "s#2"]


def test_one_annotator_in_two_files_is_refused(tmp_path: Path, run_dir: Path, capsys) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(_label("alice", "s#1", "invalid").line())
    b.write_text(_label("alice", "s#2", "invalid").line())
    with pytest.raises(LabelFileError, match="also labelled in"):
        read_label_files([a, b])
    assert main(["agreement", str(a), str(b), "--run", str(run_dir), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "alice" in err and str(a) in err and len(err.strip().splitlines()) == 1


def test_edit_validity_uses_every_intervention_as_the_paper_does() -> None:
    """128 interventions, the gate passed all; ann1 found 115 valid (12 not assessable, 1 invalid),
    ann2 122 valid; both valid on 110, neither on 1: the paper's 89.8%, 95.3% and 86.7%."""
    ids = [f"s{i:03d}#1" for i in range(128)]
    labels: dict[str, dict[str, Label]] = {"ann1": {}, "ann2": {}}
    for i, iid in enumerate(ids):
        if i < 110:
            one, two = "valid", "valid"
        elif i < 115:
            one, two = "valid", "invalid"
        elif i < 127:
            one, two = "not_assessable", "valid"
        else:
            one, two = "invalid", "invalid"
        labels["ann1"][iid] = _label("ann1", iid, one)
        labels["ann2"][iid] = _label("ann2", iid, two)
    verdicts = {iid: EdctVerdict(ccs=None, ac=None, ef=None, gate=1) for iid in ids}

    def rows(report):
        return {r.raters: r for r in report.rows if r.measure == "edit_validity"}

    paper = rows(agreement_report(labels, verdicts))
    assert (paper["ann1", "gate"].agree, paper["ann1", "gate"].n) == (115, 128)
    assert (paper["ann2", "gate"].agree, paper["ann2", "gate"].n) == (122, 128)
    assert (paper["ann1", "ann2"].agree, paper["ann1", "ann2"].n) == (111, 128)
    assert [f"{100 * paper[k].rate:.1f}" for k in (("ann1", "gate"), ("ann2", "gate"), ("ann1", "ann2"))] == [
        "89.8",
        "95.3",
        "86.7",
    ]
    assert "the paper's definition" in to_markdown(agreement_report(labels, verdicts))
    strict = agreement_report(labels, verdicts, not_assessable="missing")
    assert (rows(strict)["ann1", "gate"].agree, rows(strict)["ann1", "gate"].n) == (115, 116)
    assert "not-assessable labels are missing" in to_markdown(strict)
