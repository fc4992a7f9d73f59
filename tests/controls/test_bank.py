"""The shape of the hand-written bank of known-answer controls (``edct_task/controls/bank.yaml``).

What is checked here is what a reader cannot trust by eye across a hundred entries: every entry
parses, ids are unique and say what they hold, each domain covers every verdict class and graded
level with AC, EF and level agreeing with the rubric, every expected concept and edit target is
named by the text it is read from (so a correct extractor or parser can get it right), the concept
controls keep clear of the example in the extractor's own prompt, and a run's draw balances them.
Whether each verdict is right is the writers' job; these tests keep the bank answerable.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from importlib import resources
from typing import Any

import pytest
import yaml

from edct_task import prompts
from edct_task.controls import draw, kind_of, parse_item, shipped
from edct_task.engine.controls import (
    ConceptsControl,
    ControlItem,
    EditParseControl,
    JudgeControl,
    names_all,
)

DOMAINS = ("okvqa", "drivelm", "3dsr")
CLASSES = ((1, 1), (1, 0), (0, 0), (0, 1))
ID_KIND = {"judge": "judge", "concepts": "concepts", "edit": "edit_parse"}
NUMBERED = re.compile(r"^\s*(\d+)\.\s+\S")
STOPWORDS = {"a", "an", "and", "at", "for", "in", "is", "it", "its", "not", "of", "on", "or", "the", "to"}


def _text() -> str:
    return resources.files("edct_task.controls").joinpath("bank.yaml").read_text(encoding="utf-8")


def _raw() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(_text())
    assert isinstance(loaded, list)
    return loaded


@functools.cache
def _items() -> tuple[ControlItem, ...]:
    return tuple(parse_item(raw) for raw in _raw())


def _of(domain: str, kind: str) -> list[ControlItem]:
    return [i for i in _items() if i.domain == domain and kind_of(i) == kind]


def _lines(explanation: str) -> list[str]:
    """The numbered lines of a list-style explanation; every non-empty line must be one."""
    lines = [line for line in explanation.splitlines() if line.strip()]
    assert all(NUMBERED.match(line) for line in lines), explanation
    assert [int(NUMBERED.match(line).group(1)) for line in lines] == list(range(1, len(lines) + 1))  # type: ignore[union-attr]
    return lines


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS}


def _quoted_examples(template: str) -> list[str]:
    """Every double-quoted phrase in a template's text (its examples and its JSON keys)."""
    return re.findall(r'"([^"$<>]+)"', prompts.get_template(template).text)


# ---------------------------------------------------------------------------------------------
# Parsing and ids
# ---------------------------------------------------------------------------------------------


def test_the_header_comment_documents_the_schema() -> None:
    head = _text().splitlines()[:7]
    assert head[0].startswith("# Known-answer controls for the EDCT-Bench domains")
    assert any("edct_task.controls.parse_item" in line for line in head)


def test_every_entry_parses_and_ids_are_unique() -> None:
    raws = _raw()
    items = _items()
    assert len(items) == len(raws) > 0
    ids = [i.id for i in items]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert {i.domain for i in items} == set(DOMAINS)


def test_every_id_names_its_domain_and_kind() -> None:
    for item in _items():
        match = re.fullmatch(r"(okvqa|drivelm|3dsr)-(judge|concepts|edit)-(\d{2})", item.id)
        assert match, item.id
        assert match.group(1) == item.domain, item.id
        assert ID_KIND[match.group(2)] == kind_of(item), item.id


def test_every_text_is_a_non_empty_string() -> None:
    """YAML reads an unquoted ``Yes`` or ``No`` as a boolean and ``30`` as a number; the loader
    passes judge and concept fields through as they come, so the bank must quote them."""
    for item in _items():
        body = item.body
        if isinstance(body, JudgeControl):
            texts = [body.question, body.answer, body.explanation, body.new_answer, body.new_explanation]
            texts += [getattr(e, f) for e in body.edits for f in type(e).model_fields]
        elif isinstance(body, ConceptsControl):
            texts = [body.question, body.answer, body.explanation, *(w for c in body.concepts for w in c)]
        else:
            ins = body.instruction
            texts = [getattr(ins, f) for f in type(ins).model_fields] + list(body.target)
        for text in texts:
            assert isinstance(text, str) and text.strip(), (item.id, text)


def test_the_loader_names_the_broken_entry() -> None:
    from edct_task.core.errors import ConfigError

    raw = dict(_raw()[0])
    raw["id"] = "okvqa-judge-99"
    raw["judge"] = {k: v for k, v in raw["judge"].items() if k != "level"}
    with pytest.raises(ConfigError, match="okvqa-judge-99"):
        parse_item(raw)


def test_the_bank_is_part_of_what_ships() -> None:
    bank_ids = {i.id for i in _items()}
    assert bank_ids <= {i.id for i in shipped()}


# ---------------------------------------------------------------------------------------------
# Judge controls
# ---------------------------------------------------------------------------------------------


def _rubric_allows(level: int, ac: int, ef: int) -> bool:
    return {
        5: (ac, ef) == (1, 1),
        4: (ac, ef) == (1, 1),
        3: ef == 1,
        2: (ac, ef) == (1, 0),
        1: (ac, ef) == (0, 0),
    }[level]


@pytest.mark.parametrize("domain", DOMAINS)
def test_judge_controls_cover_every_class_and_level(domain: str) -> None:
    items = _of(domain, "judge")
    assert len(items) >= 12
    bodies = [i.body for i in items]
    assert all(isinstance(b, JudgeControl) for b in bodies)
    classes = Counter((b.ac, b.ef) for b in bodies)  # type: ignore[union-attr]
    assert all(classes[c] >= 2 for c in CLASSES), classes
    assert {b.level for b in bodies} == {1, 2, 3, 4, 5}  # type: ignore[union-attr]


@pytest.mark.parametrize("domain", DOMAINS)
def test_judge_levels_agree_with_the_rubric(domain: str) -> None:
    for item in _of(domain, "judge"):
        body = item.body
        assert isinstance(body, JudgeControl)
        assert _rubric_allows(body.level, body.ac, body.ef), (item.id, body.ac, body.ef, body.level)


@pytest.mark.parametrize("domain", DOMAINS)
def test_judge_steps_are_short_lists_with_one_or_two_full_edits(domain: str) -> None:
    for item in _of(domain, "judge"):
        body = item.body
        assert isinstance(body, JudgeControl)
        assert 2 <= len(_lines(body.explanation)) <= 3, item.id
        assert 1 <= len(_lines(body.new_explanation)) <= 3, item.id
        assert 1 <= len(body.edits) <= 2, item.id
        for edit in body.edits:
            assert all(getattr(edit, f).strip() for f in type(edit).model_fields), item.id
        assert len(body.explanation) + len(body.new_explanation) < 600, item.id


@pytest.mark.parametrize("domain", DOMAINS)
def test_inertia_repeats_the_old_answer_and_drift_changes_it(domain: str) -> None:
    """Level 1 keeps the old answer (the edit warranted a new one); level 3 in this bank is a drift:
    the edit warranted no change and the answer changed anyway."""
    for item in _of(domain, "judge"):
        body = item.body
        assert isinstance(body, JudgeControl)
        if body.level == 1:
            assert body.new_answer == body.answer, item.id
        if body.level == 3:
            assert body.new_answer != body.answer, item.id


# ---------------------------------------------------------------------------------------------
# Concept controls
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAINS)
def test_concept_controls_cite_one_or_two_features(domain: str) -> None:
    items = _of(domain, "concepts")
    assert len(items) >= 8
    for item in items:
        body = item.body
        assert isinstance(body, ConceptsControl)
        assert 1 <= len(body.concepts) <= 2, item.id
        assert len(_lines(body.explanation)) == len(body.concepts), item.id
        assert all(1 <= len(words) <= 3 for words in body.concepts), item.id


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_expected_concept_is_named_by_its_own_line(domain: str) -> None:
    """A correct extractor can meet every expectation: each concept's words (plural or singular,
    as the grader matches them) are named by one numbered line, a different line for each."""
    for item in _of(domain, "concepts"):
        body = item.body
        assert isinstance(body, ConceptsControl)
        assert all(names_all(body.explanation, words) for words in body.concepts), item.id
        free = _lines(body.explanation)
        for words in body.concepts:
            line = next((line for line in free if names_all(line, words)), None)
            assert line is not None, (item.id, words)
            free.remove(line)


def test_the_extractor_template_example_is_found() -> None:
    words = set().union(*(_content_words(e) for e in _quoted_examples("extract_concepts")))
    assert len(words) >= 3, words


def test_concept_controls_avoid_the_extractor_prompt_example() -> None:
    """An extractor that parrots its prompt's example must not score on the bank: no concept
    control's texts share a content word with it (plural or singular)."""
    example = set().union(*(_content_words(e) for e in _quoted_examples("extract_concepts")))
    for item in _items():
        body = item.body
        if not isinstance(body, ConceptsControl):
            continue
        for text in (body.explanation, body.question, body.answer):
            shared = {w for w in example if names_all(text, [w])}
            assert not shared, (item.id, shared)


# ---------------------------------------------------------------------------------------------
# Edit-parse controls
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAINS)
def test_edit_parse_controls_cover_every_type(domain: str) -> None:
    items = _of(domain, "edit_parse")
    assert len(items) >= 8
    types = Counter(i.body.edit_type for i in items)  # type: ignore[union-attr]
    assert all(types[t] >= 2 for t in ("ADD", "MODIFY", "REMOVE")), types


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_target_is_named_by_its_change(domain: str) -> None:
    for item in _of(domain, "edit_parse"):
        body = item.body
        assert isinstance(body, EditParseControl)
        assert body.target, item.id
        assert names_all(body.instruction.change, body.target), (item.id, body.target)


def test_edit_parse_controls_avoid_the_parser_prompt_example() -> None:
    text = prompts.get_template("edit_parse").text
    example = re.search(r'for example "([^"]+)"', text)
    assert example, "the edit_parse template's example target"
    words = _content_words(example.group(1))
    for item in _items():
        body = item.body
        if not isinstance(body, EditParseControl):
            continue
        assert not any(names_all(w, [t]) for w in words for t in body.target), item.id
        assert example.group(1).lower() not in body.instruction.as_text().lower(), item.id


# ---------------------------------------------------------------------------------------------
# The draw
# ---------------------------------------------------------------------------------------------


def test_a_draw_over_the_three_domains_fills_every_kind() -> None:
    drawn = draw(list(DOMAINS), 16, seed=0, k=2)
    kinds = Counter(kind_of(i) for i in drawn)
    assert kinds == {"judge": 16, "concepts": 16, "edit_parse": 16}
    assert {i.domain for i in drawn} == set(DOMAINS)
    assert len({i.id for i in drawn}) == len(drawn)


LEVELS = (1, 2, 3, 4, 5)


def _level(item: ControlItem) -> int:
    return item.body.level  # type: ignore[union-attr]


def _balanced(counts: Counter[int], available: Counter[int]) -> bool:
    """Round-robin balance: a level falls more than one behind another only when it has run out."""
    return all(counts[a] >= counts[b] - 1 or counts[a] == available[a] for a in LEVELS for b in LEVELS)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("per_kind", [5, 10, 16])
def test_a_draw_balances_judge_items_over_the_levels(domain: str, per_kind: int) -> None:
    """Strata are the graded levels (and so the verdict classes): a judge that always gives one
    verdict, or one score, answers at most two of the five levels right."""
    available = Counter(_level(i) for i in _of(domain, "judge"))
    judged = [i for i in draw([domain], per_kind, seed=0, k=2) if kind_of(i) == "judge"]
    assert len(judged) == min(per_kind, sum(available.values()))
    counts = Counter(_level(i) for i in judged)
    assert _balanced(counts, available), (counts, available)
    if per_kind <= 2 * len(LEVELS):  # every level holds at least two: an even split
        assert set(counts.values()) == {per_kind // len(LEVELS)}, counts


def test_the_okvqa_draw_of_sixteen() -> None:
    drawn = draw(["okvqa"], 16, seed=0, k=2)
    judged = [i for i in drawn if kind_of(i) == "judge"]
    assert 0 < len(judged) <= 16
    assert {i.domain for i in drawn} == {"okvqa"}
    counts = Counter(_level(i) for i in judged)
    available = Counter(_level(i) for i in _of("okvqa", "judge"))
    assert set(counts) == set(LEVELS)
    assert _balanced(counts, available), counts
    classes = Counter((i.body.ac, i.body.ef) for i in judged)  # type: ignore[union-attr]
    assert set(classes) == set(CLASSES)


def test_a_draw_is_seeded_and_keeps_to_k() -> None:
    assert [i.id for i in draw(list(DOMAINS), 16, seed=3, k=2)] == [
        i.id for i in draw(list(DOMAINS), 16, seed=3, k=2)
    ]
    one = draw(list(DOMAINS), 16, seed=0, k=1)
    assert all(len(i.body.concepts) == 1 for i in one if isinstance(i.body, ConceptsControl))
    assert any(isinstance(i.body, ConceptsControl) for i in one)
