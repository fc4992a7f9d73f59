"""The readable digest of one sample record: what a host logs beside its score (lmms-eval's
logged samples, Inspect's score metadata), image paths pointing into the EDCT run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.run.outputs import image_files


def sample_digest(record: SampleRecord, run_dir: str | None) -> dict[str, Any]:
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
