"""One stage cache shared by several processes (ranks of an accelerate/torchrun run, or two runs
on one machine): SQLite's WAL mode with file locks and a busy timeout keeps every commit."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

from support.hang_guard import deadline

from edct_task.engine.stage_cache import StageCache

PER_PROCESS = 300
SHARED = 100  # keys every process writes (the same request reached by two ranks)


def _writer(root: str, rank: int, start: mp.Event) -> None:
    start.wait()
    with StageCache(root) as cache:
        for i in range(PER_PROCESS):
            key = f"shared-{i}" if i < SHARED else f"rank{rank}-{i}"
            cache.put(key, {"text": f"reply {key}", "i": i}, stage="judge")
            # read back what another rank may have written meanwhile
            other = cache.get(f"shared-{max(0, i - 1)}")
            assert other is None or other["text"] == f"reply shared-{max(0, i - 1)}"


def test_processes_writing_one_cache_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    ranks = 3
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), r, start)) for r in range(ranks)]
    for p in procs:
        p.start()
    start.set()
    end = deadline(300)
    for p in procs:
        p.join(timeout=max(0.0, end - time.monotonic()))
    for p in procs:  # a hung writer is not left behind
        if p.is_alive():
            p.kill()
            p.join()
    assert [p.exitcode for p in procs] == [0] * ranks
    with StageCache(tmp_path) as cache:
        assert len(cache) == SHARED + ranks * (PER_PROCESS - SHARED)
        assert cache.counts() == {"judge": SHARED + ranks * (PER_PROCESS - SHARED)}
        for r in range(ranks):
            assert cache.get(f"rank{r}-{PER_PROCESS - 1}") == {
                "text": f"reply rank{r}-{PER_PROCESS - 1}",
                "i": PER_PROCESS - 1,
            }
        assert cache.get("shared-0") == {"text": "reply shared-0", "i": 0}
