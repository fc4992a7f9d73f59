"""benchmarks/floor.py: the least time the editor and text pools need at their concurrency limits,
and the editor pool's bound with the chains around it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

from floor import critical_path_s, editor_path_s, role_throughput_s, slot_cpu_s


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


def test_the_editor_path_adds_the_chains_before_the_first_and_after_the_last_edit() -> None:
    args = dict(target=0.2, text=0.2, editor=0.5, edit_cpu=0.0065, verify=0.04, window=0.02)
    path = editor_path_s(300, 8, **args)
    before = 2 * (0.2 + 0.02) + 2 * 0.2  # answer, why, concepts, instructions
    after = 0.04 + 2 * (0.2 + 0.02) + 0.2  # verify, answer, why, judge
    assert math.isclose(path, before + 38 * 0.5065 + after)  # some slot runs ⌈300 / 8⌉ edits
    assert path > role_throughput_s({"calls": {"edit": 300}}, 0.2, 0.5, 16, 8)["editor"]
    # one sample, one edit: the pool term is that edit, and the path is the sample's chain with k=1
    assert math.isclose(editor_path_s(1, 8, **args), critical_path_s(1, 0.2, 0.2, 0.5065, 0.04, 0.02))
    assert editor_path_s(600, 16, **args) == path  # twice the edits at twice the concurrency
    assert editor_path_s(0, 8, **args) == 0.0


def test_the_editor_path_counts_only_the_cpu_an_edit_does_in_its_slot() -> None:
    # storing the edited image runs after the editor's slot is freed (local_cpu_seconds)
    calls = {"calls": {"edit": 300}, "cpu_seconds": {"edit": 3.3}, "local_cpu_seconds": {"edit": 2.1}}
    assert math.isclose(slot_cpu_s(calls, "edit"), 1.2 / 300)
    older = {"calls": {"edit": 300}, "cpu_seconds": {"edit": 3.3}}  # a run that stored in the slot
    assert math.isclose(slot_cpu_s(older, "edit"), 3.3 / 300)
    assert slot_cpu_s({"calls": {}}, "edit") == 0.0
