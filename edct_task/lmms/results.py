"""What one lmms-eval document scores: the final response (the sample record as JSON), the values
of every metric, the counts, and where the record is kept (the EDCT run folder).

Used by the task's ``process_results`` hook, on lmms-eval's loop and in an export alike. The EDCT
run folder is the one EDCT format: lmms-eval's logs carry the metric values and, under
``RUN_KEY``, the run folder's path and the sample's id, never a second copy of the record's
content (``run.outputs.load_run`` reads an lmms-eval output folder through the run folder it names).
"""

from __future__ import annotations

from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.lmms.documents import sample_of
from edct_task.run.outputs import RUN_KEY, final_record
from edct_task.scoring import metrics as scoring

COUNT_NAMES = ("n_scored", "n_excluded", "n_unscored", "n_error")


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


def metric_names() -> list[str]:
    """Every metric the task YAML declares, in order."""
    return [*scoring.metric_names(), *COUNT_NAMES, RUN_KEY]


def record_results(record: SampleRecord, run_dir: str) -> dict[str, Any]:
    """What ``process_results`` returns for one record kept in the EDCT run folder ``run_dir``."""
    out: dict[str, Any] = {k: v for k, v in scoring.sample_values(record).items() if v is not None}
    for name in COUNT_NAMES:
        out[name] = int(record.status == name[2:])
    out[RUN_KEY] = {"run_dir": run_dir, "id": record.sample.id}
    return out
