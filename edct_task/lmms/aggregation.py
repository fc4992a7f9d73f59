"""Aggregations of the EDCT lmms-eval tasks that lmms-eval has no built-in for.

The six metrics (CCS_binary, CCS_graded, AC/EF at k = 1, 2) use lmms-eval's own ``mean``, so its
results table shows them like any neighbour's: value ± ``mean_stderr`` (sample SD / √n). A sample
that does not count for a metric (excluded, unscored, no step at position k) returns no value for
it from ``process_results`` and so is left out of that metric's mean, never scored 0.

95% CIs (percentile bootstrap for CCS, Wilson for AC/EF) are not metrics: they are recomputed
from the sample records logged with every sample (``filtered_resps``), with the setup each logged
sample carries, by ``edct report`` (``edct_task.scoring.metrics.summarise``).
"""

from __future__ import annotations

from typing import Any


def count(items: list[Any]) -> int:
    """A count over documents (``n_scored``, ``n_excluded``…): the sum of the per-sample 0/1."""
    return int(sum(int(v) for v in items if v is not None))


def audit(items: list[Any]) -> dict[str, Any]:
    """The per-sample audit digest (``edct``) has no task-level value: an empty mapping.

    lmms-eval needs an aggregation for every key ``process_results`` returns, and its results
    table leaves out entries whose value is empty, so the digest stays in the logged samples
    (with the full setup) and adds no row to the table. lmms-eval aggregates once every document
    of a task is scored, so this is where the loop path's EDCT run folder gets its run log
    (``run.folder.RunFolder.finish``; not during an export, whose run has one already).
    """
    from edct_task.lmms import export
    from edct_task.lmms.settings import settings

    if export.active() is None:
        s = settings()
        ids = [str(item["id"]) for item in items if isinstance(item, dict) and "id" in item]
        s.run.finish(ids, s.dispatcher)
    return {}


def group_sum(metrics: list[Any], sizes: list[int], weight_by_size: bool = True) -> int:
    """Group value of a count: the sum over the group's tasks."""
    return int(sum(metrics))
