"""The reply corpus (tests/engine/data/reply_corpus.yaml): every reply reads as a careful person reads it.

158 replies of every kind in the styles real extractors and judges write (thinking models,
terse, markdown, JSON and structured output, refusals, replies cut at the token limit). No wrong
value, no reply scored that must be unscored, no readable reply left unscored, and an unscored
reply carries the right category. On the parsers before issue 18 this corpus gives 7 wrong
values, 25 wrongly unscored and 7 wrongly scored replies (benchmarks/reply_corpus_table.py).
"""

from __future__ import annotations

from collections import Counter

import pytest
from support import reply_corpus

from edct_task import parsing

ENTRIES = reply_corpus.load()

# The replies issue 18 measured on main, by what went wrong there.
ISSUE_CASES = {
    "wrong value": [
        "concepts-notes-after-list",
        "concepts-excluded-after-json",
        "binary-commentary-after",
        "graded-commentary-after",
        "binary-quoted-after",
    ],
    "wrongly scored": [
        "binary-scale-restated-cut",
        "binary-so-cut",
        "graded-scale-cut",
        "instructions-cut-mid-word",
        "instructions-template-echo",
    ],
    "wrongly unscored": [
        "binary-json",
        "graded-json",
        "binary-bracketed-old-names",
        "graded-paper-block-4",
        "graded-final-scores-plural",
        "concepts-unquoted-brackets",
        "concepts-concept-n-lines",
        "instructions-one-line-chain",
        "target-paren-pair",
        "target-one-line-labels",
        "graded-confidence-after",
    ],
}


def test_the_corpus_covers_every_reply_kind_in_every_style() -> None:
    assert len(ENTRIES) >= 150
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    styles = Counter((e["kind"], e["style"]) for e in ENTRIES)
    for kind in reply_corpus.KINDS:
        for style in ("qwen3-thinking", "gpt5-terse", "gemini-markdown", "json", "refusal", "truncated"):
            assert styles[(kind, style)] >= 1, (kind, style)
    ids = {e["id"] for e in ENTRIES}
    assert {i for cases in ISSUE_CASES.values() for i in cases} <= ids


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_every_reply_parses_as_expected(entry: dict) -> None:
    got = reply_corpus.parse(parsing, entry)
    expected = entry["expect"]
    if isinstance(expected, dict) and "unscored" in expected:
        assert isinstance(got, dict) and got.get("unscored") == expected["unscored"], got
        assert got["reason"]
    else:
        (outcome,) = reply_corpus.evaluate(parsing, [entry])
        assert outcome.category == "correct", got


def test_the_table_has_no_wrong_values_and_nothing_wrongly_scored() -> None:
    outcomes = reply_corpus.evaluate(parsing)
    counts = Counter(o.category for o in outcomes)
    assert counts == {"correct": len(ENTRIES)}
    table = reply_corpus.table(outcomes)
    assert f"| **all** | {len(ENTRIES)} | {len(ENTRIES)} | 0 | 0 | 0 |" in table
