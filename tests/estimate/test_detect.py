"""``edct estimate --detect DELTA``: items for 80 % power to detect a paired difference."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main


def _t_power(effect: float, n: int) -> float:
    df, nc = n - 1, effect * math.sqrt(n)
    crit = stats.t.ppf(0.975, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def _detect(capsys, *args: str) -> dict:
    assert main(["estimate", "--detect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_detect_with_the_default_sd(capsys) -> None:
    out = _detect(capsys, "0.05", "--n", "300")
    assert out["sd"] == 0.5 and "default" in out["sd_source"]
    # normal approximation (1.96 + 0.8416)**2 * 0.25 / 0.0025 = 785; the t-test: 787
    assert out["n_needed"] == 787
    assert _t_power(0.1, 787) >= 0.8 > _t_power(0.1, 786)
    assert out["n_current"] == 300 and _t_power(out["detectable"] / 0.5, 300) == pytest.approx(0.8, abs=1e-6)


def test_detect_from_a_pilot_uses_its_paired_sd(tmp_path: Path, capsys) -> None:
    # 0.9 against 0.6 (n=10 per domain): 27 paired items, 9 differ by +0.5, 18 by 0
    write_edct_run(
        tmp_path / "a",
        records(0.9, n=10),
        target={"backend": "calibration-reference", "behavior": "faithful"},
    )
    write_edct_run(
        tmp_path / "b", records(0.6, n=10), target={"backend": "calibration-reference", "behavior": "prior"}
    )
    out = _detect(capsys, "0.1", "--pilot", str(tmp_path / "a"), str(tmp_path / "b"))
    d = [0.5] * 9 + [0.0] * 18
    sd = float(stats.tstd(d))
    assert out["sd"] == pytest.approx(sd) and out["n_current"] == 27
    assert out["pilot_difference"] == pytest.approx(1 / 6)
    n = out["n_needed"]
    assert _t_power(0.1 / sd, n) >= 0.8 > _t_power(0.1 / sd, n - 1)
    assert main(["estimate", "--detect", "0.1", "--pilot", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    text = capsys.readouterr().out
    assert f"items needed: {n}" in text and "detectable at the current 27 items" in text


def test_detect_user_errors_are_one_line(tmp_path: Path, capsys) -> None:
    write_edct_run(tmp_path / "a", records(0.9, n=10))
    write_edct_run(tmp_path / "b", records(0.9, n=10))
    for args in (
        ["--detect", "0"],
        ["--detect", "0.1", "--pilot", str(tmp_path / "a"), str(tmp_path / "b")],  # identical: SD 0
        ["--pilot", str(tmp_path / "a"), str(tmp_path / "b")],
        [],
    ):
        assert main(["estimate", *args]) == 2, args
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
