"""The shipped configuration presets: installed with the package, listed by ``edct presets``,
loadable by name, run on the built benchmark, and their model roles build with our backends."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.backends import build

from edct_task.cli.main import main
from edct_task.core.errors import ConfigError
from edct_task.presets import load_preset, preset_dir, preset_names, preset_path
from model_adapters import diffusers_editor

REPO = Path(__file__).parents[2]
KINDS = {"target": "target", "extractor": "text", "judge": "text", "edit_parser": "text", "editor": "editor"}
PAPER = {"paper-qwen3-judge-flux2-max", "paper-gpt52-judge-gemini3-image", "local-vllm-cluster"}


def test_there_are_presets_for_the_paper_setups_and_one_80gb_gpu() -> None:
    assert PAPER | {"open-models-one-gpu-80gb"} <= set(preset_names())
    assert preset_dir() == REPO / "model_adapters" / "presets"


@pytest.mark.parametrize("name", preset_names())
def test_preset_runs_on_the_built_benchmark_and_its_roles_build(name, monkeypatch) -> None:
    for var in ("OPENROUTER_API_KEY", "BFL_API_KEY", "MOONDREAM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(var, "placeholder-for-the-test")
    config = load_preset(name)
    assert load_preset(f"{name}.yaml") == config == load_preset(preset_path(name))
    # the built benchmark, from $EDCT_BENCH_DATA: never the synthetic calibration world
    assert config.data.source == "dataset" and config.data.path is None
    assert config.protocol.max_new_tokens == 4096 and config.protocol.graded_max_new_tokens == 8192
    for role, spec in config.role_specs().items():
        if role not in KINDS:
            continue
        if spec.backend == "diffusers":  # building would load the weights: check the options only
            diffusers_editor.DiffusersOptions.model_validate(spec.options)
            continue
        backend = build(KINDS[role], spec.backend, spec.options)
        assert "placeholder" not in repr(backend.identity())


def test_the_one_gpu_preset_uses_open_models_only() -> None:
    config = load_preset("open-models-one-gpu-80gb")
    specs = config.role_specs()
    assert specs["target"].options["model"].startswith("Qwen/Qwen3-VL")
    assert specs["editor"].backend == "diffusers" and specs["detector"].backend == "owlv2"
    assert specs["detector"].options["segmenter"]["backend"] == "sam2"
    for spec in specs.values():  # local servers only, no key anywhere
        assert "api_key_env" not in spec.options
        assert spec.options.get("base_url", "http://127.0.0.1").startswith("http://127.0.0.1")


def test_load_preset_takes_overrides_and_paths(tmp_path) -> None:
    config = load_preset("paper-qwen3-judge-flux2-max", ["protocol.k=1", "data.path=/data/bench"])
    assert config.protocol.k == 1 and config.data.path == "/data/bench"
    copy = tmp_path / "mine.yaml"
    copy.write_text(preset_path("local-vllm-cluster").read_text().replace("k: 2", "k: 3"))
    assert load_preset(copy).protocol.k == 3
    with pytest.raises(ConfigError, match=r"does not exist, and it is not a shipped preset.*paper-qwen3"):
        load_preset("paper-qwen3")


def test_edct_presets_lists_and_shows(capsys) -> None:
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in preset_names():
        assert any(line.startswith(name + " ") and len(line) > len(name) + 10 for line in out.splitlines())
    assert main(["presets", "--show", "open-models-one-gpu-80gb"]) == 0
    shown = capsys.readouterr().out
    assert preset_path("open-models-one-gpu-80gb").read_text() in shown
    assert main(["presets", "--show", "no-such-preset"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no-such-preset" in err


def test_run_with_a_preset_name_and_no_data_stops_at_once_without_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("EDCT_BENCH_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    for var in ("OPENROUTER_API_KEY", "BFL_API_KEY", "MOONDREAM_API_KEY"):
        monkeypatch.setenv(var, "placeholder-for-the-test")
    rc = main(["run", "--config", "paper-qwen3-judge-flux2-max", "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "EDCT_BENCH_DATA" in err and "edct build-bench" in err
    assert list(tmp_path.iterdir()) == []  # neither the output folder nor an empty cache folder


@pytest.mark.slow
def test_the_wheel_ships_every_preset(tmp_path) -> None:
    import importlib.util

    if importlib.util.find_spec("setuptools") is None:  # the build backend, used without isolation
        pytest.skip("setuptools is not installed in this environment (pip install setuptools)")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for package in ("edct_task", "model_adapters", "verification", "task_configs"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", "dist", "."],
        cwd=src,
        check=True,
        capture_output=True,
    )
    (wheel,) = (src / "dist").glob("*.whl")
    shipped = {Path(n).name[: -len(".yaml")] for n in zipfile.ZipFile(wheel).namelist() if "/presets/" in n}
    assert shipped == set(preset_names())
