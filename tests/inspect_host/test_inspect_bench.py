"""``edct/edct_bench_<domain>`` on an EDCT-Bench dataset (calibration scenes saved in its format,
their rows labelled ``okvqa``, one row's image broken): every readable row is scored, the broken
one is its error record (counted, never 0), both in Inspect's log and in the EDCT run folder."""

from __future__ import annotations

import math
from pathlib import Path

import datasets
import pytest
from support.calibration_dataset import write_calibration_dataset
from support.inspect_extra import require_inspect

require_inspect()

from inspect_ai import eval as inspect_eval  # noqa: E402

from edct_task.run.outputs import load_run  # noqa: E402

pytestmark = pytest.mark.slow  # an Inspect run of 4 samples: > 30 s


def test_a_domain_task_scores_readable_rows_and_records_the_broken_one(tmp_path: Path) -> None:
    import edct._registry as registry

    raw = tmp_path / "raw"
    ids = write_calibration_dataset(raw, 4, replace={2: b"not an image"})
    data = tmp_path / "bench"
    ds = datasets.load_from_disk(str(raw))
    ds.map(lambda row: {"domain": "okvqa"}).save_to_disk(str(data))
    task = registry.edct_bench_okvqa(
        data=str(data), output_dir=str(tmp_path / "run"), work_dir=str(tmp_path / "w")
    )
    (log,) = inspect_eval(task, model="edct/faithful", log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    values = {s.id: s.scores["edct"].value for s in log.samples}
    assert sorted(values) == sorted(ids)
    broken = values[ids[2]]
    assert broken["n_error"] == 1.0 and math.isnan(broken["ccs_binary"])
    assert all(values[i]["n_scored"] == 1.0 and values[i]["ccs_binary"] == 1.0 for i in ids if i != ids[2])
    ccs = next(s for s in log.results.scores if s.name == "ccs_binary")
    assert (ccs.scored_samples, ccs.unscored_samples) == (3, 1)
    assert ccs.metrics["ci_estimate"].value == 1.0  # the error is not averaged in as 0
    run = load_run(tmp_path / "run")
    assert {r.sample.id: r.status for r in run.records}[ids[2]] == "error"
    assert run.results["results"]["overall"]["counts"]["error"] == 1
    assert run.results["results"]["overall"]["metrics"]["ccs_binary"]["n"] == 3


def test_calibration_roles_refuse_real_photographs(tmp_path: Path) -> None:
    from inspect_ai._util.error import PrerequisiteError

    import edct._registry as registry

    raw = tmp_path / "raw"
    write_calibration_dataset(raw, 2)
    data = tmp_path / "bench"
    datasets.load_from_disk(str(raw)).map(lambda row: {"domain": "okvqa", "source": "okvqa"}).save_to_disk(
        str(data)
    )
    with pytest.raises(
        PrerequisiteError, match=r"edct: the EDCT task edct_bench_okvqa cannot load: .*calibration"
    ):
        registry.edct_bench_okvqa(
            data=str(data), output_dir=str(tmp_path / "run"), work_dir=str(tmp_path / "w")
        )
