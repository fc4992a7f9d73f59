"""Every parser reads megabyte-sized adversarial replies in well under a second (issues 18 and 43).

Runs of spaces, tabs, brackets, tags, quotes, markdown and table padding are what made the old
regexes backtrack for minutes (``"AC" + " " * 200 + "x"``: 60 s), and a megabyte of ``AC reason:``,
``* *`` or of lines under a ``Keep:`` cost the old judge, concept and instruction parsers tens of
seconds (a scan to the line end per label, an item copied per layer of emphasis, a value per
line); a line of spaces or a JSON field nested 40 deep never finished. The inputs are
``benchmarks/bench_parsers.py``'s: the issue's 26 and more of the same kinds (other characters
repeated, lines, tables, JSON, nesting, labels).

A regex holds the GIL, so the parsing runs in a child process. The child measures each (input,
parser) pair in CPU time (``time.process_time``), which a busy machine inflates far less than wall
time, and the limit is CPU time per megabyte; the child's timeout only guards against a hang.
``pytest -s`` prints the table of CPU ms per megabyte (``python benchmarks/bench_parsers.py``
prints it for every input).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from bench_parsers import INPUTS, PARSER_NAMES, measure, ms_per_mb, table

SIZE = 1_000_000
LIMIT_MS_PER_MB = 1000.0
"""CPU milliseconds per megabyte of reply, per parser: "well under a second". The slowest pair
takes about a sixth of it on a loaded two-core machine, the median pair a thirtieth."""
HANG_GUARD_S = 600
"""Wall seconds before the child is killed: every pair together takes about 20 CPU seconds."""

ISSUE_18 = list(INPUTS)[:26]
"""The inputs of issue 18: runs of spaces, tabs, brackets, tags, quotes, markdown, table padding."""
GENERAL = [
    "single quotes",  # another character repeated
    "stars and spaces",  # a list item of a megabyte of emphasis
    "quoted list item",  # ... of quotes
    "reason labels",  # a line of labels the reasons are looked for in
    "indented spaces",  # a line of spaces the instruction labels are looked for in
    "continuation lines",  # a value over half a million lines
    "deeply nested field",  # a JSON field nested 40 deep
]
"""One input per rule issue 43 fixed, none shaped like issue 18's."""


def _check(names: list[str]) -> None:
    rows, hung, err = measure(SIZE, names=names, timeout=HANG_GUARD_S)
    print(f"\nCPU ms per MB, {len(rows)} pairs:\n{table(rows)}")
    if hung is not None:
        pytest.fail(f"parser hung on {hung} (child: {err[-500:]})")
    assert rows, err
    assert len(rows) == len(names) * len(PARSER_NAMES)
    assert all(row["chars"] >= SIZE // 2 for row in rows)
    assert [(r["input"], r["parser"], r["error"]) for r in rows if r["error"]] == []  # no parser raises
    slow = [(r["input"], r["parser"], round(ms_per_mb(r))) for r in rows if ms_per_mb(r) > LIMIT_MS_PER_MB]
    assert slow == []


def test_parsers_are_linear_on_megabyte_adversarial_replies() -> None:
    """Issue 18's inputs and one per rule of issue 43: about 8 CPU seconds."""
    _check(ISSUE_18 + GENERAL)


@pytest.mark.slow
def test_parsers_are_linear_on_every_benchmark_input() -> None:
    """All of ``benchmarks/bench_parsers.py``'s inputs: about 20 CPU seconds."""
    _check(list(INPUTS))
