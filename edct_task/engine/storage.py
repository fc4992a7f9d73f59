"""A full or read-only disk under the output or cache folder: no sample's failure, the run's stop.

Finished calls stay in the stage cache, so a rerun resumes (``edct run`` exits 1 with the advice).
"""

from __future__ import annotations

import errno
import sqlite3

_STORAGE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT}
_SQLITE_STORAGE = ("disk is full", "readonly database", "disk i/o error")


class StorageError(RuntimeError):
    """The disk under the output or cache folder is full or read-only: the run must stop."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")

    def advice(self) -> str:
        return (
            f"edct: stopped, the disk refused a write ({self}). Finished calls are safe in the stage "
            "cache: free space (or choose a writable --output) and rerun the same command to resume."
        )


def storage_error(exc: BaseException) -> StorageError | None:
    """``exc`` as a ``StorageError`` when it is a full or read-only disk, else None."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, OSError) and exc.errno in _STORAGE_ERRNOS:
        return StorageError(exc)
    if isinstance(exc, sqlite3.OperationalError) and any(m in str(exc).lower() for m in _SQLITE_STORAGE):
        return StorageError(exc)
    return None
