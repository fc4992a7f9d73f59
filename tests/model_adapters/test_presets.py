"""The shipped configuration presets load, and their model roles build with our backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from edct_task.config import load_config
from model_adapters import diffusers_editor
from model_adapters.factories import FACTORIES

PRESETS = sorted((Path(__file__).parents[2] / "model_adapters" / "presets").glob("*.yaml"))
KINDS = {"target": "target", "extractor": "text", "judge": "text", "edit_parser": "text", "editor": "editor"}


def test_there_are_presets_for_the_paper_setups() -> None:
    names = {p.stem for p in PRESETS}
    assert {"paper-qwen3-judge-flux2-max", "paper-gpt52-judge-gemini3-image", "local-vllm-cluster"} <= names


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_preset_roles_build(preset, monkeypatch) -> None:
    for var in ("OPENROUTER_API_KEY", "BFL_API_KEY", "MOONDREAM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(var, "placeholder-for-the-test")
    config = load_config(preset)
    specs = config.role_specs()
    assert config.protocol.max_new_tokens == 4096 and config.protocol.graded_max_new_tokens == 8192
    for role, spec in specs.items():
        if role not in KINDS:
            continue
        if spec.backend == "diffusers":  # building would load the weights: check the options only
            assert set(spec.options) <= diffusers_editor.OPTIONS
            continue
        backend = FACTORIES[KINDS[role]][spec.backend](spec.options)
        assert "placeholder" not in repr(backend.identity())
