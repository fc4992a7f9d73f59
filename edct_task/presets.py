"""The shipped run-config presets: named YAML files installed with the package.

``load_preset(name_or_path)`` is the one way to read a preset or a config file: a shipped
preset's name (``paper-qwen3-judge-flux2-max``, with or without ``.yaml``) or the path of any
YAML file, returned as a validated ``RunConfig``. ``edct run --config``, ``edct presets`` and
``edct estimate`` all go through it.

The files live in ``model_adapters/presets/`` (package data, so they are in the wheel). Presets
run on the built benchmark: ``data: {source: dataset}`` without a ``path``, so the dataset is
``$EDCT_BENCH_DATA`` (``edct build-bench``).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from edct_task.config import MAX_CONFIG_BYTES, RunConfig, config_from_dict, load_config
from edct_task.core.errors import ConfigError
from edct_task.core.inputs import InputFileError, read_yaml

PRESET_PACKAGE = "model_adapters"
PRESET_FOLDER = "presets"
SUFFIX = ".yaml"


def preset_dir() -> Path:
    """The folder of the shipped presets (inside the installed package)."""
    return Path(str(resources.files(PRESET_PACKAGE) / PRESET_FOLDER))


def preset_names() -> list[str]:
    """The shipped presets' names, sorted (file names without ``.yaml``)."""
    return sorted(p.name[: -len(SUFFIX)] for p in preset_dir().glob(f"*{SUFFIX}"))


def preset_path(name_or_path: str | Path) -> Path:
    """The file ``name_or_path`` names: an existing file, else a shipped preset of that name.

    Raises
    ------
    ConfigError
        Neither a file nor a preset; the message lists the presets.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    name = str(name_or_path)
    name = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    if "/" not in name and name in preset_names():
        return preset_dir() / f"{name}{SUFFIX}"
    raise ConfigError(
        f"config file {name_or_path} does not exist, and it is not a shipped preset "
        f"(presets: {', '.join(preset_names())}; `edct presets` lists them)"
    )


def preset_text(name_or_path: str | Path) -> str:
    """The YAML text of a preset or config file, as shipped (comments included)."""
    return preset_path(name_or_path).read_text(encoding="utf-8")


def preset_description(name_or_path: str | Path) -> str:
    """The first sentence of the preset's leading comment, as one line."""
    lines: list[str] = []
    for line in preset_text(name_or_path).splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text:
            if lines:
                break
            continue
        lines.append(text)
    text = " ".join(lines)
    return text.split(". ", 1)[0].rstrip(".") + "." if text else ""


def preset_raw(name_or_path: str | Path) -> dict[str, Any]:
    """The preset's YAML as a mapping (not validated; anchors resolved)."""
    path = preset_path(name_or_path)
    try:  # the one YAML reader: bounded, YAML 1.2 booleans (core.inputs.load_yaml)
        raw = read_yaml(path, MAX_CONFIG_BYTES) or {}
    except InputFileError as exc:
        raise ConfigError(f"config file {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return raw


def load_preset(
    name_or_path: str | Path, overrides: list[str] | None = None, flags: Mapping[str, str] | None = None
) -> RunConfig:
    """A shipped preset (by name) or a YAML config file (by path) as a validated ``RunConfig``,
    with ``dotted.key=value`` overrides applied (``flags``: ``config.config_from_dict``). Nothing is
    built and no model is contacted."""
    path = Path(name_or_path)
    if path.is_file():
        return load_config(path, overrides, flags)
    return config_from_dict(preset_raw(name_or_path), overrides, flags)
