"""lmms-eval task YAMLs of EDCT (package data). ``TASK_DIR`` is this folder, for ``--include_path``."""

from pathlib import Path

TASK_DIR = Path(__file__).resolve().parent
