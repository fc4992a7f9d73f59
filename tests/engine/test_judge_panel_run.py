"""A judge panel end to end: majority vote outvotes a bad judge, agreement lands in the results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.backends import stand_in

from edct_task import roles as roles_mod
from edct_task.calibration import RuleBasedLLM
from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run
from model_adapters.contracts import Completion


class _Contrarian(RuleBasedLLM):
    """Agrees on graded scores, but flips every binary AC: a judge that is wrong half the time."""

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "model": "contrarian"}

    def complete(self, prompt: str, params: Any) -> Completion:
        reply = super().complete(prompt, params).text
        return Completion(re.sub(r"^AC: ([01])$", lambda m: f"AC: {1 - int(m.group(1))}", reply, flags=re.M))


def test_panel_majority_and_agreement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        roles_mod.REGISTRY["text"],
        "contrarian",
        stand_in("text", "contrarian", lambda options: _Contrarian()),
    )
    base = calibration_config("faithful", n=12, output_dir=tmp_path / "run").model_dump(mode="json")
    base.update(progress=False, bootstrap_resamples=500)
    base["roles"]["judge"] = [
        {"backend": "calibration-rules"},
        {"backend": "contrarian"},
        {"backend": "calibration-rules"},
    ]
    outcome = run(config_from_dict(base))
    results = outcome.results
    assert results["config"]["protocol"]["judges"] == 3
    assert [r["backend"] for r in results["config"]["roles"]["judge"]] == [
        "calibration-rules",
        "contrarian",
        "calibration-rules",
    ]
    # the faithful model still scores 1: the contrarian judge is outvoted 2 to 1 on every step
    assert results["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] == 1.0
    step = outcome.records[0].steps[0]
    assert [v.binary.ac for v in step.votes] == [1, 0, 1] and step.binary.ac == 1
    agreement = results["judge_agreement"]
    assert agreement["judges"] == 3 and agreement["items"] == 24
    pairs = {tuple(p["judges"]): p for p in agreement["ac"]["pairs"]}
    assert pairs[("judge0", "judge2")]["percent"] == 1.0
    assert pairs[("judge0", "judge1")]["percent"] == 0.0
    assert agreement["ac"]["mean_percent"] == pytest.approx(1 / 3)
    assert agreement["ef"]["mean_percent"] == 1.0
    assert agreement["graded"]["mean_percent"] == 1.0
    # every judge is asked (and cached) under its own identity: 3 judges x 2 calls x (24 steps and
    # 16 known-answer controls); the contrarian judge fails its binary controls, and only it
    calls = results["calls"]
    assert calls["calls"]["judge"] + calls["cache_hits"].get("judge", 0) == 3 * 2 * (24 + 16)
    binary = results["controls"]["roles"]["judge_binary"]
    assert [binary[j]["below_bar"] for j in ("judge0", "judge1", "judge2")] == [False, True, False]
    assert results["controls"]["unreliable"][0].startswith("binary judge (judge1): ")
