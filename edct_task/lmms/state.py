"""All the process state of the lmms-eval face, and nothing else.

lmms-eval calls the task hooks by name from the task YAML (``!function``) and hands them no
context, so what they share lives here and every hook asks this module:

- the **invocation**: what lmms-eval was asked to run (model, model arguments, tasks, device,
  output folder), taken from the arguments of lmms-eval's own ``simple_evaluate`` call
  (``plugin`` wraps it), never re-parsed from the command line;
- the **settings** of each invocation: the non-target roles, stage cache and EDCT run folder the
  hooks use (``settings.build_settings``), built once and closed at exit;
- the **replay** of an export (``export``): while it runs, the hooks answer each document with its
  finished record instead of running the protocol;
- the task folders generated for domains registered outside the repository (``tasks``).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from edct_task.core.records import SampleRecord


class Closeable(Protocol):
    def close(self) -> None: ...


S = TypeVar("S", bound=Closeable)


@dataclass(frozen=True)
class Invocation:
    """What lmms-eval was asked to run, from its ``simple_evaluate`` arguments."""

    model: str | None = None
    """The lmms-eval model name (None: a model object, or lmms-eval was not seen being called)."""
    model_args: str = ""
    tasks: tuple[str, ...] = ()
    device: str | None = None
    output_path: str | None = None
    """lmms-eval's ``--output_path`` (its ``EvaluationTracker``'s), where the EDCT run folder goes."""
    command_line: bool = False
    """Called by lmms-eval's command line (it passes its parsed arguments as ``cli_args``)."""

    @classmethod
    def of_call(cls, arguments: dict[str, Any]) -> Invocation:
        """The invocation of one ``simple_evaluate`` call (its bound arguments by name)."""
        model, model_args = arguments.get("model"), arguments.get("model_args")
        if isinstance(model_args, dict):  # lmms-eval takes them as a string or a mapping
            model_args = ",".join(f"{k}={v}" for k, v in model_args.items())
        tasks = arguments.get("tasks") or ()
        tracker = arguments.get("evaluation_tracker")
        output = getattr(tracker, "output_path", None) or getattr(
            arguments.get("cli_args"), "output_path", None
        )
        return cls(
            model=model if isinstance(model, str) else None,
            model_args=model_args if isinstance(model_args, str) else "",
            tasks=tuple(t for t in ([tasks] if isinstance(tasks, str) else tasks) if isinstance(t, str)),
            device=arguments.get("device") if isinstance(arguments.get("device"), str) else None,
            output_path=str(output) if output else None,
            command_line=arguments.get("cli_args") is not None,
        )


@dataclass(frozen=True)
class Replay:
    """What the task hooks answer while an export runs: each task's documents (the records' items,
    no image) and each document's finished record, kept in the run folder ``run_dir``."""

    docs: dict[str, list[dict[str, Any]]]
    records: dict[str, SampleRecord]
    run_dir: str


NO_INVOCATION = Invocation()
"""lmms-eval was not seen being called (its evaluator called from Python before any ``TaskManager``
existed, or no lmms-eval at all: tests, Inspect): the target is ``unknown``, the run folder the
default."""

_LOCK = threading.RLock()
_invocation = NO_INVOCATION
_replay: Replay | None = None
_settings: dict[tuple[Any, ...], Closeable] = {}
_task_folders: dict[tuple[str, ...], Path] = {}


def invocation() -> Invocation:
    """The lmms-eval call in progress (empty when none was seen)."""
    return _invocation


@contextmanager
def invoked(call: Invocation) -> Iterator[Invocation]:
    """``call`` is the invocation while lmms-eval's ``simple_evaluate`` runs."""
    global _invocation
    with _LOCK:
        previous, _invocation = _invocation, call
    try:
        yield call
    finally:
        with _LOCK:
            _invocation = previous


def replay() -> Replay | None:
    """The export in progress, if any (lmms-eval scores documents in a thread pool)."""
    return _replay


@contextmanager
def replaying(export: Replay) -> Iterator[Replay]:
    global _replay
    with _LOCK:
        if _replay is not None:
            raise RuntimeError("an lmms-eval export is already running in this process")
        _replay = export
    try:
        yield export
    finally:
        with _LOCK:
            _replay = None


def settings(key: tuple[Any, ...], build: Callable[[], S]) -> S:
    """The settings of ``key`` (the environment and the invocation), built once by ``build`` and
    shared by every hook thread; the first one registers closing them all at exit (lmms-eval never
    closes a task)."""
    with _LOCK:
        built = _settings.get(key)
        if built is None:
            if not _settings:
                atexit.register(release_all)
            built = _settings[key] = build()
        return cast(S, built)


def release(key: tuple[Any, ...]) -> None:
    """Close and forget the settings of ``key`` (end of a run, tests)."""
    with _LOCK:
        built = _settings.pop(key, None)
    if built is not None:
        built.close()


def release_all() -> None:
    """Close every settings this process built (at exit)."""
    with _LOCK:
        built = list(_settings.values())
        _settings.clear()
    for s in built:
        s.close()


def task_folder(names: tuple[str, ...], make: Callable[[], Path]) -> Path:
    """The folder of the task YAMLs generated for the domains ``names``, made once by ``make``."""
    with _LOCK:
        if names not in _task_folders:
            _task_folders[names] = make()
        return _task_folders[names]
