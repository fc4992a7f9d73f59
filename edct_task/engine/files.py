"""Writing files so that a reader never sees a partial one (temporary file + ``os.replace``).

Every output file of every tool goes through :func:`atomic_write` (or :func:`place` for a file
that already exists elsewhere): a kill at any moment leaves the previous file or the new one,
never a truncated one. The file gets the permissions an ordinary ``open()`` would give it
(``0o666`` less the user's umask), not ``mkstemp``'s private ``0o600``. JSON goes through
:func:`json_text`, which never writes ``NaN`` or ``Infinity`` (not JSON; other tools reject them).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process's umask: from ``/proc/self/status`` where the kernel tells it (no race with
    other threads), else by setting and restoring it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mkstemp(path: Path) -> tuple[int, str]:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a unique temporary file in its folder."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = _mkstemp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in dicts, lists, tuples) replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``value`` with non-finite floats as ``null``: valid JSON for every reader."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)


def make_temp_dir(parent: Path, prefix: str, suffix: str = "") -> Path:
    """A fresh folder in ``parent`` with the permissions ``mkdir`` would give it (``0o777`` less the
    umask; ``mkdtemp`` makes it private), to be moved into place when complete."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp


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


def remove_tree(path: Path) -> None:
    """Remove ``path`` and what it holds, if it exists: a link is removed, never followed."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
