"""The folders a run writes to: checked before any work, owned by one run at a time, and a full
or read-only disk turned into one clear stop (finished calls stay in the stage cache).

Exit codes of ``edct run`` / ``edct demo`` (documented in the README): 0 done; 1 the run stopped
(storage full or read-only mid-run, another failure outside the samples); 2 user error (config,
data, a folder in use or not writable); 3 done, but too many samples went unscored
(``--fail-on-unscored``, or none scored at all).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from edct_task.core.errors import ConfigError
from edct_task.core.inputs import InputFileError, read_text
from edct_task.engine.files import atomic_write

LOCK_NAME = ".edct-run.lock"
SETUP_NAME = ".edct-setup.json"
"""The setup of the run a folder holds (``claim_setup``), written before the run's first call."""
MAX_SETUP_BYTES = 4 * 1024 * 1024


def check_writable(folder: Path, what: str, option: str) -> None:
    """Create ``folder`` and write a file in it, or raise ``ConfigError`` naming ``what`` it is and
    the ``option`` that chooses another."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".edct-write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(
            f"the {what} {folder} is not writable ({exc.strerror or exc}); choose another folder ({option})"
        ) from None


_CLAIMED: set[str] = set()
"""Folders claimed by this process: a file lock alone cannot be trusted to refuse a second holder in
the same process (on NFS and some sandboxes ``flock`` is emulated by per-process POSIX locks)."""
_CLAIMED_LOCK = threading.Lock()


@contextmanager
def claim(folder: Path, option: str = "--output") -> Iterator[None]:
    """Own ``folder`` for the duration of the ``with`` block.

    A second run on a folder in use, in this process or another, is refused at once: both would
    pay for every call and the last writer's results would win. The stage cache itself may be
    shared by concurrent runs (SQLite WAL, one committed transaction per entry), so several runs
    can use one ``cache_dir``.
    """
    key = os.path.realpath(folder)
    with _CLAIMED_LOCK:
        taken = key in _CLAIMED
        _CLAIMED.add(key)
    if taken:
        raise _in_use(folder, option)
    lock = FileLock(str(folder / LOCK_NAME))
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise _in_use(folder, option) from None
        try:
            yield
        finally:
            lock.release()
    finally:
        with _CLAIMED_LOCK:
            _CLAIMED.discard(key)


def _in_use(folder: Path, option: str) -> ConfigError:
    return ConfigError(
        f"another edct run is using the output folder {folder}: wait for it to finish, or give this "
        f"run its own folder ({option}; runs may share a cache_dir)"
    )


def claim_setup(folder: Path, setup: Mapping[str, Any], option: str) -> None:
    """Record ``setup`` as the setup of the run ``folder`` holds, or refuse the folder when it holds
    a run (finished or partial) of another setup.

    A rerun of the same setup resumes in its folder; a run of another setup would replace the
    folder's results and mix its records with the other run's, so it is refused in one line that
    names the first difference and the fix (``option``: the flag that names another folder). Call
    it once the run's backends are known and before its first call. A folder without the record (a
    fresh folder, or a run written before setups were recorded) takes this run's setup.
    """
    ours = json.loads(json.dumps(setup, sort_keys=True, default=str))
    path = folder / SETUP_NAME
    if not os.path.lexists(path):
        atomic_write(path, json.dumps(ours, sort_keys=True, indent=1) + "\n")
        return
    try:
        theirs = json.loads(read_text(path, MAX_SETUP_BYTES))
    except (InputFileError, ValueError) as exc:
        raise ConfigError(
            f"the run folder {folder} holds an unreadable {SETUP_NAME} ({' '.join(str(exc).split())[:200]}): "
            f"give this run its own folder ({option}), or remove {folder} to start over"
        ) from None
    difference = first_difference(theirs, ours)
    if difference is not None:
        where, was, now, more = difference
        others = f", and {more} more" if more else ""
        raise ConfigError(
            f"the run folder {folder} holds a run of another setup ({where}: {_clip(was)} there, "
            f"{_clip(now)} here{others}); give this run its own folder ({option}), or remove "
            f"{folder} to start over (rerunning the folder's own setup resumes it)"
        )


def first_difference(a: Any, b: Any, where: str = "") -> tuple[str, Any, Any, int] | None:
    """The first path (``backends.target.behavior``) where the JSON values ``a`` and ``b`` differ,
    both values there, and how many other leaves differ; None when they are equal."""
    found = list(_differences(a, b, where))
    if not found:
        return None
    path, x, y = found[0]
    return path, x, y, len(found) - 1


def _differences(a: Any, b: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                yield sub, a.get(key, _ABSENT), b.get(key, _ABSENT)
            else:
                yield from _differences(a[key], b[key], sub)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, f"{where}[{i}]")
    elif a != b:
        yield where or "setup", a, b


class _Absent:
    def __repr__(self) -> str:
        return "(none)"


_ABSENT = _Absent()


def _clip(value: Any, limit: int = 80) -> str:
    text = repr(value) if isinstance(value, _Absent) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
