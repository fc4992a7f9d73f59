"""EDCT-Bench data: the dataset format, the domains and the builder.

``domains``                the registered domains (OK-VQA, DriveLM-nuScenes, 3DSRBench, and those of
                           the ``edct_bench.domains`` entry points): one ``Domain`` record each
``build_bench``            their sources (local copies or Hub datasets) → one dataset folder
``load_bench``             that folder (or a hub id, or ``$EDCT_BENCH_DATA``) as a ``datasets.Dataset``
``bench_samples``          its rows as protocol inputs (``edct run`` with ``data.source: dataset``)

Every failure is a ``BenchDataError`` whose message names the file and the rule.
"""

from edct_task.bench_data.build import BuildRequest, BuildResult, build_bench, default_counts, parse_counts
from edct_task.bench_data.domain import Domain, Hub, HubOption, HubSource, Input
from edct_task.bench_data.format import (
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
    "ENV_DATA",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "SPLIT",
    "BenchDataError",
    "BuildRequest",
    "BuildResult",
    "Domain",
    "Hub",
    "HubOption",
    "HubSource",
    "Input",
    "bench_samples",
    "build_bench",
    "default_counts",
    "features",
    "load_bench",
    "parse_counts",
    "read_manifest",
]
