"""``edct report``: results in, the paper's tables, Fig. 5 and report.json out.

``report.json``::

    {"models": [{"name", "key", "flags", "edct": {metric: {"estimate", "low", "high", "n", "source"}},
                 "counts", "per_domain": {domain: {metric: {...}}}, "runs": [...],
                 "benchmarks": {task: {"score", "raw_score", "scale", "source", "metric", "judge", "note"}}}],
     "differences": [{"setup_id", "a", "b", "a_source", "b_source", "ccs_binary": {"difference", "low",
                      "high", "p", "p_holm", "test", "n_paired", "dropped"}, "ccs_graded": {...}}],
     "correlations": [{"benchmark", "metric", "spearman", "kendall", "n_models", "models", "source"}],
     "setups": [{"id", "label", "setup", "runs": [{"model", "source", "seed"}]}],
     "tables": {name: [files]}, "figures": [files], "inputs": [...], "notes": [...]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edct_task.audit.links import ValidationOutputs, markdown_lines, validation_outputs
from edct_task.engine.files import atomic_write, json_text
from edct_task.reporting import paper_tables
from edct_task.reporting.differences import difference_rows, differences_table
from edct_task.reporting.figures import Panel, Point, figure5, rank_correlation
from edct_task.reporting.setup import setup_label
from edct_task.reporting.sources import BundleReader, Collection, collect
from edct_task.reporting.tables import Table, to_csv, to_latex, to_markdown
from edct_task.scoring.health import REASONS, WARN_RATE, judge_health
from edct_task.text_safety import md_cell, reveal_line

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
FIGURE_STEM = "fig5_ccs_vs_benchmarks"


def correlations_and_panels(collection: Collection) -> tuple[list[dict[str, Any]], list[Panel]]:
    """Rank correlations of CCS with every benchmark, and Fig. 5's panels (≥2 models each)."""
    correlations, panels = [], []
    ccs = {key: paper_tables.primary_metrics(m)[0] for key, m in collection.models.items()}
    for task, display in paper_tables.benchmark_columns(collection):
        points = []
        for key, model in collection.models.items():
            score = model.benchmarks.get(task)
            metrics = ccs[key]
            b = (metrics.get("ccs_binary") or {}).get("estimate")
            g = (metrics.get("ccs_graded") or {}).get("estimate")
            if score is not None and (b is not None or g is not None):
                points.append(Point(model.name, score.score, b, g))
        for metric in ("ccs_binary", "ccs_graded"):
            pts = [p for p in points if getattr(p, metric) is not None]
            c = rank_correlation([p.x for p in pts], [getattr(p, metric) for p in pts])
            correlations.append(
                {
                    "benchmark": task,
                    "display": display,
                    "metric": metric,
                    **c,
                    "models": [p.model for p in pts],
                    "source": "scipy.stats.spearmanr / kendalltau over the models' normalised benchmark "
                    f"score and {metric} (see models[].benchmarks and models[].edct)",
                }
            )
        if len(points) >= 2:
            panels.append(Panel(task, display, tuple(points)))
    return correlations, panels


def _model_json(model: Any) -> dict[str, Any]:
    metrics, source = paper_tables.primary_metrics(model)
    runs = paper_tables.primary_runs(model)
    per_domain = runs[0].summary.get("per_domain", {}) if len(runs) == 1 else {}
    counts = runs[0].summary["overall"].get("counts", {}) if len(runs) == 1 else {}
    return {
        "name": model.name,
        "key": model.key,
        "flags": model.flags,
        "edct": {m: {**v, "source": source} for m, v in metrics.items()},
        "counts": counts,
        "per_domain": {
            d: {
                **{
                    m: {**v, "source": f"{runs[0].metric_source} [per_domain.{d}]"}
                    for m, v in b["metrics"].items()
                },
                "counts": b.get("counts", {}),
            }
            for d, b in per_domain.items()
        },
        "runs": [
            {
                "source": r.source,
                "kind": r.kind,
                "task": r.task,
                "setup_id": r.setup_id,
                "seed": r.seed,
                "metrics": r.summary["overall"]["metrics"],
                "counts": r.summary["overall"].get("counts", {}),
                "metric_source": r.metric_source,
                "flags": r.flags,
                "judge_health": judge_health(r.records),
            }
            for r in model.edct
        ],
        "benchmarks": {task: s.as_dict() for task, s in model.benchmarks.items()},
    }


def _setups_json(collection: Collection) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for model in collection.models.values():
        for r in model.edct:
            entry = out.setdefault(
                r.setup_id, {"id": r.setup_id, "label": setup_label(r.setup), "setup": r.setup, "runs": []}
            )
            entry["runs"].append({"model": model.name, "source": r.source, "seed": r.seed, "task": r.task})
    return list(out.values())


def write_table(table: Table, out: Path) -> list[str]:
    files = {".md": to_markdown(table), ".csv": to_csv(table), ".tex": to_latex(table)}
    names = []
    for suffix, text in files.items():
        path = out / f"{table.name}{suffix}"
        atomic_write(path, text)
        names.append(path.name)
    return names


def build_report(
    paths: Sequence[Path],
    out: Path,
    labels: Mapping[Path, str] | None = None,
    *,
    read_bundle: BundleReader | None = None,
) -> dict[str, Any]:
    """Read ``paths``, write every table, Fig. 5 and report.json into ``out``; return report.json."""
    collection = collect(paths, labels, read_bundle=read_bundle)
    return write_report(collection, out)


def _validation(collection: Collection) -> list[ValidationOutputs]:
    """The audit pages, label files and agreement tables found in the runs read (``edct audit`` …)."""
    runs = [Path(i["path"]) for i in collection.inputs if i["kind"] in ("edct-run", "lmms-eval")]
    folders = {p if p.is_dir() else p.parent for p in runs}
    found = [validation_outputs(f) for f in sorted(folders)]
    return [v for v in found if v.any]


def judge_health_table(collection: Collection) -> Table:
    """Each run's judge health, recomputed from its records (never taken from a claimed number);
    rates above ``scoring.health.WARN_RATE`` are marked."""
    columns = ["Model", "Run", "Judge", "Kind", "Judgements", "Unscored", "By reason"]
    table = Table(
        "judge_health",
        "Judge health: unscored judgements by reason (truncated, refused, malformed, transport)",
        columns,
        csv_columns=["model", "run", "judge", "kind", "n", "unscored", "rate", *REASONS],
    )
    for model in collection.models.values():
        for run in model.edct:
            for judge, kinds in judge_health(run.records).items():
                for kind, c in kinds.items():
                    reasons = ", ".join(f"{r} {n}" for r, n in c["by_reason"].items()) or "–"
                    warn = " (!)" if c["rate"] > WARN_RATE else ""
                    table.add(
                        [
                            model.name,
                            run.source,
                            judge,
                            kind,
                            str(c["n"]),
                            f"{c['unscored']} ({c['rate']:.1%}){warn}",
                            reasons,
                        ],
                        [
                            model.name,
                            run.source,
                            judge,
                            kind,
                            c["n"],
                            c["unscored"],
                            c["rate"],
                            *(c["by_reason"].get(r, 0) for r in REASONS),
                        ],
                    )
    return table


def write_report(collection: Collection, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    differences = difference_rows(collection)
    tables = [
        paper_tables.table1(collection),
        *([differences_table(differences)] if differences else []),
        paper_tables.table2(collection),
        paper_tables.table3(collection),
        paper_tables.table5(collection),
        paper_tables.benchmark_table(collection),
    ]
    correlations, panels = correlations_and_panels(collection)
    notes = list(collection.notes)
    for t in tables:  # an empty table is not written (Markdown, CSV, LaTeX); the note says why
        if not t.rows:
            notes.append(f"{t.title.split(':', 1)[0]} not written: {' '.join(t.notes) or 'no rows'}")
    tables = [t for t in tables if t.rows]
    table_files = {t.name: write_table(t, out) for t in tables}
    figures: list[str] = []
    if panels:
        corr = {(c["benchmark"], c["metric"]): c for c in correlations}
        figures = [p.name for p in figure5(panels, corr, out / FIGURE_STEM)]
    else:
        notes.append("Fig. 5 not drawn: no benchmark was found for two or more models that have CCS.")
    validation = _validation(collection)
    report = {
        "models": [_model_json(m) for m in collection.models.values()],
        "differences": differences,
        "correlations": correlations,
        "setups": _setups_json(collection),
        "tables": table_files,
        "figures": figures,
        "inputs": collection.inputs,
        "validation": [
            {
                "run": str(v.run),
                "audit_index": str(v.audit_index) if v.audit_index else None,
                "labels": v.labels,
                "agreement": str(v.agreement) if v.agreement else None,
            }
            for v in validation
        ],
        "notes": notes,
    }
    report_json = json_text(report, indent=2, ensure_ascii=False) + "\n"
    md = ["# EDCT report", ""]
    for t in tables:
        md.append(to_markdown(t))
    md.append("### Rank correlations of CCS with other benchmarks (Spearman ρ, Kendall τ; scipy.stats)")
    md.append("")
    md.append("| Benchmark | Metric | ρ | τ | models | note |")
    md.append("| --- | --- | --- | --- | --- | --- |")
    for c in correlations:
        rho = "–" if c["spearman"] is None else f"{c['spearman']:.3f}"
        tau = "–" if c["kendall"] is None else f"{c['kendall']:.3f}"
        md.append(
            f"| {md_cell(c['display'])} | {md_cell(c['metric'])} | {rho} | {tau} | {c['n_models']} "
            f"| {md_cell(c['note'])} |"
        )
    md.append("")
    if figures:
        md.append(f"![Fig. 5: CCS vs other benchmarks]({FIGURE_STEM}.png)")
        md.append("")
    health = judge_health_table(collection)
    if health.rows:
        md.append(to_markdown(health))
    if validation:
        md += ["### Audit reports and human validation", ""]
        for v in validation:
            md.append(f"- `{v.run}`:")
            md.extend(f"  {line}" for line in markdown_lines(v, relative_to=out))
        md.append("")
    md.extend(f"- {reveal_line(n)}" for n in notes)
    atomic_write(out / REPORT_MD, "\n".join(md) + "\n")
    atomic_write(out / REPORT_JSON, report_json)  # last: it is the one other tools read
    return report
