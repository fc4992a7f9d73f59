"""Whether a process a test started (or one of its children) is still running."""

from __future__ import annotations

import psutil


def alive(proc: int | psutil.Process) -> bool:
    """Whether ``proc`` runs: a zombie does not, and a ``Process`` whose pid was reused by another
    process does not either."""
    try:
        p = proc if isinstance(proc, psutil.Process) else psutil.Process(proc)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
