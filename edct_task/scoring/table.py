"""Plain-text score tables for the terminal (the JSON results are the citable artefact).

Two tables that fit an 80-column terminal: CCS with its CI and the sample counts per row, then
AC and EF at each chain position with theirs.
"""

from __future__ import annotations

import textwrap

from edct_task.scoring.metrics import INTERVAL_TEXT, Metric, family
from edct_task.scoring.results import MetricValue, Results, ScoreBlock

_COUNTS = (("scored", "scored"), ("excl.", "excluded"), ("unsc.", "unscored"), ("error", "error"))
"""Header → sample status of the count columns."""


def _cell(metric: MetricValue | None, digits: int) -> str:
    if metric is None or not metric.n or metric.estimate is None or metric.low is None or metric.high is None:
        return "–"
    return f"{metric.estimate:.{digits}f} [{metric.low:.2f},{metric.high:.2f}]"


def _layout(header: list[str], body: list[list[str]], sep: str) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        sep.join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *body]
    ]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def _tables(rows: list[tuple[str, ScoreBlock]]) -> str:
    """The CCS table (3 decimals, with counts) and the AC/EF table (2 decimals) of ``rows``."""
    scores, rates = family("score"), family("rate")
    ccs = _layout(
        ["", *(m.label for m in scores), *(n for n, _ in _COUNTS)],
        [
            [
                label,
                *(_cell(block.metric(m.name), 3) for m in scores),
                *("–" if (c := block.counts.of_status(key)) is None else str(c) for _, key in _COUNTS),
            ]
            for label, block in rows
        ],
        "  ",
    )
    table = _layout(
        ["", *(m.label for m in rates)],
        [[label, *(_cell(block.metric(m.name), 2) for m in rates)] for label, block in rows],
        " ",
    )
    return "\n".join(ccs) + "\n\n" + "\n".join(table)


def _interval_note(rows: tuple[Metric, ...]) -> str:
    kinds = dict.fromkeys(m.interval for m in rows)
    return "; ".join(
        f"{INTERVAL_TEXT[k]} ({', '.join(m.label for m in rows if m.interval == k)})" for k in kinds
    )


def interval_note() -> str:
    """How the tables' 95% CIs are computed, per interval kind of the metric table's rows: one line
    per family, wrapped to the tables' 80 columns."""
    parts = (f"95% CIs: {_interval_note(family('score'))};", f"{_interval_note(family('rate'))}.")
    return "\n".join(textwrap.fill(part, width=80) for part in parts)


def score_table(summary: Results) -> str:
    """Rows: overall and each domain. CCS (3 decimals) with counts; then AC/EF (2 decimals)."""
    return _tables(summary.blocks()) + "\n\n" + interval_note()


def runs_table(runs: dict[str, Results]) -> str:
    """Several runs side by side (one row per run, e.g. ``edct demo``'s reference behaviours):
    the overall CCS with counts, then AC/EF, in the same two 80-column tables as ``score_table``."""
    return _tables([(label, summary.overall) for label, summary in runs.items()])
