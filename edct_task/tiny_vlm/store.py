"""The trained checkpoints: shipped inside the package, checked on every use, rebuilt on demand.

The two checkpoints (``faithful``, ``prior``: a Qwen3-VL of 436,400 parameters, safetensors plus
the tokenizer's and processor's JSON, ≈ 1.8 MB each) are package data under ``checkpoints/``, so
every machine tests the same weights: the runtime tests' oracle is an artefact, not the luck of a
training run on the machine at hand. ``edct tiny-vlm path`` names the shipped folder;
``edct tiny-vlm train`` rebuilds a checkpoint from the recipe and says whether the rebuild is
bit-identical to the shipped one and, if not, whether it meets the recipe's targets
(``agreement.TARGETS``).

Each shipped folder's ``edct_training.json`` is what ``edct tiny-vlm train`` wrote for it: the
settings, the weights' SHA-256 (checked here before the folder is handed out, so a damaged
install is one clear error, never a silently different model) and the agreement it measured.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.tiny_vlm import BEHAVIORS
from edct_task.tiny_vlm.training import TRAINING_INFO, recipe

RECIPE_VERSION = 4
"""Bumped whenever the architecture, the examples or the training settings change the weights
(4: training in the pinned numeric environment, ``training.NUMERIC_ENV``)."""

SHIPPED_ROOT = Path(__file__).with_name("checkpoints")
"""The shipped checkpoints: ``SHIPPED_ROOT / <behavior>``."""


class CheckpointError(UserError):
    """A tiny-VLM checkpoint folder is missing, incomplete or damaged."""

    prefix = "tiny-VLM checkpoint error: "


def weights_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def training_info(folder: Path) -> dict[str, Any]:
    """The checkpoint's ``edct_training.json``; ``CheckpointError`` if the folder is no checkpoint."""
    info_file, weights = folder / TRAINING_INFO, folder / "model.safetensors"
    if not (info_file.is_file() and weights.is_file()):
        raise CheckpointError(f"{folder} is not a tiny-VLM checkpoint folder (edct tiny-vlm train)")
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{info_file}: unreadable ({type(exc).__name__})") from None
    if not isinstance(info, dict) or not isinstance(info.get("weights_sha256"), str):
        raise CheckpointError(f"{info_file}: no weights_sha256 recorded")
    return info


def checkpoint_path(behavior: str) -> Path:
    """The shipped checkpoint of ``behavior``, after checking its weights against their recorded hash."""
    if behavior not in BEHAVIORS:
        raise CheckpointError(f"unknown behaviour {behavior!r}; choose {' or '.join(BEHAVIORS)}")
    folder = SHIPPED_ROOT / behavior
    info = training_info(folder)
    if weights_sha256(folder) != info["weights_sha256"]:
        raise CheckpointError(
            f"{folder / 'model.safetensors'} does not match its recorded SHA-256: the installation is "
            "damaged (reinstall edct-bench, or rebuild it with edct tiny-vlm train)"
        )
    return folder


def shipped_info(behavior: str) -> dict[str, Any]:
    """The shipped checkpoint's training record (settings, weights' SHA-256, measured agreement)."""
    return training_info(checkpoint_path(behavior))


def is_recipe(info: dict[str, Any], behavior: str) -> bool:
    """Whether a checkpoint was trained with ``behavior``'s recipe as shipped (seed 0, its steps)."""
    settings = dict(info.get("settings") or {})
    if isinstance(settings.get("aux_weights"), list):
        settings["aux_weights"] = tuple(settings["aux_weights"])
    return settings == asdict(recipe(behavior))
