"""lmms-eval task YAMLs of EDCT (package data). ``TASK_DIR`` is this folder, for ``--include_path``;
``calibration_index`` reads the ``edct_calibration`` index every host runs (lmms-eval, ``edct run
--tasks``, Inspect)."""

import json
from pathlib import Path

TASK_DIR = Path(__file__).resolve().parent

CALIBRATION_INDEX = "edct_calibration_index.jsonl"
"""The ``edct_calibration`` task's document index (``dataset_kwargs.data_files`` in its YAML)."""


def calibration_index() -> tuple[int, int]:
    """``(n, seed)`` of the ``edct_calibration`` task's shipped index file (rows 0 … n-1, one seed)."""
    rows = [
        json.loads(line) for line in (TASK_DIR / CALIBRATION_INDEX).read_text("utf-8").splitlines() if line
    ]
    seeds = {int(r.get("seed", 0)) for r in rows}
    indices = [int(r["index"]) for r in rows]
    if len(seeds) != 1 or indices != list(range(len(rows))):
        raise ValueError(f"{CALIBRATION_INDEX}: expected rows 0 … n-1 of one world seed")
    return len(rows), seeds.pop()
