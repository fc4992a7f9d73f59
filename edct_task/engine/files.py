"""Writing files so that a reader never sees a partial one (temporary file + ``os.replace``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a unique temporary file in its folder."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def place(src: Path, dst: Path) -> None:
    """``dst`` becomes ``src``'s content: a hard link where the file system allows, else a copy;
    swapped in atomically."""
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name[:40]}.", suffix=".tmp")
    os.close(fd)
    os.unlink(tmp)
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
