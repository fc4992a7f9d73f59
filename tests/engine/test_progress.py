"""Progress without a terminal: a heartbeat every ``every`` seconds whether or not a call finished,
with the run's name, elapsed time, samples done/total with an ETA, and done/issued per stage."""

from __future__ import annotations

import io
import re
from pathlib import Path

import yaml
from support.hang_guard import wait_for

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.engine.dispatch import Progress, status_line


def test_status_line() -> None:
    line = status_line("my-run", 125.0, 40, 300, {"target": (120, 130), "judge": (60, 64)})
    assert line == "edct: my-run 2m05s: samples 40/300, ETA 13m32s; target 120/130, judge 60/64"
    assert status_line("r", 3.0, 0, 10, {}) == "edct: r 0m03s: samples 0/10, ETA –"
    assert status_line("", 3725.0, 1, None, {"edit": (0, 2)}) == "edct: 1h02m05s; edit 0/2"


def test_the_heartbeat_prints_while_nothing_finishes() -> None:
    stream = io.StringIO()  # not a terminal
    now = {"t": 0.0}
    progress = Progress(stream=stream, every=0.05, name="batch-11min", clock=lambda: now["t"])
    progress.expect(10)
    for _ in range(3):
        progress.issued("target")
    now["t"] = 660.0  # an 11-minute batch: no call has finished
    wait_for(lambda: stream.getvalue().count("\n") >= 2, 10)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2
    assert lines[-1] == "edct: batch-11min 11m00s: samples 0/10, ETA –; target 0/3"
    for _ in range(4):
        progress.answered("target", "call", 1.0, "k")
    for _ in range(5):
        progress.sample_done()
    now["t"] = 1000.0
    progress.close()
    assert (
        stream.getvalue().splitlines()[-1] == "edct: batch-11min 16m40s: samples 5/10, ETA 16m40s; target 4/3"
    )


def test_edct_run_without_a_terminal_ends_with_a_named_progress_line(tmp_path: Path, capsys) -> None:
    raw = calibration_config("faithful", n=4, output_dir=tmp_path / "heartbeat-run").model_dump(mode="json")
    raw.update(progress=True, bootstrap_resamples=200)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", "--config", str(path)]) == 0
    last = [x for x in capsys.readouterr().err.splitlines() if x.startswith("edct: heartbeat-run")][-1]
    assert re.fullmatch(r"edct: heartbeat-run \d+m\d\ds: samples 4/4, ETA 0m00s; .*target \d+/\d+.*", last), (
        last
    )
