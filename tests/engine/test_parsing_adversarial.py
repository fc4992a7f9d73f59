"""Every parser reads megabyte-sized adversarial replies in linear time (issue 18, item 3).

Runs of spaces, tabs, brackets, tags, quotes, markdown and table padding are what made the old
regexes backtrack for minutes (``"AC" + " " * 200 + "x"``: 60 s). A regex holds the GIL, so the
parsing runs in a child process that the test kills if it hangs; each (input, parser) pair must
finish within a few seconds of CPU time (CPU time, so that a busy machine does not fail it). This
is a bound against catastrophic behaviour, not a benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SIZE = 1_000_000
LIMIT_S = 5.0
"""CPU seconds per reply and parser; linear parsing takes about a second or less for 1 MB."""

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from edct_task import parsing
    from verification.edit_parsing import rule_based_edit_target

    N = int(sys.argv[1])
    INPUTS = {
        "spaces after AC": "AC" + " " * N + "x",
        "spaces after SCORE": "SCORE" + " " * N,
        "table padding": "| AC" + " " * N + "| 1 |",
        "padded table rows": ("| EF" + " " * 2000 + "|" + " " * 2000 + "\\n") * (N // 4000),
        "tabs after a label": "EF:" + "\\t" * N + "y",
        "spaces around names": ("AC" + " " * 1000 + "EF" + " " * 1000) * (N // 2004) + ":",
        "open brackets": "[" * N,
        "open bracket and spaces": "[" + " " * N,
        "close brackets": "]" * N,
        "nested braces": "{" * (N // 2) + "}" * (N // 2),
        "empty arrays": "[]" * (N // 2),
        "open think tags": "<think>" * (N // 7),
        "close think tags": "</think>" * (N // 8),
        "unclosed thinking": "<think>" + "a" * N,
        "harmony channels": "<|channel|>analysis" * (N // 19),
        "decoded harmony": "analysis" + "x" * N,
        "bold markers": "**" * (N // 2),
        "stars then change": "*" * N + "Change: x",
        "scores on one line": "AC: 1 " * (N // 6),
        "list items": "- item\\n" * (N // 7),
        "labels and spaces": "Keep:" + " " * N + "Change:",
        "quotes": '"' * N,
        "parentheses": "(" * N + "AC: 1 EF: 1",
        "numbered spaces": "1." + " " * N,
        "score aside": "Score (" + " " * N,
        "digits": "SCORE: " + "9" * N,
    }
    PARSERS = {
        "concepts": lambda t: parsing.parse_concepts(t, 2),
        "instructions": lambda t: parsing.parse_instructions(t, 2),
        "edit_target": parsing.parse_edit_target,
        "binary": parsing.parse_binary_judgement,
        "graded": parsing.parse_graded_judgement,
        "strip_thinking": parsing.strip_thinking,
        "rule_based_edit_target": rule_based_edit_target,
    }
    for name, text in INPUTS.items():
        for parser_name, parse in PARSERS.items():
            print(json.dumps({"start": [name, parser_name]}), flush=True)
            t0 = time.process_time()
            parse(text)
            seconds = time.process_time() - t0
            row = {"input": name, "parser": parser_name, "seconds": seconds, "chars": len(text)}
            print(json.dumps(row), flush=True)
    """
)


@pytest.mark.slow
def test_parsers_are_linear_on_megabyte_adversarial_replies() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(SIZE)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            check=False,
        )
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = "timed out"
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    results = [line for line in lines if "seconds" in line]
    if lines and "start" in lines[-1]:
        pytest.fail(f"parser hung on {lines[-1]['start']} (child: {err[-500:]})")
    assert results, err[-2000:]
    slow = [(r["input"], r["parser"], round(r["seconds"], 2)) for r in results if r["seconds"] > LIMIT_S]
    assert slow == []
    assert len(results) == 26 * 7
    assert all(r["chars"] >= SIZE // 2 for r in results)
