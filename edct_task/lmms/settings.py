"""What the lmms-eval hooks need besides lmms-eval's model, built once per process.

Non-target roles come from an EDCT config file (``$EDCT_CONFIG``; default: the calibration
roles) and are built by the runner's composition root (``run.runner.compose``), so the call
log, the gate and the stage cache behave as in every other run. Each finished document is
appended to an ordinary EDCT run folder (``run.folder.RunFolder``: ``samples.jsonl``, ``images/``, and
``results.json`` once lmms-eval aggregates): ``$EDCT_OUTPUT_DIR``, else ``edct/`` inside
lmms-eval's ``--output_path``, else ``run/`` in the work folder (``$EDCT_WORK_DIR``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.config import RunConfig, calibration_config
from edct_task.core.records import SINGLE_TURN_QUOTED
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.lmms import state
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

    def close(self) -> None:
        self._stack.close()


def loop_target(call: state.Invocation) -> dict[str, Any]:
    """The target's identity on the loop path: the lmms-eval model lmms-eval was asked to run."""
    args = ",".join(a for a in call.model_args.split(",") if a and not is_secret_name(a.split("=", 1)[0]))
    return {
        "backend": "lmms-eval",
        "model": call.model or "unknown",
        "model_args": args,
        "driver": LOOP_DRIVER,
        "rendering": SINGLE_TURN_QUOTED,
    }


def rounds_needed(k: int) -> int:
    """Target rounds of one sample: answer and why at baseline and after each of k edits."""
    return 2 * (k + 1)


def run_folder(work_dir: Path, call: state.Invocation) -> Path:
    """``$EDCT_OUTPUT_DIR``, else ``edct/`` in lmms-eval's ``--output_path``, else ``run/`` in the
    work folder."""
    env = os.environ.get(ENV_OUTPUT_DIR)
    if env:
        return Path(env).resolve()
    output = call.output_path
    return (Path(output) / LOOP_RUN_FOLDER).resolve() if output else work_dir / "run"


def build_settings(config: RunConfig, call: state.Invocation = state.NO_INVOCATION) -> Settings:
    """The stage cache first (a stale cache folder is refused before anything is built), then the
    non-target roles through the runner's composition root, and the run folder."""
    env = os.environ.get(ENV_WORK_DIR)
    work_dir = Path(env).resolve() if env else config.resolved_cache_dir.resolve()
    where = f" (${ENV_WORK_DIR})" if env else f" (set {ENV_WORK_DIR} to put them elsewhere)"
    check_writable(work_dir, "cache folder", "cache_dir")
    out = run_folder(work_dir, call)
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
    target = loop_target(call)
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
    data = RunData(source="lmms-eval", tasks=",".join(call.tasks) or None)
    folder = RunFolder(out, config, host.images, target, data)
    return Settings(config, host.engine, work_dir, folder, host.stack)


def _key() -> tuple[Any, ...]:
    """What the settings depend on: the three environment variables and the invocation."""
    return (
        *(os.environ.get(v) or None for v in (ENV_CONFIG, ENV_WORK_DIR, ENV_OUTPUT_DIR)),
        state.invocation(),
    )


def settings() -> Settings:
    """The settings of this environment and invocation (``state.settings``): built at the first
    hook that needs them, failing early with a config message."""
    call = state.invocation()
    return state.settings(_key(), lambda: build_settings(hook_config(), call))


def release() -> None:
    """Close and forget the settings of this environment and invocation (end of a run, tests)."""
    state.release(_key())
