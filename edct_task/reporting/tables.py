"""Report tables as data, and their Markdown, CSV and LaTeX (booktabs) renderings.

A table has display cells (estimates with their 95% CI, for Markdown and LaTeX) and raw cells
(numbers in their own columns, for CSV), built together so the two never disagree.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edct_task.scoring.results import MetricValue
from edct_task.text_safety import csv_number, md_cell, reveal, reveal_line

MISSING = "–"


@dataclass
class Table:
    """One report table."""

    name: str
    """File stem: ``table1`` → ``table1.md``, ``table1.csv``, ``table1.tex``."""
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    csv_columns: list[str] = field(default_factory=list)
    csv_rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, display: Sequence[str], raw: Sequence[Any]) -> None:
        if len(display) != len(self.columns) or len(raw) != len(self.csv_columns):
            raise ValueError(f"{self.name}: row width does not match the header")
        self.rows.append(list(display))
        self.csv_rows.append(list(raw))


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{value:.{digits}f}"


def _value(metric: MetricValue | Mapping[str, Any] | None) -> MetricValue | None:
    """``metric``, or its JSON (a board row's cell, ``MetricValue`` dumped), as a ``MetricValue``."""
    return MetricValue.model_validate(metric) if isinstance(metric, Mapping) else metric


def interval_cell(metric: MetricValue | Mapping[str, Any] | None) -> str:
    """``0.600 [0.550, 0.650]``; the estimate alone when there is no interval; – when nothing."""
    value = _value(metric)
    if value is None or value.estimate is None:
        return MISSING
    if value.low is None or value.high is None:
        return fmt(value.estimate)
    return f"{fmt(value.estimate)} [{fmt(value.low)}, {fmt(value.high)}]"


def interval_raw(metric: MetricValue | None) -> list[Any]:
    """estimate, low, high, n (empty cells where absent)."""
    if metric is None:
        return ["", "", "", ""]
    return [_raw(v) for v in (metric.estimate, metric.low, metric.high, metric.n)]


def _raw(value: Any) -> Any:
    return "" if value is None else value


def to_markdown(table: Table) -> str:
    def cell(text: str) -> str:
        return md_cell(text)

    lines = [f"### {table.title}", ""]
    lines.append("| " + " | ".join(cell(c) for c in table.columns) + " |")
    lines.append("|" + "|".join(" --- " for _ in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    if not table.rows:
        lines.append("| " + " | ".join(MISSING for _ in table.columns) + " |")
    if table.notes:
        lines.append("")
        lines.extend(f"- {reveal_line(n)}" for n in table.notes)
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.csv_columns)
    writer.writerows(
        [reveal(c) if isinstance(c, str) else csv_number(c) for c in row] for row in table.csv_rows
    )
    return buf.getvalue()


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "τ": r"$\tau$",
    "±": r"$\pm$",
    "ρ": r"$\rho$",
    "κ": r"$\kappa$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "→": r"$\rightarrow$",
    "−": r"$-$",
    "–": "--",
    "—": "---",
    "…": r"\ldots{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in reveal_line(text))


_NUMBERED = re.compile(r"Table (\d+):\s*(.*)", re.S)


def split_title(title: str) -> tuple[str | None, str]:
    """``"Table 5: repeated runs"`` → ``("5", "repeated runs")``; an unnumbered title → ``(None, title)``."""
    m = _NUMBERED.fullmatch(title)
    return (m.group(1), m.group(2)) if m else (None, title)


def to_latex(table: Table) -> str:
    """A ``table`` float with a booktabs ``tabular`` (needs ``\\usepackage{booktabs}`` and
    ``\\usepackage{graphicx}``).

    The caption is the title without its "Table N:" (LaTeX writes that), and the float carries the
    paper's number N (``\\thetable`` set inside the float), so Table 5 stays Table 5 whatever
    tables precede it. A table wider than the text is scaled down to ``\\linewidth``; a narrower
    one keeps its natural size.
    """
    number, caption = split_title(table.title)
    spec = "l" * min(2, len(table.columns)) + "r" * max(0, len(table.columns) - 2)
    lines = [
        "% requires \\usepackage{booktabs} and \\usepackage{graphicx}",
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
    ]
    if number is not None:
        lines.append(f"\\renewcommand{{\\thetable}}{{{number}}}")
    lines += [
        f"\\caption{{{latex_escape(caption)}}}",
        f"\\label{{tab:edct-{table.name}}}",
        "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(latex_escape(c) for c in table.columns) + " \\\\",
        "\\midrule",
    ]
    for row in table.rows:
        lines.append(" & ".join(latex_escape(c) for c in row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}%", "}", "\\end{table}"]
    return "\n".join(lines) + "\n"
