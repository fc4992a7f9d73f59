"""Ending a process that imported torch, transformers and lmms-eval without their teardown."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def exit_promptly(code: int) -> NoReturn:
    """Exit with ``code`` as the interpreter would, less its module teardown.

    When the process has nothing left running — no child process, no thread but daemons — the
    standard streams are flushed, the ``atexit`` handlers run (logging's, temporary folders') and
    the process ends with ``os._exit``. What is skipped is Python freeing every module one by one,
    which after torch, transformers and lmms-eval are imported takes ≈ 1.2 s on our 2-core machine
    at the end of every ``edct run --model`` (measured: ``benchmarks/bench_lmms.py``); every file a
    command writes is closed by the command itself. Anything still running (an in-process vLLM's
    engine process, a library's worker thread) may be stopped by that teardown, so then the
    interpreter exits as usual (``sys.exit``).
    """
    import multiprocessing

    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if multiprocessing.active_children() or any(t.is_alive() for t in others):
        sys.exit(code)
    _flush_standard_streams()
    atexit._run_exitfuncs()
    _flush_standard_streams()  # what the handlers printed
    os._exit(code)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
