"""The EDCT run folder of a host that drives the protocol itself (``RunFolder``).

lmms-eval's agentic loop (``edct_task.lmms``) and Inspect's solver (``edct_task.inspect``) each
advance ``SampleRun`` themselves; both append every finished record here and write the run log
(``results.json``) when their task ends, so every host leaves the one record format.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.config import RunConfig
from edct_task.core.errors import ConfigError
from edct_task.core.records import SampleRecord
from edct_task.engine.controls import ControlFeed
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.stage_cache import CacheSchemaError, ImageStore, StageCache
from edct_task.roles import CALIBRATION_SOURCE
from edct_task.run.log import RunData
from edct_task.run.outputs import CONTROLS_FILE, RESULTS_FILE, SAMPLES_FILE
from edct_task.run.runner import (
    Engine,
    compose,
    draw_controls,
    place_images,
    run_log,
    run_setup,
    write_outputs,
)
from edct_task.run.workspace import claim, claim_setup
from edct_task.scoring.controls import controls_line, unreliable_reasons


@dataclass
class RunFolder:
    """The EDCT run folder of a host that drives samples itself (lmms-eval's loop, Inspect's
    solver): records appended as the host scores them, the run log written from them when the
    host's task ends (``finish``)."""

    path: Path
    config: RunConfig
    images: ImageStore
    target: dict[str, Any]
    data: RunData
    """The run log's ``config.data``: the host and what it ran (``{"source": "lmms-eval", …}``)."""
    started: float = field(default_factory=time.perf_counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _finished: dict[str, None] = field(default_factory=dict, repr=False)
    _appended: dict[str, None] = field(default_factory=dict, repr=False)
    """Ids appended in this process (in order), finished or not yet."""

    def append(self, record: SampleRecord) -> None:
        """One finished document: its line in ``samples.jsonl`` and its images in ``images/``."""
        line = (record.model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            self._appended[record.sample.id] = None
            place_images(self.path, [record], self.images)
            fd = os.open(self.path / SAMPLES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)  # one write per line: ranks sharing the folder never interleave
            finally:
                os.close(fd)

    def finish(self, ids: list[str], dispatcher: Dispatcher) -> None:
        """Write ``samples.jsonl`` (the last record of every id in ``ids``, of the ids finished
        before in this process, and of the ids appended in this process and not finished yet, in
        that order), ``controls.jsonl`` and ``results.json``.

        A host finishes task by task (lmms-eval aggregates each task of a group once all of them are
        scored): the records of a task not aggregated yet are this run's too, and are kept. A record
        of an earlier run in the folder that this run neither appended nor finished is left out.

        The known-answer controls go through ``dispatcher`` here, once the documents are scored:
        a host drives the documents itself and gives the task no place to interleave them, so
        they follow them (same backends, templates and cache). Their line, and any role below the
        bar, is printed with the host's results."""
        from edct_task.run.outputs import load_records

        with self._lock:
            self._finished.update(dict.fromkeys(ids))
            latest = {r.sample.id: r for r in load_records(self.path / SAMPLES_FILE)}
            records = [latest[i] for i in {**self._finished, **self._appended} if i in latest]
            calibration = bool(records) and all(
                r.sample.metadata.get("source") == CALIBRATION_SOURCE for r in records
            )
            items = draw_controls(self.config, [r.sample.domain for r in records], calibration)
            controls = ControlFeed(items, self.config.protocol, dispatcher, 0).finish() if records else []
            log = run_log(
                self.config,
                records,
                data=self.data,
                backends={"target": self.target},
                roles={
                    "target": self.target,
                    **{r: s.as_dict() for r, s in self.config.role_specs().items() if r != "target"},
                },
                usage={},
                calls=dispatcher.stats.as_dict(),
                wall_seconds=time.perf_counter() - self.started,
                controls=controls,
            )
            write_outputs(self.path, records, log, self.images, controls)
        print(controls_line(log.controls), file=sys.stderr, flush=True)
        for line in unreliable_reasons(log.controls):
            print(f"edct: UNRELIABLE RUN: {line} ({self.path / CONTROLS_FILE})", file=sys.stderr, flush=True)


@dataclass
class HostRun:
    """What a host (lmms-eval's loop, an Inspect task) holds open for its EDCT run: the stage cache,
    the non-target roles and the run folder, all closed by ``stack``."""

    engine: Engine
    images: ImageStore
    stack: contextlib.ExitStack


def open_host_run(
    config: RunConfig,
    cache_dir: Path,
    out: Path,
    *,
    target: dict[str, Any],
    source: str,
    roles_from: str,
    option: str,
    owner: bool = True,
) -> HostRun:
    """The one way a host opens its EDCT run: the run folder ``out`` claimed (one live run per
    folder; ``owner`` False for a rank that shares its main rank's folder), the stage cache in
    ``cache_dir`` (a stale one refused), the non-target roles composed, and the folder's setup
    checked before the first call (a folder holding a run of another setup is refused; the same
    setup resumes). ``roles_from`` says where the roles came from in a refusal, ``option`` how the
    user names another folder. The previous run's ``results.json`` goes: this run's is written when
    the host finishes."""
    stack = contextlib.ExitStack()
    try:
        if owner:
            stack.enter_context(claim(out, option))
        cache = stack.enter_context(StageCache(cache_dir))
        images = ImageStore(cache_dir)
        try:
            engine = stack.enter_context(
                compose(config, cache, images, require_target=False, progress=False, run_name=out.name)
            )
        except ConfigError as exc:  # a stale cache (CacheSchemaError) is not one: it is turned below
            raise ConfigError(f"EDCT roles ({roles_from}): {exc}") from None
        backends = {**engine.roles.identities(), "target": target}
        claim_setup(out, run_setup(config, backends, data={"source": source}), option)
    except CacheSchemaError as exc:
        stack.close()
        raise ConfigError(str(exc)) from None
    except BaseException:
        stack.close()
        raise
    (out / RESULTS_FILE).unlink(missing_ok=True)
    return HostRun(engine, images, stack)
