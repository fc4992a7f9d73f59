"""Soak: 100 samples with seeded faults (undecodable images, a judge failing on some prompts) and
SIGKILLs at random moments, rerun until done: every sample ends recorded, and the samples that met
no fault score exactly as in the fault-free run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.calibration_dataset import scene_png, write_calibration_dataset

from edct_task.calibration import generate_samples
from edct_task.config import calibration_config

pytestmark = pytest.mark.slow
N = 100
SUPPORT = Path(__file__).resolve().parents[1] / "support"


def _config(tmp: Path, name: str, data: Path, judge: dict) -> Path:
    raw = calibration_config("mixed:0.5", n=N, output_dir=tmp / name).model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=500, data={"source": "dataset", "path": str(data)})
    raw["roles"]["judge"] = judge
    raw["roles"]["editor"]["latency_s"] = 0.01
    raw["limits"] = {"target_batch_size": 16, "text_concurrency": 4}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _cmd(config: Path) -> list[str]:
    return [
        sys.executable,
        str(SUPPORT / "faults.py"),
        "run",
        "--config",
        str(config),
        "--fail-on-unscored",
        "1",
    ]


def _records(out: Path) -> dict[str, dict]:
    lines = (out / "samples.jsonl").read_text().splitlines()
    return {r["sample"]["id"]: r for r in map(json.loads, lines)}


def test_seeded_faults_and_sigkills_end_with_every_sample_recorded(tmp_path: Path) -> None:
    rng = random.Random(7)
    broken = set(rng.sample(range(N), 5))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT.parent), os.environ.get("PYTHONPATH")])),
    }
    clean_data, faulty_data = tmp_path / "clean", tmp_path / "faulty"
    ids = write_calibration_dataset(clean_data, N)
    originals = generate_samples(n=N, seed=0)
    write_calibration_dataset(faulty_data, N, {i: scene_png(originals[i].image)[:200] for i in broken})

    clean_cfg = _config(tmp_path, "reference", clean_data, {"backend": "calibration-rules"})
    subprocess.run(_cmd(clean_cfg), env=env, check=True, capture_output=True, timeout=900)
    reference = _records(tmp_path / "reference")

    cfg = _config(tmp_path, "soak", faulty_data, {"backend": "flaky-judge", "rate": 0.05, "seed": 3})
    kills = 0
    for _ in range(20):
        proc = subprocess.Popen(_cmd(cfg), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kills < 3:
            time.sleep(rng.uniform(4.0, 10.0))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
        assert proc.wait(timeout=900) == 0, proc.stderr.read().decode()[-2000:]
        break
    assert kills >= 1, "no run was killed: the soak test did not exercise resume"
    records = _records(tmp_path / "soak")
    assert sorted(records) == sorted(ids)  # every sample recorded, none twice
    for i in broken:
        assert records[ids[i]]["status"] == "error" and "cannot be decoded" in records[ids[i]]["reason"]
    hit_by_judge = {sid for sid, r in records.items() if "rate_limited" in json.dumps(r)}
    assert hit_by_judge, "the flaky judge injected no fault"
    untouched = [sid for sid in ids if sid not in hit_by_judge and ids.index(sid) not in broken]
    assert len(untouched) >= 60
    for sid in untouched:
        assert records[sid]["scores"] == reference[sid]["scores"], sid
        assert records[sid]["status"] == reference[sid]["status"]
