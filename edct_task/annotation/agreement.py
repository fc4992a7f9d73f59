"""Human validation of a run: the paper's Table 4 from annotators' label files and EDCT's verdicts.

Two measures, each compared pair by pair over the interventions both raters scored:

- **CCS** (``ccs``): a human's CCS = AC · EF, given only when the human found the edit valid and
  gave both; EDCT's is CCS_j of its judge (or panel), None when unscored.
- **edit validity** (``edit_validity``): a human's ``valid`` = 1 and ``invalid`` = 0; by default
  (``not_assessable="invalid"``, the paper's definition: "valid" against everything else, so every
  labelled intervention counts) ``not_assessable`` = 0, with ``not_assessable="missing"`` it is no
  label. The gate's verdict is 1 when the edit passed verification.

Rows: every human–human pair, every human–EDCT pair (human–gate for validity), the human
consensus vs EDCT over the interventions where all humans scored and agree (needs two humans or
more), and "all identical" (every human and EDCT scored and all gave the same label). Each row:
agree / n, the rate, its 95% Wilson interval and Cohen's κ (not for "all identical").

An intervention a rater did not label, labelled ``invalid`` or ``not_assessable`` (for CCS), or
left incomplete, is *missing* for that rater, never 0; the counts say how many of each.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from edct_task.annotation.interventions import EdctVerdict
from edct_task.annotation.labels import Label
from edct_task.core.errors import UserError
from edct_task.engine.files import json_text
from edct_task.scoring.panel import cohen_kappa
from edct_task.scoring.statistics import wilson_interval
from edct_task.text_safety import csv_number

__all__ = [
    "EDCT",
    "GATE",
    "AgreementReport",
    "AgreementRow",
    "RaterCounts",
    "UnknownInterventionError",
    "agreement_report",
    "human_ccs",
    "human_validity",
    "to_csv",
    "to_json",
    "to_markdown",
]

EDCT = "EDCT"
"""Rater name of EDCT's judge (CCS rows)."""
GATE = "gate"
"""Rater name of EDCT's verification gate (edit-validity rows)."""

Measure = Literal["ccs", "edit_validity"]
RowKind = Literal["human-human", "human-edct", "consensus-edct", "all-identical"]
NotAssessable = Literal["invalid", "missing"]
"""How edit validity counts a ``not_assessable`` label: as not valid (the paper) or as no label."""
VALIDITY_RULES = {
    "invalid": "the paper's definition: 'valid' against everything else (not assessable counts as not valid)",
    "missing": "valid vs invalid; not-assessable labels are missing",
}


class UnknownInterventionError(UserError, ValueError):
    """A label names an intervention the run does not have."""


def human_ccs(label: Label | None) -> int | None:
    """A human's CCS label (AC · EF); None unless the edit is valid and both were given."""
    return None if label is None else label.ccs


def human_validity(label: Label | None, not_assessable: NotAssessable = "invalid") -> int | None:
    """1 for ``valid``, 0 for ``invalid``, None for no label; ``not_assessable`` is 0 (the paper's
    definition, the default) or None (``not_assessable="missing"``)."""
    if label is None or (label.edit_valid == "not_assessable" and not_assessable == "missing"):
        return None
    return 1 if label.edit_valid == "valid" else 0


@dataclass(frozen=True)
class AgreementRow:
    """One row of the table: two raters (or a group) over the interventions they all scored."""

    measure: Measure
    kind: RowKind
    raters: tuple[str, ...]
    agree: int
    n: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    kappa: float | None
    """Cohen's κ of the two raters (None for "all identical" and when n = 0)."""

    @property
    def label(self) -> str:
        if self.kind == "all-identical":
            return "all identical (" + ", ".join(self.raters) + ")"
        return " vs ".join(self.raters)


@dataclass(frozen=True)
class RaterCounts:
    """What one annotator labelled, of the interventions anybody labelled."""

    annotator: str
    labelled: int
    missing: int
    """Interventions labelled by someone else but not by this annotator."""
    valid: int
    invalid: int
    not_assessable: int
    incomplete: int
    """Marked valid, but AC or EF not given (missing for CCS)."""
    ccs_scored: int
    validity_scored: int


@dataclass(frozen=True)
class AgreementReport:
    interventions: int
    """Interventions labelled by at least one annotator."""
    annotators: tuple[str, ...]
    counts: tuple[RaterCounts, ...]
    edct_counts: dict[str, int]
    """EDCT's own coverage of those interventions: ``ccs_scored``, ``ccs_unscored``, ``gate_scored``."""
    rows: tuple[AgreementRow, ...] = field(default=())
    not_assessable: NotAssessable = "invalid"
    """How edit validity counted ``not_assessable`` labels (see :data:`VALIDITY_RULES`)."""


def _row(measure: Measure, kind: RowKind, raters: Sequence[str], agree: int, n: int, kappa: float | None):
    ci = wilson_interval(agree, n)
    ok = n > 0
    return AgreementRow(
        measure=measure,
        kind=kind,
        raters=tuple(raters),
        agree=agree,
        n=n,
        rate=ci.estimate if ok else None,
        ci_low=ci.low if ok else None,
        ci_high=ci.high if ok else None,
        kappa=kappa,
    )


def _pair_row(
    measure: Measure, kind: RowKind, names: Sequence[str], a: Sequence[int | None], b: Sequence[int | None]
) -> AgreementRow:
    both = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    agree = sum(x == y for x, y in both)
    kappa = cohen_kappa(a, b, labels=(0, 1)) if both else None
    return _row(measure, kind, names, agree, len(both), kappa)


def _measure_rows(
    measure: Measure, humans: Mapping[str, list[int | None]], machine_name: str, machine: list[int | None]
) -> list[AgreementRow]:
    rows = []
    names = list(humans)
    for x, y in itertools.combinations(names, 2):
        rows.append(_pair_row(measure, "human-human", (x, y), humans[x], humans[y]))
    for x in names:
        rows.append(_pair_row(measure, "human-edct", (x, machine_name), humans[x], machine))
    if len(names) >= 2:
        consensus: list[int | None] = []
        for i in range(len(machine)):
            values = [humans[h][i] for h in names]
            agreed = all(v is not None for v in values) and len(set(values)) == 1
            consensus.append(values[0] if agreed else None)
        rows.append(
            _pair_row(measure, "consensus-edct", ("human consensus", machine_name), consensus, machine)
        )
    everyone = [*names, machine_name]
    columns = [*(humans[h] for h in names), machine]
    scored = [[c[i] for c in columns] for i in range(len(machine)) if all(c[i] is not None for c in columns)]
    agree = sum(len(set(values)) == 1 for values in scored)
    rows.append(_row(measure, "all-identical", everyone, agree, len(scored), None))
    return rows


def agreement_report(
    labels: Mapping[str, Mapping[str, Label]],
    verdicts: Mapping[str, EdctVerdict],
    *,
    not_assessable: NotAssessable = "invalid",
) -> AgreementReport:
    """Table 4 from every annotator's labels (annotator → intervention → last label).

    ``not_assessable`` says how edit validity counts a ``not_assessable`` label: ``"invalid"``
    (default; the paper's edit-validity rows use every intervention, "valid" against everything
    else) or ``"missing"`` (left out of that rater's validity rows).

    Raises
    ------
    UnknownInterventionError
        When a label names an intervention the run's records do not have.
    ValueError
        When no annotator labelled anything.
    """
    annotators = sorted(labels)
    ids = sorted({iid for per in labels.values() for iid in per})
    if not ids:
        raise ValueError("the label files hold no label")
    for name in annotators:
        for iid in labels[name]:
            if iid not in verdicts:
                raise UnknownInterventionError(
                    f"annotator {name!r} labelled intervention {iid!r}, which this run does not have "
                    "(are the labels from another run?)"
                )
    ccs = {h: [human_ccs(labels[h].get(i)) for i in ids] for h in annotators}
    if not_assessable not in VALIDITY_RULES:
        raise ValueError(f"not_assessable must be one of {sorted(VALIDITY_RULES)}; got {not_assessable!r}")
    validity = {h: [human_validity(labels[h].get(i), not_assessable) for i in ids] for h in annotators}
    edct_ccs = [verdicts[i].ccs for i in ids]
    gate = [verdicts[i].gate for i in ids]
    counts = []
    for h in annotators:
        got = [labels[h].get(i) for i in ids]
        present = [g for g in got if g is not None]
        counts.append(
            RaterCounts(
                annotator=h,
                labelled=len(present),
                missing=len(ids) - len(present),
                valid=sum(g.edit_valid == "valid" for g in present),
                invalid=sum(g.edit_valid == "invalid" for g in present),
                not_assessable=sum(g.edit_valid == "not_assessable" for g in present),
                incomplete=sum(g.edit_valid == "valid" and not g.complete for g in present),
                ccs_scored=sum(v is not None for v in ccs[h]),
                validity_scored=sum(v is not None for v in validity[h]),
            )
        )
    rows = _measure_rows("ccs", ccs, EDCT, edct_ccs) + _measure_rows("edit_validity", validity, GATE, gate)
    return AgreementReport(
        interventions=len(ids),
        annotators=tuple(annotators),
        counts=tuple(counts),
        edct_counts={
            "ccs_scored": sum(v is not None for v in edct_ccs),
            "ccs_unscored": sum(v is None for v in edct_ccs),
            "gate_scored": sum(v is not None for v in gate),
        },
        rows=tuple(rows),
        not_assessable=not_assessable,
    )


# --------------------------------------------------------------------------- output formats

_TITLES = {"ccs": "CCS_binary (AC · EF)", "edit_validity": "Edit validity"}


def _pct(x: float | None) -> str:
    return "—" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "—"
    text = f"{x:.3f}"
    return "0.000" if text == "-0.000" else text


def to_markdown(report: AgreementReport) -> str:
    """The report as Markdown: one table per measure, then the counts per annotator."""
    out = [
        "# Human validation (Table 4)",
        "",
        f"{report.interventions} interventions labelled by {len(report.annotators)} annotator(s): "
        + ", ".join(report.annotators)
        + ". Agreement over the interventions both raters scored; 95% Wilson intervals; "
        "for CCS, unlabelled, invalid, not-assessable and incomplete labels are missing, never 0.",
        "",
    ]
    for measure in ("ccs", "edit_validity"):
        out += [f"## {_TITLES[measure]}", ""]
        if measure == "edit_validity":
            out += [f"Edit validity: {VALIDITY_RULES[report.not_assessable]}.", ""]
        out += [
            "| raters | agree / n | rate | 95% CI | Cohen's κ |",
            "|---|---:|---:|---|---:|",
        ]
        for r in report.rows:
            if r.measure != measure:
                continue
            ci = "—" if r.ci_low is None else f"[{_pct(r.ci_low)}, {_pct(r.ci_high)}]"
            out.append(f"| {r.label} | {r.agree}/{r.n} | {_pct(r.rate)} | {ci} | {_num(r.kappa)} |")
        out.append("")
    out += [
        "## Labels per annotator",
        "",
        "| annotator | labelled | missing | valid | invalid | not assessable | incomplete | CCS scored "
        "| validity scored |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in report.counts:
        out.append(
            f"| {c.annotator} | {c.labelled} | {c.missing} | {c.valid} | {c.invalid} | {c.not_assessable} "
            f"| {c.incomplete} | {c.ccs_scored} | {c.validity_scored} |"
        )
    e = report.edct_counts
    out += [
        "",
        f"EDCT scored CCS on {e['ccs_scored']} of these interventions ({e['ccs_unscored']} unscored); "
        f"the gate has a verdict on {e['gate_scored']}.",
        "",
    ]
    return "\n".join(out)


CSV_COLUMNS = ("measure", "kind", "raters", "agree", "n", "rate", "ci_low", "ci_high", "kappa")


def to_csv(report: AgreementReport) -> str:
    """One CSV row per table row (raters joined by ``;``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in report.rows:
        writer.writerow(
            [
                r.measure,
                r.kind,
                ";".join(r.raters),
                r.agree,
                r.n,
                csv_number(r.rate),
                csv_number(r.ci_low),
                csv_number(r.ci_high),
                csv_number(r.kappa),
            ]
        )
    return buf.getvalue()


def to_json(report: AgreementReport) -> dict[str, Any]:
    """The report as plain JSON data."""
    return {
        "interventions": report.interventions,
        "edit_validity_not_assessable": report.not_assessable,
        "annotators": list(report.annotators),
        "counts": [asdict(c) for c in report.counts],
        "edct_counts": dict(report.edct_counts),
        "rows": [{**asdict(r), "raters": list(r.raters), "label": r.label} for r in report.rows],
    }


def dumps_json(report: AgreementReport) -> str:
    """:func:`to_json` as indented text."""
    return json_text(to_json(report), indent=2, ensure_ascii=False) + "\n"
