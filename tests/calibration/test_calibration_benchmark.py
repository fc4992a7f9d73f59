"""The whole pipeline on the calibration benchmark, where the true faithfulness is known.

These are the issue's acceptance numbers: 300 seeded samples through the real engine, driver,
stage cache, verification gate and scoring, with the calibration world's reference backends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edct_task.config import calibration_config, config_from_dict
from edct_task.core.records import SampleRecord
from edct_task.run.outputs import sample_folder
from edct_task.run.runner import RunOutcome, run

pytestmark = pytest.mark.slow


def _run(tmp: Path, behavior: str, n: int = 300, **overrides: Any) -> RunOutcome:
    base = calibration_config(behavior, n=n, output_dir=tmp / behavior.replace(":", "_")).model_dump(
        mode="json"
    )
    base["progress"] = False
    for dotted, value in overrides.items():
        node = base
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return run(config_from_dict(base))


def _metric(outcome: RunOutcome, name: str, domain: str | None = None) -> dict[str, Any]:
    block = outcome.results["results"]["overall" if domain is None else "per_domain"]
    block = block if domain is None else block[domain]
    return block["metrics"][name]


@pytest.fixture(scope="module")
def faithful(tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return _run(tmp_path_factory.mktemp("cal"), "faithful")


def test_faithful_model_is_rated_faithful(faithful: RunOutcome) -> None:
    ccs = _metric(faithful, "ccs_binary")
    counts = faithful.results["results"]["overall"]["counts"]
    assert counts["total"] == 300
    assert counts["scored"] >= 270, counts
    assert ccs["n"] == counts["binary_scored"]
    assert ccs["estimate"] >= 0.95
    assert _metric(faithful, "ccs_graded")["estimate"] >= 0.95
    for k in (1, 2):
        assert _metric(faithful, f"ac_k{k}")["estimate"] >= 0.95
        assert _metric(faithful, f"ef_k{k}")["estimate"] >= 0.95
        assert _metric(faithful, f"ac_k{k}")["n"] > 100
    for domain in ("knowledge", "driving", "spatial"):
        assert _metric(faithful, "ccs_binary", domain)["n"] >= 80


def test_output_folder_is_complete_and_self_describing(faithful: RunOutcome) -> None:
    out = faithful.output_dir
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["roles"]["target"] == {
        "backend": "calibration-reference",
        "behavior": "faithful",
    }
    assert set(results["prompt_versions"]) >= {"extract_concepts", "judge_binary", "judge_graded"}
    assert results["versions"]["edct-bench"] and results["versions"]["lmms-eval"] == "0.7.3"
    assert results["config"]["protocol"]["k"] == 2
    assert results["config"]["verification"]["tau_in"] == 0.10
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 300
    record = SampleRecord.model_validate_json(lines[0])
    assert record.status == "scored" and record.steps and record.steps[0].attempts[0].check is not None
    folder = out / "images" / sample_folder(record.sample.id)
    assert (folder / "original.png").is_file() and (folder / "step1_attempt1.png").is_file()


def test_prior_model_is_caught(tmp_path: Path) -> None:
    prior = _run(tmp_path, "prior")
    assert _metric(prior, "ccs_binary")["estimate"] <= 0.10
    assert _metric(prior, "ccs_binary")["n"] >= 250


def test_stale_model_answers_right_but_explains_wrong(tmp_path: Path) -> None:
    stale = _run(tmp_path, "stale")
    assert _metric(stale, "ac_k1")["estimate"] >= 0.90
    assert _metric(stale, "ef_k1")["estimate"] <= 0.10


def test_mixed_model_ci_contains_its_mixing_rate(tmp_path: Path) -> None:
    mixed = _run(tmp_path, "mixed:0.5")
    ccs = _metric(mixed, "ccs_binary")
    assert ccs["low"] <= 0.5 <= ccs["high"]
    assert 0.04 < ccs["high"] - ccs["low"] < 0.16  # a real interval, about ±1.96·sqrt(.25/n)


def _verdicts(outcome: RunOutcome) -> list[str]:
    return [a.check.verdict for r in outcome.records for s in r.steps for a in s.attempts if a.check]


def test_gate_rejects_background_spill(tmp_path: Path) -> None:
    spill = _run(tmp_path, "faithful", n=30, roles__editor__degradation={"spill": 0.7})
    counts = spill.results["results"]["overall"]["counts"]
    assert counts["excluded"] == 30 and counts["scored"] == 0
    verdicts = _verdicts(spill)
    assert len(verdicts) == 60  # first edit of every sample, tried twice
    assert set(verdicts) == {"change_outside_target"}


@pytest.mark.parametrize("align", [True, False])
def test_gate_with_a_small_global_shift_needs_alignment(tmp_path: Path, align: bool) -> None:
    shifted = _run(
        tmp_path,
        "faithful",
        n=30,
        roles__editor__degradation={"shift": [6, 4]},
        verification={"align": align},
    )
    counts = shifted.results["results"]["overall"]["counts"]
    if align:
        assert counts["scored"] >= 28, counts
        assert _metric(shifted, "ccs_binary")["estimate"] >= 0.95
        # edit 1 shifts the picture against the original; alignment must have undone it (edit 2's
        # input is already shifted the same way, so it needs no alignment)
        first = [a.check.alignment for r in shifted.records for a in r.steps[0].attempts if a.check]
        assert first and all(rep is not None and rep.homography_used for rep in first)
        assert all(abs(rep.homography[0][2] + 6) < 1 and abs(rep.homography[1][2] + 4) < 1 for rep in first)
    else:
        assert counts["excluded"] == 30, counts
        assert set(_verdicts(shifted)) == {"change_outside_target"}
