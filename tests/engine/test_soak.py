"""Soak: 100 samples with seeded faults (undecodable images, a decompression bomb, a judge failing
on some prompts, target replies holding lone surrogates) and SIGKILLs at random moments (after a
seeded random share of the run's backend calls, so a fast or a busy machine kills alike), with
the stage cache damaged between runs (a corrupt entry, truncated cached images), rerun until done:
every sample ends recorded, and the samples that met no fault score exactly as in the fault-free
run."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.calibration_dataset import bomb_png, scene_png, write_calibration_dataset
from support.hang_guard import deadline, hang_limit

from edct_task.calibration import generate_samples
from edct_task.config import calibration_config

pytestmark = pytest.mark.slow
N = 100
SUPPORT = Path(__file__).resolve().parents[1] / "support"


def _config(
    tmp: Path, name: str, data: Path, judge: dict, target: dict | None = None, limit: int | None = None
) -> Path:
    raw = calibration_config("mixed:0.5", n=N, output_dir=tmp / name).model_dump(mode="json")
    data_section = {"source": "dataset", "path": str(data), **({"limit": limit} if limit else {})}
    raw.update(progress=False, bootstrap_resamples=500, data=data_section, call_log=str(_log(tmp, name)))
    raw["roles"]["judge"] = judge
    if target is not None:
        raw["roles"]["target"] = target
    raw["roles"]["editor"]["latency_s"] = 0.01
    raw["limits"] = {"target_batch_size": 16, "text_concurrency": 4}
    path = tmp / f"{name}{'-' + str(limit) if limit else ''}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _log(tmp: Path, name: str) -> Path:
    """The run's call log: a line per finished backend call, appended to by every run of ``name``."""
    return tmp / f"{name}.calls.jsonl"


def _calls(log: Path) -> int:
    return log.read_bytes().count(b"\n") if log.exists() else 0


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


def _damage_cache(cache: Path, rng: random.Random) -> list[str]:
    """One stored stage result overwritten with garbage and two cached images truncated."""
    done = []
    db = cache / "stages.sqlite"
    if db.is_file():
        conn = sqlite3.connect(db)
        try:
            row = conn.execute("SELECT key FROM entries ORDER BY key LIMIT 1").fetchone()
            if row is not None:
                conn.execute("UPDATE entries SET value = '{not json' WHERE key = ?", row)
                conn.commit()
                done.append("entry")
        finally:
            conn.close()
    pngs = sorted((cache / "images").rglob("*.png"))
    for p in rng.sample(pngs, min(2, len(pngs))):
        with p.open("r+b") as f:
            f.truncate(100)
        done.append("image")
    return done


def test_seeded_faults_and_sigkills_end_with_every_sample_recorded(tmp_path: Path) -> None:
    rng = random.Random(7)
    broken = set(rng.sample(range(N), 6))
    bomb = max(broken)
    broken.discard(bomb)
    path = os.pathsep.join(p for p in (str(SUPPORT.parent), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}
    clean_data, faulty_data = tmp_path / "clean", tmp_path / "faulty"
    ids = write_calibration_dataset(clean_data, N)
    originals = generate_samples(n=N, seed=0)
    write_calibration_dataset(
        faulty_data, N, {**{i: scene_png(originals[i].image)[:200] for i in broken}, bomb: bomb_png()}
    )

    clean_cfg = _config(tmp_path, "reference", clean_data, {"backend": "calibration-rules"})
    subprocess.run(_cmd(clean_cfg), env=env, check=True, capture_output=True, timeout=hang_limit(900))
    reference = _records(tmp_path / "reference")
    total = _calls(_log(tmp_path, "reference"))  # the backend calls of a whole run

    target = {"backend": "surrogate-target", "behavior": "mixed:0.5", "rate": 0.05, "seed": 5}
    cfg = _config(tmp_path, "soak", faulty_data, {"backend": "flaky-judge", "rate": 0.05, "seed": 3}, target)
    # a first run over 12 samples fills the cache; then one stored result is overwritten with
    # garbage and two cached images are truncated before the killed-and-resumed runs begin
    warm = _config(
        tmp_path, "soak", faulty_data, {"backend": "flaky-judge", "rate": 0.05, "seed": 3}, target, limit=12
    )
    subprocess.run(_cmd(warm), env=env, check=False, capture_output=True, timeout=hang_limit(900))
    kills, damaged = 0, _damage_cache(tmp_path / "soak" / "cache", rng)
    log = _log(tmp_path, "soak")
    for _ in range(20):
        kill_at = _calls(log) + round(rng.uniform(0.1, 0.25) * total)  # 3 kills leave a run to finish
        proc = subprocess.Popen(_cmd(cfg), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kills < 3:
            end = deadline(900)
            while proc.poll() is None and _calls(log) < kill_at and time.monotonic() < end:
                time.sleep(0.02)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
                damaged += _damage_cache(tmp_path / "soak" / "cache", rng)
                continue
        assert proc.wait(timeout=hang_limit(900)) == 0, proc.stderr.read().decode()[-2000:]
        break
    assert kills >= 1, "no run was killed: the soak test did not exercise resume"
    assert "entry" in damaged and "image" in damaged, damaged
    records = _records(tmp_path / "soak")
    assert sorted(records) == sorted(ids)  # every sample recorded, none twice
    for i in broken:
        assert records[ids[i]]["status"] == "error" and "cannot be decoded" in records[ids[i]]["reason"]
    assert records[ids[bomb]]["status"] == "error" and "image refused" in records[ids[bomb]]["reason"]
    hit_by_judge = {sid for sid, r in records.items() if "rate_limited" in json.dumps(r)}
    assert hit_by_judge, "the flaky judge injected no fault"
    surrogates = {sid for sid, r in records.items() if "\ufffd" in json.dumps(r, ensure_ascii=False)}
    assert surrogates, "the target injected no lone surrogate"
    (tmp_path / "soak" / "samples.jsonl").read_bytes().decode("utf-8")  # strict: all valid UTF-8
    faulty = hit_by_judge | surrogates | {ids[i] for i in (*broken, bomb)}
    untouched = [sid for sid in ids if sid not in faulty]
    assert len(untouched) >= 60
    for sid in untouched:
        assert records[sid]["scores"] == reference[sid]["scores"], sid
        assert records[sid]["status"] == reference[sid]["status"]
