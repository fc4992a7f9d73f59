"""EDCT-Bench data: the dataset format and the builders from the three sources.

``build_bench``            OK-VQA + DriveLM-nuScenes + 3DSRBench (local copies) → one dataset folder
``load_bench``             that folder (or a hub id, or ``$EDCT_BENCH_DATA``) as a ``datasets.Dataset``
``bench_samples``          its rows as protocol inputs (``edct run`` with ``data.source: dataset``)

Every failure is a ``BenchDataError`` whose message names the file and the rule.
"""

from edct_task.bench_data.build import BuildRequest, BuildResult, build_bench, parse_counts
from edct_task.bench_data.format import (
    DEFAULT_COUNTS,
    DOMAINS,
    ENV_DATA,
    FORMAT_VERSION,
    MANIFEST_NAME,
    SPLIT,
    BenchDataError,
    bench_samples,
    features,
    load_bench,
    read_manifest,
)

__all__ = [
    "DEFAULT_COUNTS",
    "DOMAINS",
    "ENV_DATA",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "SPLIT",
    "BenchDataError",
    "BuildRequest",
    "BuildResult",
    "bench_samples",
    "build_bench",
    "features",
    "load_bench",
    "parse_counts",
    "read_manifest",
]
