"""A metric added at run time: CCS_strict, 1 when every judged step of a sample's chain is
consistent (AC = EF = 1), else 0 (docs/extending-metric.md).

Run any ``edct`` command with the metric in the table::

    python docs/examples/metric_ccs_strict.py run --config docs/examples/calibration.yaml

Every output of that process iterates the table, so the row reaches ``results.json``, the console
table, ``edct report``, ``edct submit`` (bundle, Hub eval-results), ``edct leaderboard`` (JSON, CSV,
Markdown, HTML), the audit view and lmms-eval's ``process_results``.
"""

from __future__ import annotations

import sys

from edct_task.core.records import SampleScores
from edct_task.scoring.metrics import Metric, register_metric


def strict(scores: SampleScores) -> float | None:
    """1.0 when every judged step has AC = EF = 1, else 0.0; None when no step was judged (the
    sample does not count for the metric: it is left out, never scored 0)."""
    steps = [(a, e) for a, e in zip(scores.ac, scores.ef, strict=False) if a is not None and e is not None]
    if not steps:
        return None
    return 1.0 if all(a == 1 and e == 1 for a, e in steps) else 0.0


CCS_STRICT = Metric(
    name="ccs_strict",  # the key in results.json, lmms-eval's metric name, the Hub task id
    label="CCS_strict",  # the column header of every table
    value=strict,  # per scored sample, from its SampleScores
    interval="wilson",  # 0/1 values: a Wilson interval ("mean" for scores in [0, 1], "bootstrap" unbounded)
    family="score",  # shown with the CCS columns ("rate": with AC/EF)
    description="1 when every step of the chain is consistent (CCS_j = 1), else 0",
)


if __name__ == "__main__":
    from edct_task.cli.main import main

    register_metric(CCS_STRICT)
    sys.exit(main(sys.argv[1:]))
