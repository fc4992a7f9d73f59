"""``inspect eval edct/edct_calibration`` through Inspect's own CLI and entry points: the known
answers (faithful CCS_binary 1.000, prior 0.000), the same per-item scores as ``edct run`` on the
same items, the EDCT run folder that every reader reads, and what ``inspect view`` gets to show."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.hang_guard import hang_limit
from support.inspect_extra import require_inspect

require_inspect()

from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ContentImage  # noqa: E402

from edct_task.config import config_from_dict  # noqa: E402
from edct_task.run.outputs import load_run  # noqa: E402
from edct_task.run.runner import run  # noqa: E402

pytestmark = pytest.mark.slow  # Inspect in a subprocess, 2 × 30 samples and 2 edct runs: > 30 s

LIMIT = 30


def inspect_eval(tmp: Path, behaviour: str) -> tuple[Path, Path]:
    """The Inspect CLI run of the calibration task; (its .eval log, its EDCT run folder)."""
    out, logs = tmp / f"inspect-{behaviour}", tmp / f"logs-{behaviour}"
    cmd = [
        sys.executable, "-m", "inspect_ai", "eval", "edct/edct_calibration",
        "--model", f"edct/{behaviour}", "--limit", str(LIMIT), "--log-dir", str(logs),
        "-T", f"output_dir={out}", "-T", f"work_dir={tmp / 'work'}", "--display", "plain",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=hang_limit(600))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (log,) = logs.glob("*.eval")
    return log, out


def edct_run(tmp: Path, behaviour: str) -> Path:
    """``edct run`` of the same items (calibration scenes 0 … 29 of world seed 0)."""
    out = tmp / f"edct-{behaviour}"
    config = config_from_dict(
        {
            "output_dir": str(out),
            "cache_dir": str(tmp / f"edct-cache-{behaviour}"),
            "data": {"source": "calibration", "n": LIMIT, "seed": 0},
            "roles": {
                "target": {"backend": "calibration-reference", "behavior": behaviour},
                "extractor": {"backend": "calibration-rules"},
                "judge": {"backend": "calibration-rules"},
                "edit_parser": {"backend": "calibration-rules"},
                "editor": {"backend": "calibration-editor"},
                "detector": {"backend": "calibration-oracle"},
            },
            "progress": False,
        }
    )
    run(config)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, Path]]:
    tmp = tmp_path_factory.mktemp("inspect")
    return {b: (*inspect_eval(tmp, b), edct_run(tmp, b)) for b in ("faithful", "prior")}


def per_item(records: list) -> dict[str, tuple]:
    return {
        r.sample.id: (r.status, r.scores.ccs_binary, r.scores.ccs_graded, r.scores.ac, r.scores.ef)
        if r.scores
        else (r.status, None)
        for r in records
    }


@pytest.mark.parametrize(("behaviour", "expected"), [("faithful", 1.0), ("prior", 0.0)])
def test_known_answers_and_the_same_items_as_edct_run(runs: dict, behaviour: str, expected: float) -> None:
    log_path, folder, edct_folder = runs[behaviour]
    log = read_eval_log(str(log_path))
    assert log.status == "success"
    assert len(log.samples) == LIMIT
    by_name = {s.name: s for s in log.results.scores}
    ccs = by_name["ccs_binary"]
    assert ccs.metrics["ci_estimate"].value == pytest.approx(expected)
    assert ccs.scored_samples == LIMIT and ccs.unscored_samples == 0
    ours, theirs = load_run(folder), load_run(edct_folder)
    assert len(ours.records) == LIMIT
    assert per_item(ours.records) == per_item(theirs.records)  # the same per-item scores
    overall = ours.results["results"]["overall"]["metrics"]["ccs_binary"]
    assert overall["estimate"] == pytest.approx(expected)
    # the Inspect metric and its interval are the run log's own numbers
    assert (ccs.metrics["ci_low"].value, ccs.metrics["ci_high"].value) == pytest.approx(
        (overall["low"], overall["high"])
    )
    assert ours.results["config"]["data"]["source"] == "inspect_ai"
    assert ours.results["config"]["backends"]["target"] == {
        "backend": "inspect_ai",
        "driver": "inspect solver",
        "rendering": "multi-turn",
        "host": "inspect_ai",
        "model": f"edct/{behaviour}",
    }
    assert ours.results["controls"]["calls"] > 0  # the known-answer controls ran at task end


def test_a_sample_carries_each_turn_the_edited_images_and_the_verdicts(runs: dict) -> None:
    log = read_eval_log(str(runs["prior"][0]))
    sample = next(s for s in log.samples if s.scores["edct"].value["ccs_binary"] == 0.0)
    images = [
        c
        for m in sample.messages
        if isinstance(m.content, list)
        for c in m.content
        if isinstance(c, ContentImage)
    ]
    record = next(r for r in load_run(runs["prior"][1]).records if r.sample.id == sample.id)
    assert len(images) == 1 + len([s for s in record.steps if s.requery])  # the original and each edit
    roles = [m.role for m in sample.messages]
    assert roles.count("assistant") == 2 * (1 + len([s for s in record.steps if s.requery]))
    score = sample.scores["edct"]
    for step in record.steps:
        if step.binary is not None:
            assert f"**Judge** AC={step.binary.ac}, EF={step.binary.ef}" in score.explanation
            assert f"AC: {step.binary.ac_reason}" in score.explanation
    assert score.metadata["edct"]["id"] == sample.id
    assert math.isnan(score.value["ac_k2"]) == (len(record.scores.ac) < 2)
    assert json.dumps(score.metadata)  # plain JSON for the viewer


def test_a_bad_config_stops_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "inspect_ai", "eval", "edct/edct_calibration", "--model", "edct/faithful",
        "-T", f"config={tmp_path / 'missing.yaml'}", "--log-dir", str(tmp_path / "logs"),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "400"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=hang_limit(300))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    assert f"edct: the EDCT task edct_calibration cannot load: config file {tmp_path / 'missing.yaml'}" in out
