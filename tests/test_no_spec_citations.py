"""No code cites ``SPEC``: the project's restatement of the protocol does not ship, so a docstring
says the rule itself, or cites the paper (its section, algorithm, table or figure)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("edct_task", "model_adapters", "verification", "task_configs", "benchmarks")
"""What ships (the packages and the lmms-eval task folder) and the benchmark scripts; nothing is left out."""

CITATION = re.compile(r"\bSPEC\b")
"""``SPEC §4``, ``SPEC: 0.10``, ``SPEC step 5``, ``SPEC's structures``, ``SPEC.md``; not ``_SPEC`` or
``SPECIAL`` (names)."""


def _text_files(root: Path):
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            yield path, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # checkpoints, images: not text
            continue


def test_no_shipped_file_cites_the_spec() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for package in SCANNED
        for path, text in _text_files(ROOT / package)
        for n, line in enumerate(text.splitlines(), 1)
        if CITATION.search(line)
    ]
    assert found == [], "say the rule, or cite the paper's section:\n" + "\n".join(found)


def test_the_pattern_sees_the_old_citations_and_not_names() -> None:
    old = [
        '"""The EDCT protocol for one sample, as sans-IO logic (SPEC §2).',
        'description="Pass needs r_in > tau_in (SPEC: 0.10)."',
        'description="Align the edit to the original before comparing (SPEC step 5)."',
        '"""Versioned prompt templates, written in our own words after SPEC\'s structures.',
    ]
    assert all(CITATION.search(line) for line in old)
    assert not CITATION.search("_SPECIAL_TOKEN_RE = re.compile(...)") and not CITATION.search("PHOTO_SPECS")
