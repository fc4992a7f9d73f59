"""A ``--config`` value that names a shipped preset instead of a file.

Until the presets get their own loader (issue 21), the shipped presets are the YAML files in
``model_adapters/presets/``; ``config_location`` turns ``paper-qwen3-judge-flux2-max`` (or
``…yaml``) into that file, and leaves an existing path alone.
"""

from __future__ import annotations

from pathlib import Path

import model_adapters
from edct_task.core.errors import ConfigError

PRESET_DIR = Path(model_adapters.__file__).parent / "presets"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def config_location(value: str) -> Path:
    """The config file ``value`` names: a path, or a shipped preset's name."""
    path = Path(value)
    if path.is_file():
        return path
    name = path.name.removesuffix(".yaml")
    candidate = PRESET_DIR / f"{name}.yaml"
    if path.parent == Path(".") and candidate.is_file():
        return candidate
    raise ConfigError(
        f"--config {value}: no such file, and no shipped preset of that name "
        f"(presets: {', '.join(preset_names())})"
    )
