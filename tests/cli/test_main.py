"""The ``edct`` command line, called in-process."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.run import runner


def test_run_from_a_yaml_file_with_overrides(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg = calibration_config("prior", n=6, output_dir=tmp_path / "r").model_dump(mode="json")
    cfg["progress"] = False
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["run", "--config", str(path), "--set", "protocol.k=1"]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["config"]["protocol"]["k"] == 1
    assert results["results"]["overall"]["metrics"]["ac_k2"]["n"] == 0
    assert results["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] == 0.0


def test_configuration_errors_exit_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("roles:\n  target: {backend: calibration-reference}\n")
    assert main(["run", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "extractor" in err and "judge" in err


def test_a_cache_written_with_png_byte_image_ids_stops_the_run_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Schema 1 named images by their PNG bytes; its keys cannot be found by this version. The
    # run must stop before any backend is built, with one message, instead of silently paying
    # for every call again.
    cache = tmp_path / "old-cache"
    cache.mkdir()
    with sqlite3.connect(cache / "stages.sqlite") as conn:
        conn.execute("PRAGMA user_version=1")
    cfg = calibration_config("faithful", n=6, output_dir=tmp_path / "r").model_dump(mode="json")
    cfg.update(progress=False, cache_dir=str(cache))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))

    def no_backends(*args: object) -> None:
        raise AssertionError("a backend was built before the cache was checked")

    monkeypatch.setattr(runner, "build_roles", no_backends)
    assert main(["run", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"edct: cache error: cache folder {cache} has schema version 1")
    assert "Delete the folder to rebuild it, or set cache_dir to a new folder" in err
    assert not (tmp_path / "r" / "results.json").exists()


def test_stability_gives_mean_and_sample_sd(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    values = [0.55, 0.60, 0.62]
    for i, v in enumerate(values):
        metrics = {
            name: {"estimate": v, "low": v, "high": v, "n": 10, "method": "x"}
            for name in ("ccs_binary", "ccs_graded", "ac_k1", "ac_k2", "ef_k1", "ef_k2")
        }
        from support.edct_runs import records, write_edct_run

        results = write_edct_run(tmp_path / f"r{i}", records(1.0, n=2), seed=i)  # a real run folder
        results["results"] = {"overall": {"metrics": metrics}}
        (tmp_path / f"r{i}" / "results.json").write_text(json.dumps(results))
    assert main(["stability", *(str(tmp_path / f"r{i}") for i in range(3)), "--json"]) == 0
    table = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert table["ccs_binary"]["mean"] == pytest.approx(np.mean(values))
    assert table["ccs_binary"]["sd"] == pytest.approx(np.std(values, ddof=1))
    assert table["ccs_binary"]["runs"] == 3
    assert main(["stability", str(tmp_path / "r0")]) == 2


def test_serve_without_vllm_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("EDCT_VLLM_PYTHON", sys.executable)  # the main environment has no vllm
    assert main(["serve", "target", "Qwen/Qwen3-VL-8B-Instruct", "--port", "8011"]) == 2
    err = capsys.readouterr().err
    assert "cannot import vllm" in err and "pip install vllm" in err
    with pytest.raises(SystemExit) as exc:
        main(["serve", "editor", "some-model"])
    assert exc.value.code == 2


def test_backends_lists_every_role_and_the_segmenters(capsys: pytest.CaptureFixture) -> None:
    assert main(["backends", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert list(table) == ["target", "extractor", "judge", "edit_parser", "editor", "detector", "segmenter"]
    assert {"box", "grabcut", "sam2"} <= set(table["segmenter"])
    assert "openai-chat" in table["judge"] and "opencv-cascade" in table["detector"]


def test_the_score_table_fits_an_80_column_terminal(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert (
        main(["demo", "-n", "6", "--behavior", "mixed:0.5", "--no-progress", "--output", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert "CCS_binary" in out and "EF k=2" in out
    assert max(len(line) for line in out.splitlines() if not line.startswith("wrote ")) <= 80
