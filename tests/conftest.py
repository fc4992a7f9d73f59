"""Suite-wide settings: nothing reaches a hub, and every xdist worker keeps to one core."""

from __future__ import annotations

import os

for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # pytest -n 2 on 2 cores: one compute thread per worker (OpenMP pools that outgrow the
    # machine spin instead of working when two workers run torch at once)
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}.items():
    os.environ.setdefault(_name, _value)
