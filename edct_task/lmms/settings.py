"""What the lmms-eval hooks need besides lmms-eval's model: config, roles, stage cache, dispatcher.

Non-target roles come from an EDCT config file (``$EDCT_CONFIG``; default: the calibration
roles) and are validated when the task's documents are loaded. The fast path (``edct run
--model``) builds its own ``Settings`` with its target and passes it explicitly.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task import prompts
from edct_task.config import RunConfig, calibration_config
from edct_task.core.errors import ConfigError
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.driver import build_dispatcher
from edct_task.engine.handlers import PixelCache
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.stage_cache import CacheSchemaError, ImageStore, StageCache
from edct_task.roles import Roles, build_roles
from edct_task.run.workspace import check_writable

log = logging.getLogger(__name__)

ENV_CONFIG = "EDCT_CONFIG"
"""Path of an EDCT YAML config whose non-target roles, protocol and gate the lmms-eval task uses."""
ENV_WORK_DIR = "EDCT_WORK_DIR"
"""Folder for the stage cache and the content-addressed images (default: the config's cache dir)."""

DEFAULT_WORK_DIR = Path("runs/edct-lmms")


@dataclass
class Settings:
    """Everything the hooks need besides lmms-eval's model, built once per process."""

    config: RunConfig
    roles: Roles
    images: ImageStore
    cache: StageCache
    dispatcher: Dispatcher
    work_dir: Path
    pixels: PixelCache
    """Decoded images by ref, shared with the dispatcher's handlers (``PixelCache.put`` stores an
    image and keeps it decoded for the requests that read it next)."""

    @property
    def protocol(self) -> ProtocolConfig:
        return self.config.protocol

    def describe(self) -> dict[str, Any]:
        """What the results must state: roles (without target), protocol, gate, prompt versions."""
        roles = {r: s.as_dict() for r, s in self.config.role_specs().items() if r != "target"}
        return {
            "roles": roles,
            "protocol": self.protocol.model_dump(mode="json"),
            "verification": self.config.verification.model_dump(mode="json"),
            "prompt_versions": prompts.prompt_versions(),
            "config_file": os.environ.get(ENV_CONFIG) or None,
            "work_dir": str(self.work_dir),
        }

    def close(self) -> None:
        """Shut the pools, the stage cache and every backend down."""
        self.dispatcher.close()
        self.cache.close()
        self.roles.close()


_BUILT: dict[tuple[str | None, str | None], Settings] = {}
_BUILD_LOCK = threading.Lock()


def hook_config() -> RunConfig:
    """The EDCT config for the lmms-eval task: ``$EDCT_CONFIG`` or the calibration roles."""
    path = os.environ.get(ENV_CONFIG)
    if path:
        from edct_task.presets import load_preset

        return load_preset(path)  # a file, or a shipped preset's name
    return calibration_config(output_dir=DEFAULT_WORK_DIR)


def settings() -> Settings:
    """The settings of this process's environment (``$EDCT_CONFIG``, ``$EDCT_WORK_DIR``), built once
    per distinct environment and shared by every hook thread; fails early with a config message.

    lmms-eval's ``!function`` hooks receive no context, so this per-process memo is the one place
    they find their roles; it is keyed by the environment that selects them and never replaced
    (the fast path builds its own ``Settings`` and passes it explicitly).
    """
    key = (os.environ.get(ENV_CONFIG) or None, os.environ.get(ENV_WORK_DIR) or None)
    with _BUILD_LOCK:
        built = _BUILT.get(key)
        if built is None:
            built = _BUILT[key] = build_settings(hook_config())
        return built


def open_work_dir(config: RunConfig, work_dir: Path | None = None) -> tuple[Path, StageCache]:
    """The run's work folder (``work_dir``, else ``$EDCT_WORK_DIR``, else the config's cache dir),
    checked writable and announced, and its stage cache opened (a stale cache folder is refused
    here, before anything is built)."""
    where = ""
    if work_dir is None:
        env = os.environ.get(ENV_WORK_DIR)
        where = f" (${ENV_WORK_DIR})" if env else f" (set {ENV_WORK_DIR} to put them elsewhere)"
        work_dir = Path(env) if env else config.resolved_cache_dir
    work_dir = Path(work_dir).resolve()
    check_writable(work_dir, "cache folder")
    # announced: lmms-eval's own loop would otherwise fill ./runs/edct-lmms/cache without a word
    print(f"edct: stage cache and edited images in {work_dir}{where}", file=sys.stderr, flush=True)
    try:
        return work_dir, StageCache(work_dir)
    except CacheSchemaError as exc:
        raise ConfigError(str(exc)) from None


def build_settings(
    config: RunConfig,
    work_dir: Path | None = None,
    *,
    target: Any = None,
    run_name: str = "",
    opened: tuple[Path, StageCache] | None = None,
) -> Settings:
    """The stage cache first (``open_work_dir``, or ``opened``: what it returned, now owned by the
    settings), then the non-target roles."""
    work_dir, cache = opened if opened is not None else open_work_dir(config, work_dir)
    specs = {r: s for r, s in config.role_specs().items() if r != "target"}
    try:
        roles = build_roles(specs, require_target=False)
        roles.target = target
    except ConfigError as exc:
        cache.close()
        source = os.environ.get(ENV_CONFIG) or "the built-in calibration roles"
        raise ConfigError(
            f"EDCT roles for the lmms-eval task (from {source}, set ${ENV_CONFIG}): {exc}"
        ) from None
    protocol = config.protocol
    needed = rounds_needed(protocol)
    if needed > 12:
        log.warning(
            "k=%d needs %d target rounds; raise generation_kwargs.max_agentic_steps", protocol.k, needed
        )
    images = ImageStore(work_dir)
    pixels = PixelCache(images)
    dispatcher = build_dispatcher(
        roles,
        images,
        cache,
        protocol=protocol,
        gate=config.verification,
        limits=config.limits,
        progress=target is not None and config.progress,
        run_name=run_name,
        pixels=pixels,
    )
    return Settings(config, roles, images, cache, dispatcher, work_dir, pixels)


def rounds_needed(protocol: ProtocolConfig) -> int:
    """Target rounds of one sample: answer and why at baseline and after each of k edits."""
    return 2 * (protocol.k + 1)


def release() -> None:
    """Close and forget the settings of this process's environment (end of a run, tests)."""
    key = (os.environ.get(ENV_CONFIG) or None, os.environ.get(ENV_WORK_DIR) or None)
    with _BUILD_LOCK:
        built = _BUILT.pop(key, None)
    if built is not None:
        built.close()
