"""Ctrl-C in an ``edct`` command: the first stops new work at once and says so, the second quits.

Without this, the first Ctrl-C unwound into ``Dispatcher.close``, whose ``shutdown(wait=True)``
ran every call still queued in the role pools (and the target batcher kept sending new batches
as slots freed): the run went on for seconds with its bars moving and no word. A second Ctrl-C
then interrupted that join, leaving the other pools' worker threads (not daemons) to the
interpreter's exit, which joins them (``threading._shutdown``): the process waited in ``futex``
for calls nobody would use, and a third Ctrl-C died in ``threading`` with a traceback.

SIGTERM (a scheduler's or a supervisor's stop) ended the process outright: a sweep's ``edct run``
jobs and a run's lmms-eval export child went on as orphans. It now unwinds like a Ctrl-C
(:class:`Terminated`), so every executor and child process is closed on the way out (exit 143).

Now the first Ctrl-C prints ``edct: stopping: …`` and raises ``KeyboardInterrupt`` as Python
does; the dispatcher cancels the queued calls and waits only for those in flight, whose results
are committed to the stage cache (``Dispatcher.close``). A second Ctrl-C ends the process at once
(``os._exit``): every finished call is already committed (the stage cache commits each entry as
it is written), so nothing finished is lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""
EXIT_TERMINATED = 143
"""The exit code of a command stopped by SIGTERM (128 + SIGTERM)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: unwinds as a Ctrl-C does (what handles one handles both), exit 143."""


STOPPING = (
    "edct: stopping: no new work starts; what is in flight finishes and is kept "
    "(press Ctrl-C again to quit at once)"
)
QUITTING = "edct: quitting at once; finished calls are cached, rerun the same command to resume"


@contextmanager
def two_step_interrupts() -> Iterator[None]:
    """Within the block, the first SIGINT prints :data:`STOPPING` and raises ``KeyboardInterrupt``
    (SIGTERM: :class:`Terminated`); the second signal prints :data:`QUITTING` and exits at once
    (130, or 143 after a SIGTERM). Outside the main thread (where no signal handler can be set)
    the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    presses = 0

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        terminated = signum == signal.SIGTERM
        if presses == 1:
            _say(STOPPING)
            raise Terminated if terminated else KeyboardInterrupt
        _say(QUITTING)
        os._exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say(line: str) -> None:
    with contextlib.suppress(Exception):  # a closed or broken stderr never keeps the process from stopping
        print(line, file=sys.stderr, flush=True)
