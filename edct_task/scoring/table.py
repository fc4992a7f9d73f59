"""Plain-text score tables for the terminal (the JSON results are the citable artefact).

Two tables that fit an 80-column terminal: CCS with its CI and the sample counts per row, then
AC and EF at each chain position with theirs.
"""

from __future__ import annotations

from typing import Any

from edct_task.scoring.metrics import CCS_BINARY, CCS_GRADED, POSITIONS, ac_name, ef_name

_CCS = (("CCS_binary", CCS_BINARY), ("CCS_graded", CCS_GRADED))
_RATES = tuple(
    (f"{label} k={k}", name(k)) for k in POSITIONS for label, name in (("AC", ac_name), ("EF", ef_name))
)
_COUNTS = (("scored", "scored"), ("excl.", "excluded"), ("unsc.", "unscored"), ("error", "error"))


def _cell(metric: dict[str, Any], digits: int) -> str:
    if not metric.get("n"):
        return "–"
    return f"{metric['estimate']:.{digits}f} [{metric['low']:.2f},{metric['high']:.2f}]"


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


def _tables(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """The CCS table (3 decimals, with counts) and the AC/EF table (2 decimals) of ``rows``."""
    ccs = _layout(
        ["", *(n for n, _ in _CCS), *(n for n, _ in _COUNTS)],
        [
            [
                label,
                *(_cell(block["metrics"][key], 3) for _, key in _CCS),
                *(str(block["counts"][key]) for _, key in _COUNTS),
            ]
            for label, block in rows
        ],
        "  ",
    )
    rates = _layout(
        ["", *(n for n, _ in _RATES)],
        [[label, *(_cell(block["metrics"][key], 2) for _, key in _RATES)] for label, block in rows],
        " ",
    )
    return "\n".join(ccs) + "\n\n" + "\n".join(rates)


def score_table(summary: dict[str, Any]) -> str:
    """Rows: overall and each domain. CCS (3 decimals) with counts; then AC/EF (2 decimals)."""
    rows = [("overall", summary["overall"]), *sorted(summary["per_domain"].items())]
    return (
        _tables(rows)
        + "\n\n95% CIs: percentile bootstrap over samples (CCS);"
        + "\nWilson score intervals (AC/EF at chain position k)."
    )


def runs_table(runs: dict[str, dict[str, Any]]) -> str:
    """Several runs side by side (one row per run, e.g. ``edct demo``'s reference behaviours):
    the overall CCS with counts, then AC/EF, in the same two 80-column tables as ``score_table``."""
    return _tables([(label, summary["overall"]) for label, summary in runs.items()])
