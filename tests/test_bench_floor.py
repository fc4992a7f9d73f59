"""benchmarks/floor.py: the least time the editor and text pools need at their concurrency limits."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

from floor import role_throughput_s


def test_pool_bounds_count_backend_calls_only() -> None:
    # a 150-document zero-latency run's call counts: text prompts repeat, so most are cache hits
    calls = {
        "calls": {
            "target": 900,
            "concepts": 41,
            "instructions": 41,
            "edit_parse": 14,
            "edit": 300,
            "judge": 164,
        },
        "cache_hits": {"judge": 436, "edit_parse": 286},
    }
    bounds = role_throughput_s(calls, text=0.2, editor=0.5, text_concurrency=16, editor_concurrency=8)
    assert bounds == {"editor": 18.75, "text": 3.25}
    assert role_throughput_s({}, 0.2, 0.5, 16, 8) == {"editor": 0.0, "text": 0.0}
