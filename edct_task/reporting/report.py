"""``edct report``: results in, the paper's tables, Fig. 5 and report.json out.

``report.json``::

    {"models": [{"name", "key", "flags", "edct": {metric: {"estimate", "low", "high", "n", "source"}},
                 "counts", "per_domain": {domain: {metric: {...}}}, "runs": [...],
                 "benchmarks": {task: {"score", "raw_score", "scale", "source", "metric", "judge", "note"}}}],
     "differences": [{"setup_id", "a", "b", "a_source", "b_source", "ccs_binary": {"difference", "low",
                      "high", "p", "p_holm", "test", "n_paired", "dropped"}, "ccs_graded": {...}}],
     "correlations": [{"benchmark", "metric", "spearman", "kendall", "n_models", "models", "source"}],
     "setups": [{"id", "label", "setup", "runs": [{"model", "source", "seed"}]}],
     "unreliable": [{"model", "source", "reasons"}],
     "tables": {name: [files]}, "figures": [files], "inputs": [...], "notes": [...]}

A run whose known-answer controls put a text role below the bar (``scoring.controls``) is
*unreliable*: ``report.md`` opens with an **UNRELIABLE RUN** notice naming it and its reasons, and
the ``controls`` table lists every run's controls (role, judge, n, correct, accuracy, 95% CI). A
run made before controls has no ``controls`` block: "controls: not run", not unreliable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
from edct_task.scoring.controls import controls_rows, controls_status
from edct_task.scoring.health import REASONS, SIGNALS, WARN_RATE, judge_health, signal_summary
from edct_task.scoring.metrics import GRADED, PRIMARY
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
            b = None if (v := metrics.get(PRIMARY.name)) is None else v.estimate
            g = None if (v := metrics.get(GRADED.name)) is None else v.estimate
            if score is not None and (b is not None or g is not None):
                points.append(Point(model.name, score.score, b, g))
        series: tuple[tuple[str, Callable[[Point], float | None]], ...] = (
            (PRIMARY.name, lambda p: p.ccs_binary),
            (GRADED.name, lambda p: p.ccs_graded),
        )
        for metric, value in series:
            pts = [p for p in points if value(p) is not None]
            c = rank_correlation([p.x for p in pts], [value(p) for p in pts])  # type: ignore[misc]
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
    per_domain = runs[0].summary.per_domain if len(runs) == 1 else {}
    counts = runs[0].summary.overall.counts.known() if len(runs) == 1 else {}
    return {
        "name": model.name,
        "key": model.key,
        "flags": model.flags,
        "edct": {m: {**v.model_dump(), "source": source} for m, v in metrics.items()},
        "counts": counts,
        "per_domain": {
            d: {
                **{
                    m: {**v.model_dump(), "source": f"{runs[0].metric_source} [per_domain.{d}]"}
                    for m, v in b.metrics.items()
                },
                "counts": b.counts.known(),
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
                "metrics": {m: v.model_dump() for m, v in r.summary.overall.metrics.items()},
                "counts": r.summary.overall.counts.known(),
                "metric_source": r.metric_source,
                "flags": r.flags,
                "judge_health": judge_health(r.records),
                "controls": r.controls,
                "controls_status": controls_status(r.controls),
                "unreliable": r.unreliable,
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
    rates above ``scoring.health.WARN_RATE`` are marked; the signals of a degenerate judge among
    the verdicts read (``scoring.health.SIGNALS``, all identical) in the last column."""
    columns = ["Model", "Run", "Judge", "Kind", "Judgements", "Unscored", "By reason", "Signals"]
    table = Table(
        "judge_health",
        "Judge health: unscored judgements by reason (truncated, refused, malformed, transport, "
        "echoed), and signals of a degenerate judge among those read",
        columns,
        csv_columns=[
            "model",
            "run",
            "judge",
            "kind",
            "n",
            "unscored",
            "rate",
            *REASONS,
            *SIGNALS,
            "identical",
        ],
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
                            signal_summary(c) or "–",
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
                            *(c.get("signals", {}).get(sig, 0) for sig in SIGNALS),
                            bool(c.get("signals", {}).get("identical")),
                        ],
                    )
    return table


def controls_table(collection: Collection) -> Table:
    """Every run's known-answer controls: per role and judge, n, correct, accuracy and 95% CI;
    a run made before controls is one row saying so."""
    columns = ["Model", "Run", "Role", "Judge", "n", "Correct", "Accuracy", "95% CI", "Bar"]
    table = Table(
        "controls",
        "Known-answer controls: how each text role answered controls with a known verdict",
        columns,
        csv_columns=[
            "model",
            "run",
            "role",
            "judge",
            "n",
            "correct",
            "accuracy",
            "low",
            "high",
            "bar",
            "status",
        ],
    )
    for model in collection.models.values():
        for run in model.edct:
            rows = controls_rows(run.controls)
            if not rows:
                status = controls_status(run.controls)
                table.add(
                    [model.name, run.source, f"controls: {status}", "–", "–", "–", "–", "–", "–"],
                    [model.name, run.source, None, None, None, None, None, None, None, None, status],
                )
                continue
            bar = (run.controls or {}).get("bar")
            for r in rows:
                ci = r["ci"] or [None, None]
                acc = "–" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
                ci_text = "–" if r["ci"] is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
                flag = " BELOW THE BAR" if r["below_bar"] else ""
                table.add(
                    [
                        model.name,
                        run.source,
                        r["role"],
                        r["judge"],
                        str(r["n"]),
                        str(r["correct"]),
                        acc + flag,
                        ci_text,
                        "–" if bar is None else f"{bar:.2f}",
                    ],
                    [
                        model.name,
                        run.source,
                        r["role"],
                        r["judge"],
                        r["n"],
                        r["correct"],
                        r["accuracy"],
                        ci[0],
                        ci[1],
                        bar,
                        "below the bar" if r["below_bar"] else "passed",
                    ],
                )
    return table


def unreliable_runs(collection: Collection) -> list[dict[str, Any]]:
    """The unreliable runs read: model, source and the reasons (one line per role below the bar)."""
    return [
        {"model": model.name, "source": run.source, "reasons": run.unreliable}
        for model in collection.models.values()
        for run in model.edct
        if run.unreliable
    ]


def unreliable_notice(unreliable: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown notice ``report.md`` opens with when a run is unreliable (none otherwise)."""
    if not unreliable:
        return []
    lines = [
        "> **UNRELIABLE RUN**: a text role answered its known-answer controls below the bar; "
        "the scores of these runs cannot be trusted (see the controls table).",
        ">",
    ]
    for u in unreliable:
        lines.append(f"> - {_run_cell(u)}:")
        lines.extend(f">   - {md_cell(reason)}" for reason in u["reasons"])
    return [*lines, ""]


def _run_cell(run: dict[str, Any]) -> str:
    """A notice's run: its source as code (backticks in it made quotes), then its model."""
    return f"`{reveal_line(run['source']).replace('`', chr(39))}` ({md_cell(run['model'])})"


def partial_runs(collection: Collection) -> list[dict[str, Any]]:
    """The partial runs read (``edct merge --allow-missing``): model, source and the label."""
    return [
        {"model": model.name, "source": run.source, "label": run.partial}
        for model in collection.models.values()
        for run in model.edct
        if run.partial
    ]


def partial_notice(partial: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown notice ``report.md`` opens with when a run is partial (none otherwise)."""
    if not partial:
        return []
    lines = [
        "> **PARTIAL RUN**: merged with `--allow-missing`; its numbers cover only the slices "
        "that were run and are not comparable with complete runs.",
        ">",
    ]
    for p in partial:
        lines.append(f"> - {_run_cell(p)}: {md_cell(p['label'])}")
    return [*lines, ""]


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
    controls = controls_table(collection)
    if any(run.controls is not None for m in collection.models.values() for run in m.edct):
        tables.append(controls)
    unreliable = unreliable_runs(collection)
    partial = partial_runs(collection)
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
        "unreliable": unreliable,
        "partial": partial,
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
    md = ["# EDCT report", "", *partial_notice(partial), *unreliable_notice(unreliable)]
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
