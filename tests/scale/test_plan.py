"""``edct estimate --sweep``: each job predicted by the run estimator for its slice, the job list
placed on N workers."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.scale.plan import schedule, slice_items


def test_jobs_go_to_the_first_free_worker() -> None:
    assert schedule([10, 10, 10, 10], 1) == 40
    assert schedule([10, 10, 10, 10], 2) == 20
    assert schedule([10, 10, 10, 10], 4) == schedule([10, 10, 10, 10], 8) == 10
    assert schedule([30, 10, 10, 10], 2) == 30  # the long job on one worker, three short on the other
    assert schedule([], 3) == 0
    assert slice_items(300, 4) == 75 and slice_items(10, 4) == 3


def test_a_sweep_on_n_workers(tmp_path: Path, capsys) -> None:
    raw = calibration_config("faithful", n=40).model_dump(mode="json")
    raw.pop("output_dir")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(raw))
    models = {m: {"backend": "calibration-reference", "behavior": m} for m in ("faithful", "prior")}
    spec = {"configs": {"base": "base.yaml"}, "models": models, "seeds": [0, 1], "shards": 2}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    walls = {}
    for workers in (1, 2, 8):
        args = ["estimate", "--sweep", str(tmp_path / "sweep.yaml"), "--workers", str(workers)]
        assert main([*args, "--latency", "target=2", "--latency", "text=1", "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert len(got["jobs"]) == 8 and all(w > 0 for w in got["jobs"].values())
        walls[workers] = got["wall_s"]
    per_job = walls[8]  # 8 equal jobs on 8 workers: one job's time
    assert walls[1] == round(8 * per_job, 1) or abs(walls[1] - 8 * per_job) < 1
    assert abs(walls[2] - 4 * per_job) < 1
