"""``edct estimate --detect DELTA``: items for 80 % power to detect a paired difference, planned for
the test ``edct compare`` runs (the paired sign-flip test, its power simulated)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.scoring.compare import DEFAULT_DIFFERENCES, Differences, sign_flip_power, sign_flip_test


def _detect(capsys, *args: str) -> dict:
    assert main(["estimate", "--detect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _pilot(tmp_path: Path, level_b: float) -> tuple[Path, Path]:
    # records(level, n=30): per domain item 0 excluded, items 1 .. round(30 * level) - 1 score
    # CCS_binary 1.0, the rest 0.5. 0.9 against level_b: the items in between differ by +0.5.
    a, b = tmp_path / "a", tmp_path / "b"
    write_edct_run(a, records(0.9), target={"backend": "calibration-reference", "behavior": "faithful"})
    write_edct_run(b, records(level_b), target={"backend": "calibration-reference", "behavior": "prior"})
    return a, b


def _realised(dist: Differences, n: int, sims: int, seed: int) -> float:
    """``edct compare``'s test itself on simulated comparisons of n items: its rejection rate."""
    draws = np.random.default_rng(seed).choice(dist.values, p=dist.weights, size=(sims, n))
    return float(np.mean([sign_flip_test(d).p < 0.05 for d in draws]))


def test_the_plan_from_a_pilot_delivers_its_power_with_compares_test(tmp_path: Path, capsys) -> None:
    """Issue 44: the pilot's SD in the paired t-test's power promised 80 % at 35 items; the sign-flip
    test that ``edct compare`` runs rejects ~72 % of such comparisons there (it needs six same-signed
    differences). The plan is now the test's own power."""
    a, b = _pilot(tmp_path, 0.7)  # 18 of 87 paired items differ by +0.5, the rest by 0
    out = _detect(capsys, "0.1", "--pilot", str(a), str(b))
    assert out["n_current"] == 87 and out["pilot_difference"] == pytest.approx(9 / 87)
    assert out["sd"] == pytest.approx(np.std([0.5] * 18 + [0.0] * 69, ddof=1))
    assert out["test"] == "paired sign-flip test (edct compare)" and out["power_at_n_needed"] >= 0.8
    # the pilot's differences reweighted to a mean of 0.1: +0.5 on a fifth of the items
    truth = Differences(np.array([0.0, 0.5]), np.array([0.8, 0.2]))
    sims = 2000
    realised = _realised(truth, out["n_needed"], sims, seed=1)
    assert realised >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / sims), (out, realised)
    t_plan = 35  # what the paired t-test promised 80 % at (the plan before issue 44)
    assert t_plan < out["n_needed"] and _realised(truth, t_plan, sims, seed=2) < 0.77
    assert main(["estimate", "--detect", "0.1", "--pilot", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert f"items needed: {out['n_needed']} (the paired sign-flip test (edct compare)" in text
    assert "detectable at the current 87 items" in text


def test_detect_with_the_default_differences(capsys) -> None:
    out = _detect(capsys, "0.05", "--n", "300")
    assert out["sd"] == 0.5 and "default" in out["sd_source"]
    tilted = DEFAULT_DIFFERENCES.tilted(0.05)
    # the normal-theory size (1.96 + 0.8416)**2 * 0.25 / 0.0025 = 785 is short of the test's own
    assert 785 < out["n_needed"] < 1.2 * 785 and out["power_at_n_needed"] >= 0.8
    assert sign_flip_power(tilted, out["n_needed"], sims=2000, seed=7) >= 0.8 - 2 * math.sqrt(0.16 / 2000)
    assert out["n_current"] == 300 and 0.07 < out["detectable"] < 0.095


def test_detect_user_errors_are_one_line(tmp_path: Path, capsys) -> None:
    write_edct_run(tmp_path / "a", records(0.9, n=10))
    write_edct_run(tmp_path / "b", records(0.9, n=10))
    a, b = _pilot(tmp_path / "p", 0.7)
    for args in (
        ["--detect", "0"],
        ["--detect", "0.1", "--pilot", str(tmp_path / "a"), str(tmp_path / "b")],  # identical: SD 0
        ["--detect", "0.6", "--pilot", str(a), str(b)],  # no mix of 0 and +0.5 has mean 0.6
        ["--detect", "1.0"],  # no mix of the default -1, 0, 1 has mean 1
        ["--pilot", str(tmp_path / "a"), str(tmp_path / "b")],
        [],
    ):
        assert main(["estimate", *args]) == 2, args
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
