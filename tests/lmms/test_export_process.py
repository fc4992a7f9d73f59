"""`edct run --model`'s export in its own process: started with the run, stopped with it, one line
when it fails, and the lmms-eval imports it saves the run from really are not in the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.hang_guard import hang_limit

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.lmms.export import ExportFailed, ExportProcess


def test_the_export_process_is_stopped_with_the_run() -> None:
    exporter = ExportProcess()
    exporter.close()  # never started: nothing to stop
    exporter.start()
    exporter.start()  # one process per run
    proc = exporter._proc
    assert proc is not None and proc.poll() is None
    exporter.close()
    assert proc.poll() is not None
    exporter.close()


@pytest.mark.slow
def test_a_failed_export_is_one_line_naming_why(tmp_path: Path) -> None:
    with pytest.raises(ExportFailed) as failed:
        ExportProcess().export(
            tmp_path / "gone", tmp_path / "lmms", tasks="edct_calibration", log_samples=True
        )
    line = str(failed.value)
    assert "\n" not in line and line.startswith(f"lmms-eval's export of {tmp_path / 'gone'}")
    assert "failed: RunReadError: " in line and "does not exist" in line
    assert not (tmp_path / "lmms").exists()


def test_an_unwritable_output_path_stops_the_run_before_it_starts(tmp_path: Path, capsys) -> None:
    raw = calibration_config(n=3, output_dir=tmp_path / "unused").model_dump(mode="json")
    raw["progress"] = False
    config = tmp_path / "edct.yaml"
    config.write_text(yaml.safe_dump(raw))
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where lmms-eval's results folder should go")
    out = tmp_path / "run"
    argv = ["run", "--model", "edct_reference", "--model_args", "behavior=faithful", "--tasks"]
    argv += ["edct_calibration", "--limit", "3", "--config", str(config), "--no-progress"]
    rc = main([*argv, "--output", str(out), "--output_path", str(blocker / "lmms")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"edct: configuration error: the lmms-eval results folder {blocker / 'lmms'} is not writable "
        "(Not a directory); choose another folder (--output_path)"
    ]
    assert not (out / "results.json").exists()


@pytest.mark.slow
def test_the_model_registry_leaves_lmms_evals_task_index_for_later() -> None:
    """``import lmms_eval.models`` (an lmms-eval target's build) does not import ``lmms_eval.tasks``
    (seconds of evaluate and datasets); importing it later still gets the task folder."""
    code = (
        "import sys, lmms_eval.models\n"
        "assert 'lmms_eval.tasks' not in sys.modules, 'the model registry imported the task index'\n"
        "from lmms_eval.tasks import TaskManager\n"
        "print(sorted(t for t in TaskManager('WARNING').all_tasks if t.startswith('edct_')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=hang_limit(300)
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "'edct_bench'" in proc.stdout and "'edct_calibration'" in proc.stdout
