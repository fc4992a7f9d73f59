"""The folders a run writes to: checked before any work, owned by one run at a time, and a full
or read-only disk turned into one clear stop (finished calls stay in the stage cache).

Exit codes of ``edct run`` / ``edct demo`` (documented in the README): 0 done; 1 the run stopped
(storage full or read-only mid-run, another failure outside the samples); 2 user error (config,
data, a folder in use or not writable); 3 done, but too many samples went unscored
(``--fail-on-unscored``, or none scored at all).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from edct_task.core.errors import ConfigError

LOCK_NAME = ".edct-run.lock"


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
def claim(folder: Path) -> Iterator[None]:
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
        raise _in_use(folder)
    lock = FileLock(str(folder / LOCK_NAME))
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise _in_use(folder) from None
        try:
            yield
        finally:
            lock.release()
    finally:
        with _CLAIMED_LOCK:
            _CLAIMED.discard(key)


def _in_use(folder: Path) -> ConfigError:
    return ConfigError(
        f"another edct run is using the output folder {folder}: wait for it to finish, or give this "
        "run its own --output (runs may share a cache_dir)"
    )
