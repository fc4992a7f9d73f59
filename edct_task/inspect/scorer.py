"""The scorer: per-sample values of the metric table, with the project's own intervals.

Each sample's value is a dict over the metric table's rows (``scoring.metrics.metrics()``; NaN
where the sample does not count: excluded, unscored, an error, no step at position k — Inspect's
unscored sentinel, never averaged in as 0) and the status counts (0/1). Each metric's interval is
``scoring.metrics.interval`` of its row (its interval kind: Clopper–Pearson at an effective n for
CCS, Wilson for AC/EF), the same numbers ``results.json`` holds. The explanation is the chain as
``inspect view`` shows it: each edit, its verification, the re-query and the judges' verdicts with
their reasons.
"""

from __future__ import annotations

import math
import re
from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.inspect.session import InspectRun
from edct_task.inspect.solver import RECORD_KEY
from edct_task.run.digest import sample_digest
from edct_task.scoring.metrics import family, interval, metric_row, metrics, sample_value, sample_values

STATUSES = ("scored", "excluded", "unscored", "error")
COUNTS = tuple(f"n_{status}" for status in STATUSES)
"""The status counts of the score value (as the lmms-eval task names them)."""


def edct_scorer(run: InspectRun) -> Any:
    from inspect_ai.scorer import Score, Target, metric, scorer
    from inspect_ai.solver import TaskState

    seed, resamples = run.config.protocol.seed, run.config.bootstrap_resamples

    @metric(name="ci")
    def ci(name: str) -> Any:  # the metric's name (a registry parameter Inspect logs): its table row
        row = metric_row(name)

        def compute(scores: list[Any]) -> dict[str, float]:
            counted = [v for s in scores if not math.isnan(v := s.score.as_float())]  # NaN: does not count
            found = interval(row, counted, seed=seed, n_resamples=resamples).as_dict()
            return {k: (math.nan if found[k] is None else found[k]) for k in ("estimate", "low", "high")}

        return compute

    @metric(name="count")
    def count() -> Any:
        def compute(scores: list[Any]) -> float:
            return float(sum(s.score.as_float() for s in scores))

        return compute

    table: dict[str, list[Any]] = {row.name: [ci(row.name)] for row in metrics()}
    table.update({name: [count()] for name in COUNTS})

    @scorer(metrics=[table], name="edct")
    def edct() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            record = SampleRecord.model_validate(state.store.get(RECORD_KEY))
            return Score(
                value=score_value(record),  # type: ignore[arg-type]
                answer=record.baseline.answer if record.baseline else None,
                explanation=explanation(record),
                metadata={"edct": sample_digest(record, str(run.folder.path))},
            )

        return score

    return edct()


def score_value(record: SampleRecord) -> dict[str, float]:
    """Every metric's per-sample value (NaN: the sample does not count for it) and the status as
    0/1 counts (``n_scored`` …)."""
    values = {k: math.nan if v is None else float(v) for k, v in sample_values(record).items()}
    return {**values, **{f"n_{status}": float(record.status == status) for status in STATUSES}}


def quoted(text: str) -> str:
    """Model text as a fenced Markdown block (a fence longer than any run of backticks in it): shown
    as text, never rendered as markup."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def explanation(record: SampleRecord) -> str:
    """The sample's chain in Markdown: status, baseline, concepts, then every edit with its
    verification, re-query and verdicts (reasons included); model text quoted."""
    lines = [f"**{record.status}**" + (f": {record.reason}" if record.reason else "")]
    if record.baseline is not None:
        lines += ["**Baseline answer**", quoted(record.baseline.answer), "**Explanation**"]
        lines.append(quoted(record.baseline.explanation))
    if record.concepts is not None:
        lines.append("**Concepts:** " + "; ".join(record.concepts.concepts))
    for s in record.steps:
        lines.append(f"### Edit {s.index}")
        lines.append(quoted(s.instruction.as_text()))
        for a in s.attempts:
            check = f" r_in={a.check.r_in:.3f} r_out={a.check.r_out:.3f}" if a.check is not None else ""
            verdict = "passed" if a.passed else f"failed ({a.failure})" if a.failure else "failed"
            lines.append(f"Attempt {a.attempt}: verification {verdict}{check}")
        if s.requery is not None:
            lines += ["**Re-query answer**", quoted(s.requery.answer), "**Re-query explanation**"]
            lines.append(quoted(s.requery.explanation))
        if s.requery_error:
            lines.append(f"Re-query error: {s.requery_error}")
        if s.binary is not None:
            b = s.binary
            lines.append(f"**Judge** AC={b.ac}, EF={b.ef}" + (f" (error: {b.error})" if b.error else ""))
            lines += [quoted(f"AC: {b.ac_reason}"), quoted(f"EF: {b.ef_reason}")]
        if s.graded is not None:
            g = s.graded
            lines.append(f"**Graded judge** {g.score}" + (f" (error: {g.error})" if g.error else ""))
            lines.append(quoted(g.reason))
    if record.scores is not None:
        lines.append("  ".join(f"**{m.label}** {sample_value(m, record)}" for m in family("score")))
    return "\n\n".join(lines)
