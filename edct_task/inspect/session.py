"""One Inspect task's EDCT run: config, backends (``run.runner.compose``) and the run folder.

Built when Inspect creates the task; every finished record is appended to the run folder as the
solver finishes it, and the run log (``results.json``, the known-answer controls) is written when
the task ends (``finish``, called by the ``edct`` hook on Inspect's ``on_task_end``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.config import RunConfig, calibration_config
from edct_task.core.records import MULTI_TURN, SampleRecord
from edct_task.engine.stage_cache import ImageStore
from edct_task.run.folder import RunFolder, open_host_run
from edct_task.run.log import RunData
from edct_task.run.runner import Engine
from edct_task.run.workspace import check_writable

HOST = "inspect_ai"
RUN_KEY = "edct_run_dir"
"""Task metadata key naming the EDCT run folder (how the task-end hook finds the run)."""


def task_config(config: str | None) -> RunConfig:
    """``-T config=…`` (a YAML file or a shipped preset's name), else the calibration roles; the
    text roles Inspect's ``--model-role`` binds answered by Inspect's models (``role_model``)."""
    from edct_task.inspect.role_model import bind_model_roles

    if config:
        from edct_task.presets import load_preset

        return bind_model_roles(load_preset(config))
    return bind_model_roles(calibration_config(output_dir=Path("runs/edct-inspect")))


def host_version() -> str:
    from importlib.metadata import version

    return version("inspect_ai")


@dataclass
class InspectRun:
    """The live parts of one task's run and the samples appended so far."""

    config: RunConfig
    engine: Engine
    folder: RunFolder
    stack: contextlib.ExitStack = field(repr=False)
    ids: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def images(self) -> ImageStore:
        return self.engine.images

    def append(self, record: SampleRecord) -> None:
        with self._lock:
            if record.sample.id not in self.ids:
                self.ids.append(record.sample.id)
        self.folder.append(record)

    def finish(self) -> None:
        """Write the run log from the records appended in this process; close the backends."""
        try:
            if self.ids:
                self.folder.finish(list(self.ids), self.engine.dispatcher)
        finally:
            self.stack.close()


_OPEN: dict[str, InspectRun] = {}


def cache_dir_of(config: RunConfig, work_dir: str | None) -> Path:
    """``-T work_dir=…``, else the config's cache folder."""
    return Path(work_dir).resolve() if work_dir else config.resolved_cache_dir.resolve()


def open_run(config: RunConfig, task: str, output_dir: str | None, work_dir: str | None) -> InspectRun:
    """The stage cache first (a stale cache folder is refused), then the non-target roles, then
    the run folder (``output_dir``, else ``<config output_dir>/<task>``)."""
    cache_dir = cache_dir_of(config, work_dir)
    out = Path(output_dir).resolve() if output_dir else (config.output_dir / task).resolve()
    check_writable(cache_dir, "cache folder", "-T work_dir")
    check_writable(out, "EDCT run folder", "-T output_dir")
    previous = _OPEN.pop(str(out), None)
    if previous is not None:  # the same task created again in this process: the old one is done
        previous.stack.close()
    target = {"backend": HOST, "driver": "inspect solver", "rendering": MULTI_TURN, "host": HOST}
    host = open_host_run(
        config,
        cache_dir,
        out,
        target=target,
        source=HOST,
        roles_from="the Inspect task's, -T config=…",
        option="-T output_dir",
    )
    print(
        f"edct: stage cache and edited images in {cache_dir}; the EDCT run folder is {out}",
        file=sys.stderr,
        flush=True,
    )
    data = RunData(source=HOST, tasks=task, host_version=host_version())
    run = InspectRun(config, host.engine, RunFolder(out, config, host.images, target, data), host.stack)
    _OPEN[str(out)] = run
    return run


def set_target(run: InspectRun, model: Any) -> None:
    """Name the target in the run log: the Inspect model the solver was given."""
    run.folder.target["model"] = str(model)


def finish_run(metadata: dict[str, Any] | None) -> None:
    """The task-end hook's work: finish the run the task's metadata names (once)."""
    key = (metadata or {}).get(RUN_KEY)
    run = _OPEN.pop(str(key), None) if key else None
    if run is not None:
        run.finish()
