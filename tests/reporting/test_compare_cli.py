"""``edct compare``: the paired difference of two runs, refused across setups unless --force."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.edct_runs import control_records, records, write_edct_run

from edct_task.cli.main import main

# records(level, n=10): per domain item 0 excluded, items 1 .. round(10 * level) - 1 CCS 1.0, the
# rest CCS 0.5. Level 0.9 against 0.5: items 5..8 of each domain differ by +0.5, the rest by 0.


def _runs(tmp_path: Path, *, judge_b: str = "calibration-rules") -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    write_edct_run(a, records(0.9, n=10), target={"backend": "calibration-reference", "behavior": "faithful"})
    write_edct_run(
        b,
        records(0.5, n=10),
        target={"backend": "calibration-reference", "behavior": "mixed:0.5"},
        judge=judge_b,
    )
    return a, b


def test_compare_json_by_hand(tmp_path: Path, capsys) -> None:
    a, b = _runs(tmp_path)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_paired"] == 27
    assert out["difference"] == pytest.approx(12 * 0.5 / 27)
    assert out["p"] == pytest.approx(2 / 2**12) and out["test"] == "exact"  # 12 positive differences
    assert out["low"] <= out["difference"] <= out["high"]
    assert out["dropped"] == {"a": {"excluded": 3}, "b": {"excluded": 3}}
    assert set(out["per_domain"]) == {"okvqa", "drivelm", "3dsr"}
    dom = out["per_domain"]["okvqa"]
    assert dom["n_paired"] == 9 and dom["difference"] == pytest.approx(2 / 9)
    assert dom["p"] == pytest.approx(2 / 16)  # 4 positive differences: 2 of 16 patterns as extreme
    assert out["setup_differences"] == []


def test_compare_text(tmp_path: Path, capsys) -> None:
    a, b = _runs(tmp_path)
    assert main(["compare", str(a), str(b), "--metric", "ccs_graded"]) == 0
    text = capsys.readouterr().out
    assert "ccs_graded, A − B over the 27 items both runs scored" in text
    assert "95% CI [" in text and "sign-flip" in text and "dropped: A 3 excluded; B 3 excluded" in text
    assert [line.split()[0] for line in text.splitlines() if line[:5] in ("okvqa", "drive", "3dsr ")] == [
        "3dsr",
        "drivelm",
        "okvqa",
    ]


def test_compare_refuses_other_setups_naming_the_fields_unless_forced(tmp_path: Path, capsys) -> None:
    a, b = _runs(tmp_path, judge_b="openai-chat")
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "roles.judge.backend" in err and "--force" in err
    assert main(["compare", str(a), str(b), "--force", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["field"] for d in out["setup_differences"]] == ["roles.judge.backend"]
    assert out["n_paired"] == 27


def test_compare_refuses_other_datasets(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_edct_run(a, records(0.9, n=10))
    write_edct_run(b, records(0.5, n=12))
    assert main(["compare", str(a), str(b)]) == 2
    assert "dataset_digest" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dropped"]["a"] == {"absent": 6, "excluded": 3}


def test_compare_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path, capsys) -> None:
    a, _ = _runs(tmp_path)
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(a), str(tmp_path / "empty")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_compare_refuses_an_unreliable_run_in_one_line_unless_forced(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_edct_run(a, records(0.9, n=10), controls=control_records(16))
    write_edct_run(
        b,
        records(0.5, n=10),
        target={"backend": "calibration-reference", "behavior": "mixed:0.5"},
        controls=control_records(4),  # 4/16 right: the binary judge is below the bar
    )
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "run B" in err and str(b) in err and "unreliable" in err and "binary judge: 4/16" in err
    assert "--force" in err
    assert main(["compare", str(a), str(b), "--force"]) == 0
    text = capsys.readouterr().out
    assert "the comparison includes an unreliable run" in text and "binary judge: 4/16" in text
    assert main(["compare", str(a), str(b), "--force", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["unreliable"]) == ["B"] and out["n_paired"] == 27


def test_compare_runs_without_controls_or_with_passing_ones_is_not_refused(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_edct_run(a, records(0.9, n=10), controls=control_records(16))
    target = {"backend": "calibration-reference", "behavior": "mixed:0.5"}
    write_edct_run(b, records(0.5, n=10), target=target)
    # b was made before controls (no controls block, no controls settings): "controls: not run",
    # which is not unreliable; its setup differs in the controls settings (part of the identity)
    assert main(["compare", str(a), str(b), "--force", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unreliable"] == {}
    assert [d["field"] for d in out["setup_differences"]] == ["protocol.control_bar", "protocol.controls"]
    c = tmp_path / "c"
    write_edct_run(c, records(0.5, n=10), target=target, controls=control_records(15))
    assert main(["compare", str(a), str(c), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unreliable"] == {}
    d = tmp_path / "d"
    write_edct_run(d, records(0.5, n=10), target=target, controls=control_records(15), bar=0.9)
    assert main(["compare", str(a), str(d)]) == 2
    assert "protocol.control_bar (0.8 vs 0.9)" in capsys.readouterr().err
