"""Plain-text score tables for the terminal (the JSON results are the citable artefact)."""

from __future__ import annotations

from typing import Any

from edct_task.scoring.metrics import CCS_BINARY, CCS_GRADED, POSITIONS, ac_name, ef_name

_COLUMNS = (
    ("CCS_binary", CCS_BINARY),
    ("CCS_graded", CCS_GRADED),
    *((f"AC k={k}", ac_name(k)) for k in POSITIONS),
    *((f"EF k={k}", ef_name(k)) for k in POSITIONS),
)


def _cell(metric: dict[str, Any]) -> str:
    if not metric.get("n"):
        return "–"
    return f"{metric['estimate']:.3f} [{metric['low']:.2f},{metric['high']:.2f}]"


def score_table(summary: dict[str, Any]) -> str:
    """Rows: overall and each domain; columns: the metrics with 95% CIs, then counts."""
    rows = [("overall", summary["overall"]), *sorted(summary["per_domain"].items())]
    header = ["", *(name for name, _ in _COLUMNS), "scored", "excluded", "unscored", "error"]
    body = []
    for label, block in rows:
        c = block["counts"]
        body.append(
            [
                label,
                *(_cell(block["metrics"][key]) for _, key in _COLUMNS),
                str(c["scored"]),
                str(c["excluded"]),
                str(c["unscored"]),
                str(c["error"]),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *body]
    ]
    lines.insert(1, "-" * len(lines[0]))
    return (
        "\n".join(lines)
        + "\n\n95% CIs: percentile bootstrap over samples (CCS), Wilson (AC/EF at chain position k)."
    )
