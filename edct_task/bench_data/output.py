"""Writing an output folder all at once: build beside the target, then rename it into place."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from edct_task.bench_data.format import BenchDataError
from edct_task.engine.files import make_temp_dir


def write_folder(out: Path, writer: Callable[[Path], None], *, overwrite: bool = False) -> Path:
    """Call ``writer(tmp)`` on a fresh folder beside ``out``, then move it to ``out``.

    On any failure the temporary folder is removed and ``out`` is left as it was. An existing
    ``out`` is replaced only with ``overwrite``.
    """
    out = Path(out).absolute()
    if out.exists() and not overwrite:
        raise BenchDataError(f"{out}: already exists (pass --overwrite to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(out.parent, f".{out.name}.", ".partial")
    old: Path | None = None
    try:
        writer(tmp)
        if out.exists():
            old = out.with_name(f".{out.name}.{os.getpid()}.old")
            os.replace(out, old)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out.exists():
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out
