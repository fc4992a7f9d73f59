"""What the lmms-eval hooks need besides lmms-eval's model, built once per process.

Non-target roles come from an EDCT config file (``$EDCT_CONFIG``; default: the calibration
roles) and are built by the runner's composition root (``run.runner.compose``), so the call
log, the gate and the stage cache behave as in every other run. Each finished document is
appended to an ordinary EDCT run folder (``run.folder.RunFolder``: ``samples.jsonl``, ``images/``, and
``results.json`` once lmms-eval aggregates): ``$EDCT_OUTPUT_DIR``, else ``edct/`` inside
lmms-eval's ``--output_path``, else ``run/`` in the work folder (``$EDCT_WORK_DIR``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task import prompts
from edct_task.config import RunConfig, calibration_config
from edct_task.core.records import SINGLE_TURN_QUOTED
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.run.folder import RunFolder, open_host_run
from edct_task.run.log import RunData
from edct_task.run.runner import Engine
from edct_task.run.sharding import shard_from_env
from edct_task.run.workspace import check_writable
from model_adapters.secrets import is_secret_name

ENV_CONFIG = "EDCT_CONFIG"
"""Path of an EDCT YAML config whose non-target roles, protocol and gate the lmms-eval task uses."""
ENV_WORK_DIR = "EDCT_WORK_DIR"
"""Folder for the stage cache and the content-addressed images (default: the config's cache dir)."""
ENV_OUTPUT_DIR = "EDCT_OUTPUT_DIR"
"""The EDCT run folder of an lmms-eval run (default ``<--output_path>/edct``, else ``<work dir>/run``)."""

DEFAULT_WORK_DIR = Path("runs/edct-lmms")
LOOP_RUN_FOLDER = "edct"
"""The EDCT run folder inside lmms-eval's ``--output_path`` (both commands put it there)."""
LOOP_DRIVER = "lmms-eval agentic loop"


def lmms_cli() -> dict[str, str]:
    """``--model``, ``--model_args``, ``--tasks`` and ``--output_path`` of the lmms-eval command line
    this process runs (empty when lmms-eval was called from Python)."""
    parser = argparse.ArgumentParser(add_help=False)
    for name in ("model", "model_args", "tasks", "output_path"):
        parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name, default=None)
    known, _ = parser.parse_known_args(sys.argv[1:])
    return {k: v for k, v in vars(known).items() if v}


def hook_config() -> RunConfig:
    """The EDCT config for the lmms-eval task: ``$EDCT_CONFIG`` or the calibration roles."""
    path = os.environ.get(ENV_CONFIG)
    if path:
        from edct_task.presets import load_preset

        return load_preset(path)  # a file, or a shipped preset's name
    return calibration_config(output_dir=DEFAULT_WORK_DIR)


@dataclass
class Settings:
    """Everything the hooks need besides lmms-eval's model."""

    config: RunConfig
    engine: Engine
    work_dir: Path
    run: RunFolder
    _stack: contextlib.ExitStack = field(repr=False)

    @property
    def protocol(self) -> Any:
        return self.config.protocol

    @property
    def images(self) -> ImageStore:
        return self.engine.images

    @property
    def cache(self) -> StageCache:
        return self.engine.cache

    @property
    def dispatcher(self) -> Any:
        return self.engine.dispatcher

    def describe(self) -> dict[str, Any]:
        """The setup every logged sample carries: roles (without target), protocol, gate, prompt
        versions, the rendering the target received, and the EDCT run folder."""
        roles = {r: s.as_dict() for r, s in self.config.role_specs().items() if r != "target"}
        return {
            "roles": roles,
            "protocol": self.protocol.model_dump(mode="json"),
            "verification": self.config.verification.model_dump(mode="json"),
            "prompt_versions": prompts.prompt_versions(),
            "target_rendering": SINGLE_TURN_QUOTED,
            "run_dir": str(self.run.path),
        }

    def close(self) -> None:
        self._stack.close()


def loop_target() -> dict[str, Any]:
    """The target's identity on the loop path: the lmms-eval model of the command line."""
    cli = lmms_cli()
    args = ",".join(
        a for a in cli.get("model_args", "").split(",") if a and not is_secret_name(a.split("=", 1)[0])
    )
    return {
        "backend": "lmms-eval",
        "model": cli.get("model", "unknown"),
        "model_args": args,
        "driver": LOOP_DRIVER,
        "rendering": SINGLE_TURN_QUOTED,
    }


def rounds_needed(k: int) -> int:
    """Target rounds of one sample: answer and why at baseline and after each of k edits."""
    return 2 * (k + 1)


def run_folder(work_dir: Path) -> Path:
    """``$EDCT_OUTPUT_DIR``, else ``edct/`` in lmms-eval's ``--output_path``, else ``run/`` in the
    work folder."""
    env = os.environ.get(ENV_OUTPUT_DIR)
    if env:
        return Path(env).resolve()
    output = lmms_cli().get("output_path")
    return (Path(output) / LOOP_RUN_FOLDER).resolve() if output else work_dir / "run"


def build_settings(config: RunConfig) -> Settings:
    """The stage cache first (a stale cache folder is refused before anything is built), then the
    non-target roles through the runner's composition root, and the run folder."""
    env = os.environ.get(ENV_WORK_DIR)
    work_dir = Path(env).resolve() if env else config.resolved_cache_dir.resolve()
    where = f" (${ENV_WORK_DIR})" if env else f" (set {ENV_WORK_DIR} to put them elsewhere)"
    check_writable(work_dir, "cache folder", "cache_dir")
    out = run_folder(work_dir)
    check_writable(out, "EDCT run folder", f"${ENV_WORK_DIR}")
    # announced: lmms-eval's own loop would otherwise fill folders without a word
    print(
        f"edct: stage cache and edited images in {work_dir}{where}; the EDCT run folder (samples.jsonl, "
        f"images/, results.json) is {out} (${ENV_OUTPUT_DIR} names another)",
        file=sys.stderr,
        flush=True,
    )
    rank = shard_from_env()
    source = os.environ.get(ENV_CONFIG) or "the built-in calibration roles"
    target = loop_target()
    host = open_host_run(
        config,
        work_dir,
        out,
        target=target,
        source="lmms-eval",
        roles_from=f"the lmms-eval task's, from {source}; set ${ENV_CONFIG}",
        option=f"${ENV_OUTPUT_DIR}, or another --output_path",
        owner=rank is None or rank.is_main,  # one live run per folder (ranks of one run share it)
    )
    needed = rounds_needed(config.protocol.k)
    if needed > 12:
        print(
            f"edct: k={config.protocol.k} needs {needed} target rounds; raise generation_kwargs."
            "max_agentic_steps in the task YAML",
            file=sys.stderr,
            flush=True,
        )
    data = RunData(source="lmms-eval", tasks=lmms_cli().get("tasks"))
    folder = RunFolder(out, config, host.images, target, data)
    return Settings(config, host.engine, work_dir, folder, host.stack)


_BUILT: dict[tuple[str | None, ...], Settings] = {}
_BUILD_LOCK = threading.Lock()


def _key() -> tuple[str | None, ...]:
    return tuple(os.environ.get(v) or None for v in (ENV_CONFIG, ENV_WORK_DIR, ENV_OUTPUT_DIR))


def settings() -> Settings:
    """The settings of this process's environment, built once per distinct environment and shared
    by every hook thread; fails early with a config message. lmms-eval's ``!function`` hooks
    receive no context, so this per-process memo is the one place they find their roles."""
    with _BUILD_LOCK:
        built = _BUILT.get(_key())
        if built is None:
            if not _BUILT:  # lmms-eval never closes a task: the backends are shut down at exit
                atexit.register(release_all)
            built = _BUILT[_key()] = build_settings(hook_config())
        return built


def release_all() -> None:
    """Close every settings this process built (at exit)."""
    with _BUILD_LOCK:
        built = list(_BUILT.values())
        _BUILT.clear()
    for s in built:
        s.close()


def release() -> None:
    """Close and forget the settings of this process's environment (end of a run, tests)."""
    with _BUILD_LOCK:
        built = _BUILT.pop(_key(), None)
    if built is not None:
        built.close()
