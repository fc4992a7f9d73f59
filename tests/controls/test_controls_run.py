"""Known-answer controls in real runs (issue 44): a judge that cannot judge marks the run
unreliable, however confident its number; the calibration judge never does.

The stand-in judges are the failure modes seen with cheap judges: always 1 (a ``prior`` target,
true CCS ≈ 0, scores 1.000), always 0, a coin flip, a reply that echoes the prompt, and one that
copies the rubric. Each plays the judge role through the ordinary registry, so its control
requests go through the same dispatcher, cache and templates as the run's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.backends import stand_in
from support.stand_in_judges import BACKEND, POLICIES, StandIn

from edct_task import roles as roles_mod
from edct_task.calibration import RuleBasedLLM
from edct_task.cli.main import main
from edct_task.config import calibration_config, config_from_dict
from edct_task.controls import CALIBRATION, draw, shipped
from edct_task.engine.controls import control_requests, grade_control
from edct_task.engine.protocol import ProtocolConfig
from edct_task.run.outputs import load_run
from edct_task.run.runner import run
from edct_task.scoring.controls import EXIT_UNRELIABLE
from model_adapters.contracts import GenerationParams


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str, behavior: str) -> Any:
    monkeypatch.setitem(
        roles_mod.REGISTRY["text"], BACKEND, stand_in("text", BACKEND, lambda options: StandIn(policy))
    )
    base = calibration_config(behavior, n=10, output_dir=tmp_path / f"{policy}-{behavior}").model_dump(
        mode="json"
    )
    base.update(progress=False, bootstrap_resamples=200, cache_dir=str(tmp_path / "cache"))
    base["roles"]["judge"] = {"backend": "stand-in"}
    return config_from_dict(base)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_judge_that_cannot_judge_marks_the_run_unreliable(tmp_path, monkeypatch, policy):
    outcome = run(_config(tmp_path, monkeypatch, policy, "prior"))
    controls = outcome.results["controls"]
    binary = controls["roles"]["judge_binary"]["judge"]
    assert binary["n"] == 16 and binary["below_bar"], binary
    assert binary["ci"][1] < controls["bar"]
    assert any(line.startswith("binary judge: ") for line in controls["unreliable"])
    # the evidence is in the run folder, and the one reader gives it back
    loaded = load_run(outcome.output_dir)
    assert len(loaded.controls) == controls["calls"] and not all(c.correct for c in loaded.controls)


def test_always_one_scores_a_prior_target_perfectly_yet_exits_unreliable(tmp_path, monkeypatch, capsys):
    """The measured defect: a well-formed always-1 judge reported ``prior`` (true CCS ≈ 0) as 1.000
    [1.00, 1.00] and exited 0."""
    monkeypatch.setitem(
        roles_mod.REGISTRY["text"], BACKEND, stand_in("text", BACKEND, lambda options: StandIn("always-1"))
    )
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        json.dumps(
            {
                "output_dir": str(tmp_path / "run"),
                "cache_dir": str(tmp_path / "cache"),
                "data": {"source": "calibration", "n": 8, "seed": 0},
                "roles": {
                    "target": {"backend": "calibration-reference", "behavior": "prior"},
                    "extractor": {"backend": "calibration-rules"},
                    "judge": {"backend": "stand-in"},
                    "edit_parser": {"backend": "calibration-rules"},
                    "editor": {"backend": "calibration-editor"},
                    "detector": {"backend": "calibration-oracle"},
                },
            }
        )
    )
    code = main(["run", "--config", str(cfg), "--no-progress"])
    out, err = capsys.readouterr()
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] == 1.0
    assert code == EXIT_UNRELIABLE == 4
    assert "edct: UNRELIABLE RUN: binary judge: " in err and "below the bar 0.80" in err
    assert "controls (" in out and "BELOW THE BAR" in out


@pytest.mark.parametrize("behavior", ["faithful", "prior", "stale", "mixed:0.5"])
def test_the_calibration_judge_is_never_flagged(tmp_path, monkeypatch, behavior):
    outcome = run(_config(tmp_path, monkeypatch, "calibration", behavior))
    controls = outcome.results["controls"]
    assert controls["unreliable"] == []
    for judges in controls["roles"].values():
        for tally in judges.values():
            assert tally["correct"] == tally["n"] > 0


def test_every_calibration_control_is_answered_right_by_the_calibration_models():
    """False alarms on the calibration world are impossible, not merely rare: the rule-based
    models answer every shipped calibration control (all verdict classes and levels) right."""
    cfg = ProtocolConfig()
    llm = RuleBasedLLM()
    items = [i for i in shipped() if i.domain == CALIBRATION]
    assert len(items) > 200
    wrong = []
    for item in items:
        requests = control_requests(item, cfg)
        replies = [llm.complete(r.prompt, GenerationParams(max_new_tokens=64)) for r in requests]
        wrong += [r.id for r in grade_control(item, requests, replies, cfg) if not r.correct]
    assert wrong == []


def test_controls_off_are_recorded_and_cost_nothing(tmp_path, monkeypatch):
    base = calibration_config("faithful", n=4, output_dir=tmp_path / "off").model_dump(mode="json")
    base.update(progress=False, bootstrap_resamples=200)
    base["protocol"]["controls"] = 0
    outcome = run(config_from_dict(base))
    assert outcome.results["config"]["protocol"]["controls"] == 0
    assert outcome.results["controls"]["calls"] == 0 and outcome.results["controls"]["unreliable"] == []
    assert (tmp_path / "off" / "controls.jsonl").read_text() == ""


def test_the_draw_balances_verdict_classes_and_is_seeded():
    a = draw([CALIBRATION], 16, seed=0, k=2)
    b = draw([CALIBRATION], 16, seed=0, k=2)
    c = draw([CALIBRATION], 16, seed=1, k=2)
    assert [i.id for i in a] == [i.id for i in b] != [i.id for i in c]
    judges = [i.body for i in a if hasattr(i.body, "ac")]
    assert len(judges) == 16 and {(j.ac, j.ef) for j in judges} == {(1, 1), (1, 0), (0, 0), (0, 1)}
    levels = [sum(j.level == level for j in judges) for level in range(1, 6)]
    assert max(levels) - min(levels) <= 1 and min(levels) >= 3
