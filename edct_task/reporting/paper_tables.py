"""The paper's tables from collected results: Table 1, 2, 3, 5 and CCS beside other benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edct_task.reporting.benchmarks import BenchmarkScore
from edct_task.reporting.setup import setup_label
from edct_task.reporting.sources import Collection, EdctRun, ModelResults
from edct_task.reporting.tables import MISSING, Table, fmt, interval_cell, interval_raw
from edct_task.scoring.metrics import family, metrics
from edct_task.scoring.results import MetricValue
from edct_task.scoring.statistics import mean_sd

COUNT_COLUMNS = ("scored", "excluded", "unscored", "error")


def table1_metrics() -> tuple[tuple[str, str], ...]:
    """(label, name) of every metric in the paper's Table 1 order: the rates (AC/EF per k), then
    the scores (CCS), from the metric table."""
    return tuple((m.label, m.name) for m in (*family("rate"), *family("score")))


def ccs_metrics() -> tuple[tuple[str, str], ...]:
    """(label, name) of the score metrics (CCS_binary, CCS_graded, …): the CCS tables' columns."""
    return tuple((m.label, m.name) for m in family("score"))


def run_label(model: ModelResults, run: EdctRun) -> str:
    """The model's name, plus the run's task and seed when the model has several runs."""
    if len(model.edct) == 1:
        return model.name
    return f"{model.name} [{run.task}, setup {run.setup_id}, seed {run.seed}]"


def table1(collection: Collection) -> Table:
    """Per model: AC/EF at k=1 and k=2, CCS_binary, CCS_graded with 95% CIs, and the counts."""
    t = Table(
        "table1",
        "Table 1: EDCT scores per model (95% CIs: percentile bootstrap for CCS, Wilson for AC/EF)",
        ["Model", "Benchmark", "Setup", *(c for c, _ in table1_metrics()), *COUNT_COLUMNS, "Flags"],
        csv_columns=[
            "model",
            "benchmark",
            "setup_id",
            *(f"{m}_{part}" for _, m in table1_metrics() for part in ("estimate", "low", "high", "n")),
            *COUNT_COLUMNS,
            "source",
            "flags",
        ],
    )
    for model in collection.models.values():
        if not model.edct:
            flags = "; ".join(model.flags)
            t.add(
                [model.name, MISSING, MISSING, *(MISSING for _ in table1_metrics()), *(MISSING,) * 4, flags],
                [model.name, "", "", *([""] * 4 * len(table1_metrics())), *([""] * 4), "", flags],
            )
            continue
        for run in model.edct:
            overall = run.summary.overall
            counts = overall.counts.known()
            flags = "; ".join(run.flags)
            t.add(
                [
                    run_label(model, run),
                    run.task,
                    run.setup_id,
                    *(interval_cell(overall.metric(m)) for _, m in table1_metrics()),
                    *(str(counts.get(c, MISSING)) for c in COUNT_COLUMNS),
                    flags,
                ],
                [
                    model.name,
                    run.task,
                    run.setup_id,
                    *(x for _, m in table1_metrics() for x in interval_raw(overall.metric(m))),
                    *(counts.get(c, "") for c in COUNT_COLUMNS),
                    run.metric_source,
                    flags,
                ],
            )
    t.notes.append(
        "Excluded (edit failed verification after its retry), unscored and errored samples are "
        "counted, never scored 0. Setups: see report.json `setups`."
    )
    return t


def table2(collection: Collection) -> Table:
    """The same target under different judge × editor setups."""
    t = Table(
        "table2",
        "Table 2: the same target under different judge × editor setups",
        ["Model", "Judge / editor / extractor / k / τ", "Setup", *(c for c, _ in ccs_metrics()), "Runs"],
        csv_columns=[
            "model",
            "setup_label",
            "setup_id",
            *(f"{m}_{p}" for _, m in ccs_metrics() for p in ("estimate", "low", "high", "n")),
            "runs",
        ],
    )
    for model in collection.models.values():
        groups = setup_groups(model.edct)
        if len(groups) < 2:
            continue
        for sid, runs in groups.items():
            metrics = pooled_metrics(runs)
            t.add(
                [
                    model.name,
                    setup_label(runs[0].setup),
                    sid,
                    *(interval_cell(metrics.get(m)) for _, m in ccs_metrics()),
                    str(len(runs)),
                ],
                [
                    model.name,
                    setup_label(runs[0].setup),
                    sid,
                    *(x for _, m in ccs_metrics() for x in interval_raw(metrics.get(m))),
                    len(runs),
                ],
            )
    if not t.rows:
        t.notes.append("No model was given runs under more than one setup.")
    else:
        t.notes.append("Several runs of one setup: mean of their estimates (no interval).")
    return t


def table3(collection: Collection) -> Table:
    """Per-domain CCS_binary and CCS_graded with CIs."""
    t = Table(
        "table3",
        "Table 3: CCS per domain (95% percentile-bootstrap CIs)",
        ["Model", "Domain", *(c for c, _ in ccs_metrics()), "Scored", "Excluded", "Unscored"],
        csv_columns=[
            "model",
            "setup_id",
            "domain",
            *(f"{m}_{p}" for _, m in ccs_metrics() for p in ("estimate", "low", "high", "n")),
            "scored",
            "excluded",
            "unscored",
        ],
    )
    for model in collection.models.values():
        for run in model.edct:
            if not run.summary.per_domain:
                continue
            for domain, block in sorted(run.summary.per_domain.items()):
                c = block.counts.known()
                t.add(
                    [
                        run_label(model, run),
                        domain,
                        *(interval_cell(block.metric(m)) for _, m in ccs_metrics()),
                        str(c.get("scored", MISSING)),
                        str(c.get("excluded", MISSING)),
                        str(c.get("unscored", MISSING)),
                    ],
                    [
                        model.name,
                        run.setup_id,
                        domain,
                        *(x for _, m in ccs_metrics() for x in interval_raw(block.metric(m))),
                        c.get("scored", ""),
                        c.get("excluded", ""),
                        c.get("unscored", ""),
                    ],
                )
    without = [m.name for m in collection.models.values() for r in m.edct if not r.summary.per_domain]
    if without:
        t.notes.append("No per-domain numbers (no sample records) for: " + ", ".join(sorted(set(without))))
    return t


@dataclass(frozen=True)
class Stability:
    model: str
    setup_id: str
    runs: int
    values: dict[str, list[float]]
    mean_sd: dict[str, tuple[float, float]]


def stability_rows(collection: Collection) -> list[Stability]:
    out = []
    for model in collection.models.values():
        for sid, runs in setup_groups(model.edct).items():
            if len(runs) < 2:
                continue
            values = {
                m: [v for r in runs if (v := r.summary.overall.estimate(m)) is not None]
                for m in (row.name for row in metrics())
            }
            out.append(
                Stability(model.name, sid, len(runs), values, {m: mean_sd(v) for m, v in values.items() if v})
            )
    return out


def table5(collection: Collection) -> Table:
    """Repeated runs of one setup: mean ± SD (ddof=1) of every metric."""
    t = Table(
        "table5",
        "Table 5: repeated runs of one setup, mean ± SD over runs",
        ["Model", "Setup", "Runs", *(c for c, _ in table1_metrics())],
        csv_columns=[
            "model",
            "setup_id",
            "runs",
            *(f"{m}_{p}" for _, m in table1_metrics() for p in ("mean", "sd")),
        ],
    )
    for s in stability_rows(collection):
        cells, raw = [], []
        for _, m in table1_metrics():
            if m in s.mean_sd:
                mean, sd = s.mean_sd[m]
                cells.append(f"{mean:.4f} ± {sd:.4f}")
                raw += [mean, sd]
            else:
                cells.append(MISSING)
                raw += ["", ""]
        t.add([s.model, s.setup_id, str(s.runs), *cells], [s.model, s.setup_id, s.runs, *raw])
    if not t.rows:
        t.notes.append("No setup was run more than once for one model.")
    else:
        t.notes.append(
            "SD is the sample standard deviation (ddof = 1) over runs that differ only in their seed."
        )
    return t


def setup_groups(runs: Sequence[EdctRun]) -> dict[str, list[EdctRun]]:
    out: dict[str, list[EdctRun]] = {}
    for r in runs:
        out.setdefault(r.setup_id, []).append(r)
    return out


def pooled_metrics(runs: Sequence[EdctRun]) -> dict[str, MetricValue]:
    """One run: its metrics with CIs. Several: the mean of their estimates (no interval; ``n``
    the runs that have one)."""
    if len(runs) == 1:
        return dict(runs[0].summary.overall.metrics)
    out = {}
    for m in (row.name for row in metrics()):
        values = [v for r in runs if (v := r.summary.overall.estimate(m)) is not None]
        mean = sum(values) / len(values) if values else None
        out[m] = MetricValue(estimate=mean, low=None, high=None, n=len(values), method=None)
    return out


def primary_runs(model: ModelResults) -> list[EdctRun]:
    """The runs that stand for a model beside other benchmarks: its most repeated setup (first on ties)."""
    groups = setup_groups(model.edct)
    if not groups:
        return []
    return max(groups.values(), key=len)


def primary_metrics(model: ModelResults) -> tuple[dict[str, MetricValue], str]:
    runs = primary_runs(model)
    if not runs:
        return {}, ""
    if len(runs) == 1:
        return pooled_metrics(runs), runs[0].metric_source
    return pooled_metrics(runs), f"mean of {len(runs)} runs of setup {runs[0].setup_id}: " + ", ".join(
        r.source for r in runs
    )


def benchmark_columns(collection: Collection) -> list[tuple[str, str]]:
    """(task, display) of every benchmark found, in order of first appearance."""
    out: dict[str, str] = {}
    for m in collection.models.values():
        for task, score in m.benchmarks.items():
            out.setdefault(task, score.display)
    return list(out.items())


def benchmark_cell(score: float | None, raw: float, scale: float) -> str:
    """``0.453 (45.3 of 100)``; on a 0–1 scale the score is the original value: ``0.453``."""
    if score is None or scale == 1:
        return fmt(score)
    return f"{fmt(score)} ({raw:g} of {scale:g})"


def benchmark_table(collection: Collection) -> Table:
    """CCS beside every other benchmark found for the same models (scores normalised to [0, 1])."""
    benches = benchmark_columns(collection)
    t = Table(
        "ccs_vs_benchmarks",
        "CCS beside other benchmarks (each normalised to [0, 1]; a score reported on another scale "
        "shows its original value in brackets, e.g. 0.453 (45.3 of 100))",
        ["Model", *(c for c, _ in ccs_metrics()), *(d for _, d in benches), "Flags"],
        csv_columns=[
            "model",
            *(f"{m}_{p}" for _, m in ccs_metrics() for p in ("estimate", "low", "high")),
            *(f"{task}_{p}" for task, _ in benches for p in ("score", "raw", "scale", "metric", "source")),
            "flags",
        ],
    )
    for model in collection.models.values():
        metrics, _ = primary_metrics(model)
        cells = [model.name, *(interval_cell(metrics.get(m)) for _, m in ccs_metrics())]
        raw: list[Any] = [model.name]
        for _, m in ccs_metrics():
            raw += interval_raw(metrics.get(m))[:3]
        for task, _ in benches:
            score: BenchmarkScore | None = model.benchmarks.get(task)
            if score is None:
                cells.append(MISSING)
                raw += ["", "", "", "", ""]
            else:
                cells.append(benchmark_cell(score.score, score.raw, score.scale))
                raw += [score.score, score.raw, score.scale, score.metric, score.source]
        flags = "; ".join(model.flags + [f for r in model.edct for f in r.flags])
        t.add([*cells, flags], [*raw, flags])
    for task, display in benches:
        for m in collection.models.values():
            s = m.benchmarks.get(task)
            if s is not None and s.note:
                t.notes.append(f"{display} for {m.name}: {s.note}")
            if s is not None and s.judge is not None:
                t.notes.append(
                    f"{display} for {m.name}: LLM-judged; judge model: {s.judge} (not in the results file)"
                )
    setups = {r.setup_id for m in collection.models.values() for r in primary_runs(m)}
    if len(setups) > 1:
        t.notes.append(
            f"CCS values come from {len(setups)} different EDCT setups ({', '.join(sorted(setups))}): "
            "compare with care (the judge alone moves CCS by ~0.07)."
        )
    return t
