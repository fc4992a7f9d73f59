"""Aggregations of the EDCT lmms-eval tasks that lmms-eval has no built-in for, and the one place
the loop path's EDCT run folder is finished.

The six metrics (CCS_binary, CCS_graded, AC/EF at k = 1, 2) use lmms-eval's own ``mean``, so its
results table shows them like any neighbour's: value ± ``mean_stderr`` (sample SD / √n). A sample
that does not count for a metric (excluded, unscored, no step at position k) returns no value for
it from ``process_results`` and so is left out of that metric's mean, never scored 0.

95% CIs (percentile bootstrap for CCS, Wilson for AC/EF) are not lmms-eval metrics: they are in
the EDCT run folder's ``results.json``, which every logged sample names (``edct``), and ``edct
report`` reads them from there.
"""

from __future__ import annotations

from typing import Any

from edct_task.lmms import state


def count(items: list[Any]) -> int:
    """A count over documents (``n_scored``, ``n_excluded``…): the sum of the per-sample 0/1."""
    return int(sum(int(v) for v in items if v is not None))


def finish_run_folder(items: list[Any]) -> dict[str, Any]:
    """Finish the EDCT run folder: the aggregation of ``edct`` (where each document's record is
    kept, ``results.record_results``), and the only side effect of an aggregation.

    lmms-eval aggregates a task once every document of it is scored, and gives a task no other
    hook at its end: so this is where the loop path's run folder gets its controls and run log
    (``run.folder.RunFolder.finish``; nothing during an export, whose run folder is finished
    already). Its value is an empty mapping: lmms-eval's results table leaves out empty entries,
    so it adds no row.
    """
    if state.replay() is None:
        from edct_task.lmms.settings import settings

        s = settings()
        ids = [str(item["id"]) for item in items if isinstance(item, dict) and "id" in item]
        s.run.finish(ids, s.dispatcher)
    return {}


def group_sum(metrics: list[Any], sizes: list[int], weight_by_size: bool = True) -> int:
    """Group value of a count: the sum over the group's tasks."""
    return int(sum(metrics))
