"""What one lmms-eval document scores: the final response (the sample record as JSON), the values
of every metric, the counts and the audit digest logged with each sample.

Used by the task's ``process_results`` hook, on lmms-eval's loop and in an export alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.lmms.documents import sample_of
from edct_task.run.outputs import final_record, image_files
from edct_task.scoring import metrics as scoring

COUNT_NAMES = ("n_scored", "n_excluded", "n_unscored", "n_error")
SETUP_NAME = "edct"
"""Key whose per-sample value is the audit digest with the full setup (logged with each sample);
it has no task-level value (``edct_task.lmms.aggregation.audit``)."""


def final_response(record: SampleRecord) -> str:
    """The task's final response: the sample record as JSON (starts with ``{``)."""
    return record.model_dump_json()


def parse_final(doc: dict[str, Any], response: object) -> SampleRecord:
    """The sample record a final response carries (decoded by ``run.outputs.final_record``, the
    one decoder of runs); an error record with the reason when it carries none."""
    got = final_record(response)
    return (
        got
        if isinstance(got, SampleRecord)
        else SampleRecord(sample=sample_of(doc, ""), status="error", reason=got)
    )


def sample_values(record: SampleRecord) -> dict[str, float | int | None]:
    """Per-sample values of every metric: None where the sample does not count (it is not scored:
    excluded, unscored or an error)."""
    scores = record.scores if record.status == "scored" else None
    out: dict[str, float | int | None] = {
        scoring.CCS_BINARY: scores.ccs_binary if scores else None,
        scoring.CCS_GRADED: scores.ccs_graded if scores else None,
    }
    for k in scoring.POSITIONS:
        for name, attr in ((scoring.ac_name(k), "ac"), (scoring.ef_name(k), "ef")):
            per_position = getattr(scores, attr) if scores else ()
            out[name] = per_position[k - 1] if len(per_position) >= k else None
    return out


def metric_names() -> list[str]:
    """Every metric the task YAML declares, in order."""
    return [*scoring.METRIC_NAMES, *COUNT_NAMES, SETUP_NAME]


def audit(record: SampleRecord, run_dir: str | None) -> dict[str, Any]:
    """The readable digest logged with each sample (the full record is the response itself);
    image paths point into the EDCT run folder ``run_dir`` (``run.outputs.image_files``)."""
    names = {ref: name for name, ref in image_files(record).items()}

    def path(ref: str | None) -> str | None:
        if not ref:
            return None
        return str(Path(run_dir) / names[ref]) if run_dir and ref in names else ref

    steps = []
    for s in record.steps:
        steps.append(
            {
                "index": s.index,
                "concept": s.instruction.concept,
                "instruction": s.instruction.as_text(),
                "edit_target": s.edit_target.model_dump() if s.edit_target else None,
                "attempts": [
                    {
                        "attempt": a.attempt,
                        "image": path(a.image),
                        "failure": a.failure,
                        "passed": a.passed,
                        "r_in": a.check.r_in if a.check is not None else None,
                        "r_out": a.check.r_out if a.check is not None else None,
                    }
                    for a in s.attempts
                ],
                "verified": s.verified,
                "requery": s.requery.model_dump() if s.requery else None,
                "requery_error": s.requery_error,
                "ac": s.binary.ac if s.binary else None,
                "ef": s.binary.ef if s.binary else None,
                "ac_reason": s.binary.ac_reason if s.binary else None,
                "ef_reason": s.binary.ef_reason if s.binary else None,
                "binary_error": s.binary.error if s.binary else None,
                "graded": s.graded.score if s.graded else None,
                "graded_reason": s.graded.reason if s.graded else None,
                "graded_error": s.graded.error if s.graded else None,
            }
        )
    return {
        "id": record.sample.id,
        "domain": record.sample.domain,
        "status": record.status,
        "reason": record.reason,
        "image": path(record.sample.image),
        "baseline": record.baseline.model_dump() if record.baseline else None,
        "concepts": list(record.concepts.concepts) if record.concepts else [],
        "concepts_error": record.concepts.error if record.concepts else None,
        "instructions_error": record.instructions.error if record.instructions else None,
        "steps": steps,
    }


def record_results(record: SampleRecord, setup: dict[str, Any]) -> dict[str, Any]:
    """What ``process_results`` returns for one record."""
    out: dict[str, Any] = {k: v for k, v in sample_values(record).items() if v is not None}
    for name in COUNT_NAMES:
        out[name] = int(record.status == name[2:])
    out[SETUP_NAME] = {**audit(record, setup.get("run_dir")), "setup": setup}
    return out
