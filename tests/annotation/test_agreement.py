"""Table 4 from constructed label files: counts, rates, Wilson intervals and κ checked independently."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from edct_task.annotation.agreement import agreement_report, to_csv, to_json, to_markdown
from edct_task.annotation.interventions import EdctVerdict, edct_verdicts, judgeable_interventions
from edct_task.annotation.labels import Label, LabelChoice, LabelLog
from edct_task.cli.main import main
from edct_task.run.outputs import LoadedRun

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def _label(annotator: str, iid: str, edit_valid: str, ac=None, ef=None) -> Label:
    return Label(intervention=iid, annotator=annotator, edit_valid=edit_valid, ac=ac, ef=ef, time=T0)


def _ccs_label(annotator: str, iid: str, ccs: int) -> Label:
    # CCS 1 = AC 1 and EF 1; CCS 0 is given here as AC 1, EF 0
    return _label(annotator, iid, "valid", 1, ccs)


def _row(report, measure: str, raters: tuple[str, ...]):
    (row,) = [r for r in report.rows if r.measure == measure and r.raters == raters]
    return row


def _assert_rate(row, agree: int, n: int):
    low, high = proportion_confint(agree, n, alpha=0.05, method="wilson")
    assert (row.agree, row.n) == (agree, n)
    assert row.rate == pytest.approx(agree / n, abs=1e-12)
    assert row.ci_low == pytest.approx(low, abs=1e-12) and row.ci_high == pytest.approx(high, abs=1e-12)


def test_the_papers_table_4_counts_are_reproduced():
    """Two annotators CCS-score 100 of 128 interventions and agree on 88; EDCT matches 83 of those 88."""
    ids = [f"s{i:03d}#1" for i in range(128)]
    human_a = [i % 2 for i in range(100)]
    human_b = [a if i < 88 else 1 - a for i, a in enumerate(human_a)]
    edct = [a if i < 83 else 1 - a for i, a in enumerate(human_a[:88])] + [1] * 12
    labels: dict[str, dict[str, Label]] = {"ann1": {}, "ann2": {}}
    for i, iid in enumerate(ids):
        if i < 100:
            labels["ann1"][iid] = _ccs_label("ann1", iid, human_a[i])
            labels["ann2"][iid] = _ccs_label("ann2", iid, human_b[i])
        else:  # the 28 others: invalid or not assessable edits, no CCS label
            labels["ann1"][iid] = _label("ann1", iid, "invalid" if i < 114 else "not_assessable")
            labels["ann2"][iid] = _label("ann2", iid, "invalid" if i < 124 else "not_assessable")
    verdicts = {
        iid: EdctVerdict(ccs=edct[i] if i < 100 else None, ac=None, ef=None, gate=1)
        for i, iid in enumerate(ids)
    }
    report = agreement_report(labels, verdicts, not_assessable="missing")

    _assert_rate(_row(report, "ccs", ("ann1", "ann2")), 88, 100)
    consensus = _row(report, "ccs", ("human consensus", "EDCT"))
    _assert_rate(consensus, 83, 88)
    assert f"{100 * consensus.rate:.1f}" == "94.3"
    agree_a = sum(h == e for h, e in zip(human_a, edct, strict=True))
    agree_b = sum(h == e for h, e in zip(human_b, edct, strict=True))
    _assert_rate(_row(report, "ccs", ("ann1", "EDCT")), agree_a, 100)
    _assert_rate(_row(report, "ccs", ("ann2", "EDCT")), agree_b, 100)
    all_same = sum(a == b == e for a, b, e in zip(human_a, human_b, edct, strict=True))
    _assert_rate(_row(report, "ccs", ("ann1", "ann2", "EDCT")), all_same, 100)
    table = [
        [sum(a == x and b == y for a, b in zip(human_a, human_b, strict=True)) for y in (0, 1)]
        for x in (0, 1)
    ]
    assert _row(report, "ccs", ("ann1", "ann2")).kappa == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
    assert _row(report, "ccs", ("ann1", "ann2", "EDCT")).kappa is None

    # edit validity: valid = 1, invalid = 0, not assessable = no label; the gate passed all 128
    _assert_rate(_row(report, "edit_validity", ("ann1", "gate")), 100, 114)
    _assert_rate(_row(report, "edit_validity", ("ann2", "gate")), 100, 124)
    _assert_rate(_row(report, "edit_validity", ("ann1", "ann2")), 114, 114)
    _assert_rate(_row(report, "edit_validity", ("human consensus", "gate")), 100, 114)
    counts = {c.annotator: c for c in report.counts}
    assert (counts["ann1"].invalid, counts["ann1"].not_assessable, counts["ann1"].ccs_scored) == (14, 14, 100)
    assert (counts["ann2"].invalid, counts["ann2"].not_assessable, counts["ann2"].validity_scored) == (
        24,
        4,
        124,
    )
    assert report.edct_counts == {"ccs_scored": 100, "ccs_unscored": 28, "gate_scored": 128}


def test_missing_invalid_not_assessable_and_incomplete_labels_are_missing_never_zero():
    ids = [f"x#{j}" for j in range(1, 9)]
    a = {
        "x#1": _ccs_label("a", "x#1", 1),
        "x#2": _ccs_label("a", "x#2", 0),
        "x#3": _label("a", "x#3", "valid", 1, None),  # incomplete: no EF
        "x#4": _label("a", "x#4", "invalid"),
        "x#5": _label("a", "x#5", "not_assessable"),
        "x#6": _ccs_label("a", "x#6", 1),
        # x#7, x#8 not labelled by a
    }
    b = {
        "x#1": _ccs_label("b", "x#1", 1),
        "x#2": _ccs_label("b", "x#2", 1),
        "x#3": _ccs_label("b", "x#3", 0),
        "x#4": _ccs_label("b", "x#4", 0),
        "x#7": _ccs_label("b", "x#7", 0),
        "x#8": _label("b", "x#8", "invalid"),
    }
    c = {iid: _ccs_label("c", iid, 1) for iid in ids[:6]}
    verdicts = {iid: EdctVerdict(ccs=1, ac=1, ef=1, gate=1) for iid in ids}
    verdicts["x#6"] = EdctVerdict(ccs=None, ac=None, ef=None, gate=1)  # EDCT left it unscored
    verdicts["x#7"] = EdctVerdict(ccs=0, ac=0, ef=1, gate=0)
    report = agreement_report({"a": a, "b": b, "c": c}, verdicts, not_assessable="missing")

    assert report.interventions == 8
    _assert_rate(
        _row(report, "ccs", ("a", "b")), 1, 2
    )  # x#1 agree, x#2 differ; x#3 a incomplete, x#4 a invalid
    _assert_rate(_row(report, "ccs", ("a", "c")), 2, 3)  # x#1, x#2, x#6
    _assert_rate(_row(report, "ccs", ("a", "EDCT")), 1, 2)  # x#6 unscored by EDCT
    _assert_rate(_row(report, "ccs", ("b", "EDCT")), 3, 5)  # x#1, x#2, x#7 agree; x#3, x#4 not; x#8 invalid
    _assert_rate(_row(report, "ccs", ("c", "EDCT")), 5, 5)
    # consensus needs every human: x#1 (all 1) only, x#2 disagree, x#3..x#8 someone missing
    _assert_rate(_row(report, "ccs", ("human consensus", "EDCT")), 1, 1)
    _assert_rate(_row(report, "ccs", ("a", "b", "c", "EDCT")), 1, 2)  # x#1 same; x#2 not
    _assert_rate(
        _row(report, "edit_validity", ("a", "b")), 3, 4
    )  # x#1..x#4: valid,valid,valid | invalid,valid
    _assert_rate(_row(report, "edit_validity", ("b", "gate")), 4, 6)  # x#7 valid vs gate 0; x#8 invalid vs 1
    counts = {x.annotator: x for x in report.counts}
    assert (counts["a"].labelled, counts["a"].missing, counts["a"].incomplete) == (6, 2, 1)
    assert (counts["a"].ccs_scored, counts["a"].validity_scored) == (3, 5)
    assert (counts["b"].labelled, counts["b"].missing, counts["b"].invalid) == (6, 2, 1)

    md = to_markdown(report)
    assert "| a vs b | 1/2 | 50.0% |" in md and "| a | 6 | 2 | 4 | 1 | 1 | 1 | 3 | 5 |" in md
    rows = list(csv.DictReader(io.StringIO(to_csv(report))))
    assert len(rows) == len(report.rows)
    first = next(r for r in rows if r["raters"] == "a;b" and r["measure"] == "ccs")
    assert (first["agree"], first["n"], float(first["rate"])) == ("1", "2", 0.5)
    data = json.loads(json.dumps(to_json(report)))
    assert data["rows"][0]["label"] == "a vs b" and data["counts"][0]["annotator"] == "a"


def test_edct_agreement_on_a_run_writes_markdown_csv_and_json(
    run_dir: Path, loaded: LoadedRun, tmp_path: Path
):
    items = judgeable_interventions(loaded.records)[:6]
    verdicts = edct_verdicts(loaded.records)
    alice, bob = LabelLog(tmp_path / "alice.jsonl", "alice"), LabelLog(tmp_path / "bob.jsonl", "bob")
    for k, item in enumerate(items):
        alice.append(LabelChoice(intervention=item.id, edit_valid="valid", ac=1, ef=1))
        bob.append(LabelChoice(intervention=item.id, edit_valid="valid", ac=1, ef=k % 2))
    out = tmp_path / "table4"
    files = [str(tmp_path / "alice.jsonl"), str(tmp_path / "bob.jsonl")]
    assert main(["agreement", *files, "--run", str(run_dir), "--out", str(out)]) == 0
    data = json.loads((out / "agreement.json").read_text())
    rows = {(r["measure"], tuple(r["raters"])): r for r in data["rows"]}
    edct = [verdicts[i.id].ccs for i in items]
    assert rows["ccs", ("alice", "EDCT")]["agree"] == sum(e == 1 for e in edct if e is not None)
    assert rows["ccs", ("alice", "EDCT")]["n"] == sum(e is not None for e in edct)
    assert rows["ccs", ("bob", "EDCT")]["agree"] == sum(
        e == k % 2 for k, e in enumerate(edct) if e is not None
    )
    assert rows["ccs", ("alice", "bob")]["agree"] == 3 and rows["ccs", ("alice", "bob")]["n"] == 6
    assert rows["edit_validity", ("alice", "gate")]["agree"] == 6  # drawn steps all passed the gate
    assert (out / "agreement.md").read_text().startswith("# Human validation (Table 4)")
    assert len((out / "agreement.csv").read_text().splitlines()) == 1 + len(data["rows"])


def test_edct_agreement_refuses_foreign_ids_and_broken_files(run_dir: Path, tmp_path: Path, capsys):
    log = LabelLog(tmp_path / "x.jsonl", "x")
    log.append(LabelChoice(intervention="not-in-this-run#1", edit_valid="invalid"))
    assert main(["agreement", str(tmp_path / "x.jsonl"), "--run", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "'not-in-this-run#1', which this run does not have" in err and "Traceback" not in err
    (tmp_path / "y.jsonl").write_text('{"intervention": 1}\n')
    assert main(["agreement", str(tmp_path / "y.jsonl"), "--run", str(run_dir)]) == 2
    assert "y.jsonl:1: not a label" in capsys.readouterr().err
    (tmp_path / "z.jsonl").write_text("")
    assert main(["agreement", str(tmp_path / "z.jsonl"), "--run", str(run_dir)]) == 2
    assert "no label" in capsys.readouterr().err
