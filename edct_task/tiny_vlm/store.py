"""Where the trained checkpoints live: a cache folder outside the repository, filled once.

Checkpoints are rebuilt, not committed: they are a few MB of binary weights that change whenever
the recipe changes, training is deterministic and takes minutes, and a cache folder keyed by the
recipe version makes every later call free. ``checkpoint_path`` trains a missing checkpoint under a
file lock (two processes asking at once train it once; the second waits and reuses it) into a
temporary folder that is renamed into place only when complete, so a killed training leaves no
half-written checkpoint behind.

The cache root is ``$EDCT_TINY_VLM_CACHE`` or ``~/.cache/edct-bench/tiny-vlm``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from edct_task.tiny_vlm import BEHAVIORS
from edct_task.tiny_vlm.training import TRAINING_INFO, recipe, train

RECIPE_VERSION = 3
"""Bumped whenever the architecture, the examples or the training settings change the weights."""

CACHE_ENV = "EDCT_TINY_VLM_CACHE"


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "edct-bench" / "tiny-vlm"


def checkpoint_dir(behavior: str, root: Path | None = None) -> Path:
    """The folder of ``behavior``'s checkpoint (it may not exist yet)."""
    if behavior not in BEHAVIORS:
        raise ValueError(f"unknown behaviour {behavior!r}; choose {' or '.join(BEHAVIORS)}")
    return (root or cache_root()) / f"v{RECIPE_VERSION}" / behavior


def is_complete(folder: Path) -> bool:
    return (folder / TRAINING_INFO).is_file() and (folder / "model.safetensors").is_file()


def checkpoint_path(
    behavior: str, *, root: Path | None = None, log: Callable[[str], None] = print
) -> tuple[Path, bool]:
    """``(folder, trained_now)``: ``behavior``'s checkpoint, trained first if it is not there."""
    from filelock import FileLock

    folder = checkpoint_dir(behavior, root)
    if is_complete(folder):
        return folder, False
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f".{behavior}.lock")):
        if is_complete(folder):  # trained by another process while we waited
            return folder, False
        partial = folder.parent / f".{behavior}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        log(f"training the {behavior} tiny VLM into {folder} (once; later calls reuse it)")
        train(partial, recipe(behavior), log=log)
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return folder, True
