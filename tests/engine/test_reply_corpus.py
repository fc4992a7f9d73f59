"""The reply corpus (tests/engine/data/reply_corpus.yaml): every reply reads as a careful person reads it.

212 replies of every kind in the styles real extractors and judges write (thinking models,
terse, markdown, JSON and structured output, refusals, replies cut at the token limit). No wrong
value, no reply scored that must be unscored, no readable reply left unscored, and an unscored
reply carries the right category. On the parsers before issue 18 this corpus gave 7 wrong
values, 25 wrongly unscored and 7 wrongly scored replies (benchmarks/reply_corpus_table.py).

Issue 44 added 51 replies (the concept lists, chains and edit targets with the texts of their
prompt, ``context``; graded verdicts need only the template's rubric): 18 that are not evidence
(the prompt's own example or rubric line sent back, a concept or edit target with no support, a
change that restates its concept), which the engine before issue 44 scored (``--ref efc9ddd``: 18
wrongly scored), and 33 honest ones beside them (real-photo explanations of kitchens, beaches,
airports and streets; concepts, targets and changes in other words than their texts), which stay
scored.
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


# The replies of issue 44: read by the parsers, but not evidence (wrongly scored before).
NOT_EVIDENCE = {
    "echoed": [
        "evidence-concepts-example-kitchen-schema",
        "evidence-concepts-example-beach",
        "evidence-concepts-example-airport-markdown",
        "evidence-concepts-inline-example-street",
        "evidence-concepts-example-kitchen-words-apart",
        "evidence-concepts-example-paraphrased-beach",
        "evidence-target-counter-example-kitchen",
        "evidence-target-counter-example-traffic",
        "evidence-target-example-beach",
        "evidence-target-blank",
        "evidence-graded-rubric-line-other-score",
        "evidence-graded-rubric-line-five-score-one",
    ],
    "unsupported": [
        "evidence-concepts-unsupported-beach",
        "evidence-concepts-unsupported-second-airport",
        "evidence-target-unsupported-airport",
    ],
    "restated": [
        "evidence-instructions-restated-schema",
        "evidence-instructions-restated-text",
        "evidence-instructions-restated-second-generic",
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


def test_replies_that_are_not_evidence_are_unscored_with_their_own_reason() -> None:
    """Each was scored by the engine before issue 44 (the parsers alone read a value) and is now
    unscored with its rule's reason; the honest replies with context stay scored as labelled."""
    by_id = {e["id"]: e for e in ENTRIES}
    for reason, ids in NOT_EVIDENCE.items():
        for entry_id in ids:
            entry = by_id[entry_id]
            assert entry["expect"] == {"unscored": reason}, entry_id
            (before,) = reply_corpus.evaluate(parsing, [entry], evidence=False)
            assert before.category == "wrongly scored", entry_id
            got = reply_corpus.parse(parsing, entry)
            assert got["unscored"] == reason and got["reason"], (entry_id, got)
    listed = {i for ids in NOT_EVIDENCE.values() for i in ids}
    honest = [e for e in ENTRIES if e["id"].startswith("evidence-") and e["id"] not in listed]
    assert len(honest) >= 30
    kinds = {e["kind"] for e in honest}
    assert kinds == {"concepts", "instructions", "edit_target", "graded"}
    for outcome in reply_corpus.evaluate(parsing, honest):
        assert outcome.category == "correct", (outcome.id, outcome.got)
    before = reply_corpus.evaluate(parsing, [by_id[i] for i in listed], evidence=False)
    assert Counter(o.category for o in before) == {"wrongly scored": 18}
