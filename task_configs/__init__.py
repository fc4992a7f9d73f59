"""lmms-eval task YAMLs of EDCT (package data). ``TASK_DIR`` is this folder, for ``--include_path``."""

from pathlib import Path

TASK_DIR = Path(__file__).resolve().parent

CALIBRATION_INDEX = "edct_calibration_index.jsonl"
"""The ``edct_calibration`` task's document index (``dataset_kwargs.data_files`` in its YAML)."""
