"""Per-sample comparison of EDCT runs of the same model through different runtimes.

Reads a run's sample records through ``run.outputs.load_run`` (an lmms-eval output folder, or an
``edct run`` folder), summarises CCS_binary and
CCS_graded with 95% percentile-bootstrap CIs, and compares two runs sample by sample: same status
and same CCS_binary, identical replies, and for replies that differ the first diverging token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edct_task.core.records import SampleScores
from edct_task.scoring.metrics import PRIMARY, Metric, family, interval


def records(out: Path, task: str = "edct_calibration") -> dict[str, dict[str, Any]]:
    """Sample id → the sample's EDCT record (as JSON data), from ``out/lmms`` (an lmms-eval output
    folder of ``task``: the EDCT run folder its logs name) or ``out/run`` (an ``edct run``
    folder), read through ``run.outputs.load_run``."""
    from edct_task.run.outputs import LMMS_SAMPLES_MARK, find_files, load_run

    lmms = out / "lmms"
    if lmms.is_dir() and find_files(lmms, f"{LMMS_SAMPLES_MARK}{task}", ".jsonl"):
        found = load_run(lmms).records
    else:
        found = load_run(out / "run").records
    return {r.sample.id: r.model_dump(mode="json") for r in found}


def _score(rec: dict[str, Any], row: Metric) -> float | int | None:
    scores = rec.get("scores")
    if rec.get("status") != "scored" or not scores:
        return None
    return row.value(SampleScores.model_validate(scores))


def summary(recs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``n``, ``[mean, CI low, CI high]`` of each score metric (CCS_binary, CCS_graded) over scored
    samples (95% CI of the metric's interval kind), statuses."""
    row: dict[str, Any] = {"n": len(recs)}
    for metric in family("score"):
        values = [v for r in recs.values() if (v := _score(r, metric)) is not None]
        if values:
            ci = interval(metric, values)
            row[metric.name] = [sum(values) / len(values), ci.low, ci.high]
        else:
            row[metric.name] = None
    statuses: dict[str, int] = {}
    for r in recs.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    row["statuses"] = statuses
    return row


def replies(rec: dict[str, Any]) -> list[str]:
    """Every target reply of a sample, in protocol order (baseline, then each re-query)."""
    out = []
    if rec.get("baseline"):
        out += [rec["baseline"]["answer"], rec["baseline"]["explanation"]]
    for step in rec.get("steps") or []:
        rq = step.get("requery")
        if rq:
            out += [rq["answer"], rq["explanation"]]
    return out


def first_divergence(tok: Any, a: str, b: str) -> str:
    """Where two replies part, in the checkpoint's own tokens: ``token 6: 'Ġred' vs 'Ġgreen'``."""
    ta, tb = tok.tokenize(a), tok.tokenize(b)
    i = next((k for k, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y), min(len(ta), len(tb)))
    return f"token {i}: {ta[i] if i < len(ta) else '<end>'!r} vs {tb[i] if i < len(tb) else '<end>'!r}"


def compare(base: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]], tok: Any) -> dict[str, Any]:
    """Per-sample agreement of ``other`` with ``base`` (same status and same CCS_binary), how many
    samples got identical replies, and the first diverging token of up to five that did not."""
    common = sorted(set(base) & set(other))
    same = [
        s
        for s in common
        if base[s]["status"] == other[s]["status"] and _score(base[s], PRIMARY) == _score(other[s], PRIMARY)
    ]
    same_text = [s for s in common if replies(base[s]) == replies(other[s])]
    diverging = []
    for s in common:
        ra, rb = replies(base[s]), replies(other[s])
        for k, (x, y) in enumerate(zip(ra, rb, strict=False)):
            if x != y:
                diverging.append(
                    {"sample": s, "reply": k, "a": x, "other": y, "at": first_divergence(tok, x, y)}
                )
                break
    return {
        "agreement": len(same) / len(common) if common else None,
        "same_replies": len(same_text),
        "n": len(common),
        "diverging": diverging[:5],
    }
