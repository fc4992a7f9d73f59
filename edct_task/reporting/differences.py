"""The report's "differences" table, beside Table 1: every pair of runs of one setup, compared item by item.

Two runs are paired only under the same setup (``reporting.setup``: judge, editor, protocol,
thresholds, prompts and dataset), so the table has a row for each pair of runs inside each setup
group, none across groups. Each row is ``scoring.compare.compare_paired`` of CCS_binary and of
CCS_graded over the items both runs scored: the difference A − B with its 95 % percentile-bootstrap
CI (items resampled), the two-sided sign-flip p-value, and the p-value Holm-corrected over the
table's rows (one family per metric).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from edct_task.reporting.sources import Collection, EdctRun
from edct_task.reporting.tables import MISSING, Table
from edct_task.scoring.compare import holm, p_text, pair_records, paired_metrics, paired_summary
from edct_task.scoring.metrics import PRIMARY, metric_row

RESAMPLES = 10_000
SEED = 0


def _labels(collection: Collection) -> dict[int, str]:
    """A run's name in the table: its model, with the seed where the model has several runs."""
    out = {}
    for model in collection.models.values():
        for run in model.edct:
            several = len(model.edct) > 1
            out[id(run)] = f"{model.name} (seed {run.seed})" if several else model.name
    return out


def difference_rows(collection: Collection) -> list[dict[str, Any]]:
    """One dict per pair of runs of one setup: ``setup_id``, ``a``, ``b``, and per metric the
    difference, low, high, p, p_holm, test and n_paired."""
    groups: dict[str, list[EdctRun]] = {}
    for model in collection.models.values():
        for run in model.edct:
            if run.records:
                groups.setdefault(run.setup_id, []).append(run)
    labels = _labels(collection)
    rows: list[dict[str, Any]] = []
    for setup_id, runs in groups.items():
        for a, b in combinations(runs, 2):
            row: dict[str, Any] = {"setup_id": setup_id, "a": labels[id(a)], "b": labels[id(b)]}
            row["a_source"], row["b_source"] = a.source, b.source
            for metric in paired_metrics():
                paired = pair_records(a.records, b.records, metric)
                row[metric] = {
                    **paired_summary(paired, metric, n_resamples=RESAMPLES, seed=SEED),
                    "dropped": paired.dropped,
                }
            rows.append(row)
    for metric in paired_metrics():
        for row, adjusted in zip(rows, holm([r[metric]["p"] for r in rows]), strict=True):
            row[metric]["p_holm"] = float(adjusted)
    return rows


def _cell(m: dict[str, Any]) -> str:
    if m["difference"] is None:
        return MISSING
    return f"{m['difference']:+.3f} [{m['low']:+.3f}, {m['high']:+.3f}]"


def differences_table(rows: list[dict[str, Any]]) -> Table:
    """The rows as a report table (Markdown, CSV, LaTeX)."""
    columns = ["Setup", "A", "B", "Items"]
    csv_columns = ["setup_id", "a", "b"]
    for metric in paired_metrics():
        columns += [f"{metric_row(metric).label} A − B [95% CI]", "p", "p (Holm)"]
        csv_columns += [f"{metric}_{k}" for k in ("difference", "low", "high", "p", "p_holm", "n_paired")]
    t = Table(
        "differences",
        "Differences: paired A − B over the items both runs scored (95% percentile-bootstrap CI over "
        "items; two-sided sign-flip permutation p; Holm-corrected over the table's pairs, per metric)",
        columns,
        csv_columns=csv_columns,
    )
    for r in rows:
        display = [r["setup_id"], r["a"], r["b"], str(r[PRIMARY.name]["n_paired"])]
        raw: list[Any] = [r["setup_id"], r["a"], r["b"]]
        for metric in paired_metrics():
            m = r[metric]
            display += [_cell(m), p_text(m["p"], m["test"], m["n_resamples"]), p_text(m["p_holm"], "", 0)]
            raw += [m["difference"], m["low"], m["high"], m["p"], m["p_holm"], m["n_paired"]]
        t.add(display, ["" if v is None else v for v in raw])
    if rows:
        t.notes.append(
            "Items: the items both runs scored on CCS_binary; runs are paired only within one setup "
            f"(seed {SEED}, {RESAMPLES} resamples; exact sign-flip test up to 16 non-zero differences, "
            "Monte Carlo above)."
        )
    return t
