"""Issue 19, row 13: a run with no verified step exports an empty dataset, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.counterfactuals.export import DATASET_DIR, JSONL_NAME, MANIFEST_NAME


def test_a_run_without_verified_steps_exports_an_empty_dataset(tmp_path: Path, capsys) -> None:
    import datasets

    stepless = [r.model_copy(update={"steps": ()}) for r in records(0.5, n=3)]
    write_edct_run(tmp_path / "run", stepless)  # records without any edit step
    out = tmp_path / "export"
    rc = main(["export-counterfactuals", str(tmp_path / "run"), "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    ds = datasets.load_from_disk(str(out / DATASET_DIR))
    assert len(ds) == 0 and "edited_image" in ds.column_names
    assert (out / JSONL_NAME).read_text() == ""
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["pairs"] == 0
