"""Replies that are read but are not evidence: general rules on the values the parsers return.

A parser says *what* a reply states (``edct_task.parsing``); these rules say whether what it
states can be evidence about the sample it was asked about. Each rule compares the parsed value
with the texts of its own prompt, never with a list of known bad replies:

``echoed``      the value is the prompt's own example or placeholder sent back (the extractor's
                example concept list, the edit parser's example target, a judge's rubric line)
                and the texts it was asked about do not cite it. The examples are read from the
                prompt templates (``edct_task.prompts``) and the reply schemas
                (``edct_task.reply_schemas``) when a rule runs, so a changed template changes them.
``unsupported`` a concept with no word of it (or a variant: plural, ``-ing``/``-ed``, a
                British/American spelling, a few synonyms) in the question, answer or explanation
                it was extracted from; an edit target with none in its instruction.
``restated``    an edit instruction whose ``change`` holds no word beyond its concept's: it names
                the concept but no action and no new value.

Each rule returns ``None`` (evidence) or a ``NotEvidence`` with its kind and a reason in words.
The rules are conservative: a concept needs *one* of its words in the texts, an instruction *one*
word beyond its concept; an example sent back is evidence when one sentence of the texts holds at
least half of its words. The judge-health signals (``scoring.health``) use ``reason_missing``,
``copies_template`` and ``contradicts``.

Pure functions, no I/O but reading the templates once per template text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from edct_task import prompts
from edct_task.reply_schemas import SCHEMAS

EvidenceKind = Literal["echoed", "unsupported", "restated"]
"""Why a readable reply is not evidence (its ``unscored`` category)."""

KINDS: tuple[EvidenceKind, ...] = ("echoed", "unsupported", "restated")


@dataclass(frozen=True)
class NotEvidence:
    """A reply that was read but is not evidence: unscored with this kind and reason."""

    kind: EvidenceKind
    reason: str


# --------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------

_STOPWORD_TEXT = """a an the this that these those there here it its it's they them their theirs
    he she him her his
    i me my we us our you your one ones some any each every all both either neither no not nor none
    and or but so if then than as of in on at to from by with without into onto over under above below
    across along around behind beside besides between beyond near next toward towards through up down
    out off about against among within upon via per
    is are was were be been being am do does did doing done has have had having will would shall should
    can could may might must
    which who whom whose what when where why how also just only very more most much many few less
    same other another such own too quite rather really still yet again already
    like while because since until unless although though whether"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_GENERIC_TEXT = """colour color colours colors coloured colored shape size position presence absence
    appearance
    part parts area region side sides object objects thing things item items feature features visual
    image picture photo photograph scene view element elements detail details kind type"""
_GENERIC = frozenset(_GENERIC_TEXT.split())
"""Words that name an attribute or a thing in general: no support on their own."""
_SPELLINGS = {
    "colour": "color",
    "colours": "colors",
    "coloured": "colored",
    "recolour": "recolor",
    "recoloured": "recolored",
    "grey": "gray",
    "centre": "center",
    "tyre": "tire",
    "tyres": "tires",
    "aeroplane": "airplane",
    "aeroplanes": "airplanes",
    "metre": "meter",
    "favourite": "favorite",
}
_IRREGULAR = {
    "men": "man",
    "women": "woman",
    "people": "person",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "leaves": "leaf",
    "knives": "knife",
    "shelves": "shelf",
    "wolves": "wolf",
    "lying": "lie",
}
_SYNONYM_TEXT = """
    car vehicle automobile sedan suv van
    airplane plane aircraft jet airliner
    person man woman pedestrian human boy girl child kid toddler baby adult lady guy player batter rider
    dog puppy retriever terrier poodle hound
    cat kitten
    boat sailboat ship yacht vessel
    laptop notebook computer
    frisbee disc
    cup mug
    bike bicycle cycle
    motorbike motorcycle
    tv television
    phone cellphone smartphone
    sofa couch
    sea ocean
    umbrella parasol
    road street
    fridge refrigerator
    shore shoreline coast
"""
_SYNONYMS = [line.split() for line in _SYNONYM_TEXT.strip().splitlines()]
"""A few synonym groups of everyday objects (one a line): kept short on purpose."""
_WORD_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")


def _stem(word: str) -> str:
    """A light stem: plural, ``-ing``, ``-ed`` and a final ``e`` removed (``facing`` = ``face``)."""
    w = _SPELLINGS.get(word, word)
    w = _IRREGULAR.get(w, w)
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes", "zes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # runn(ing) → run
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


_SYNONYM_OF = {_stem(w): group[0] for group in _SYNONYMS for w in group}


def words(text: str) -> list[str]:
    """The lower-case words of a text (``player's`` → ``player``)."""
    out = []
    for token in _WORD_RE.findall(text.casefold().replace("’", "'")):
        out.append(token.split("'", 1)[0])
    return [w for w in out if w]


def content_words(text: str, *, generic: bool = True) -> list[str]:
    """The stems of a text's words that carry content (no articles, prepositions, auxiliaries …);
    ``generic=False`` also drops words that name an attribute or thing in general (``colour``)."""
    out = []
    for w in words(text):
        if w in _STOPWORDS or (not generic and w in _GENERIC) or w.isdigit():
            continue
        if len(w) < 2:
            continue
        out.append(_stem(w))
    return out


def _same(a: str, b: str, *, synonyms: bool) -> bool:
    """Two stems name the same thing: equal; one a part of a compound the other is (``cross`` /
    ``crosswalk``: at least 4 letters; ``tie`` / ``necktie``, ``board`` / ``surfboard``: at the end,
    at least 3); or (``synonyms``) in one synonym group."""
    if a == b:
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if (len(short) >= 4 and long.startswith(short)) or (len(short) >= 3 and long.endswith(short)):
        return True
    return synonyms and a in _SYNONYM_OF and _SYNONYM_OF[a] == _SYNONYM_OF.get(b)


def _found(word: str, pool: Iterable[str], *, synonyms: bool) -> bool:
    return any(_same(word, other, synonyms=synonyms) for other in pool)


def _heads(text: str) -> list[str]:
    """The words a phrase's support is judged on: its content words, less the generic ones
    unless nothing else is left."""
    specific = content_words(text, generic=False)
    return specific or content_words(text)


_SENTENCE_RE = re.compile(r"(?<=[.;!?])\s+|\n+")


def _sentences(*texts: str) -> list[list[str]]:
    """The content-word stems of each sentence (or line) of the texts."""
    out = []
    for text in texts:
        for sentence in _SENTENCE_RE.split(text or ""):
            stems = content_words(sentence)
            if stems:
                out.append(stems)
    return out


def supported(phrase: str, *texts: str) -> bool:
    """One of the phrase's words (or a variant or synonym of it) occurs in the texts."""
    heads = _heads(phrase)
    if not heads:
        return True  # nothing to look for
    pool = {w for text in texts for w in content_words(text)}
    return any(_found(w, pool, synonyms=True) for w in heads)


def _cited(phrase: str, *texts: str) -> bool:
    """One sentence of the texts holds at least half of the phrase's words, literally (variants but
    no synonyms): the texts cite what the phrase names."""
    heads = _heads(phrase)
    if not heads:
        return False
    need = (len(heads) + 1) // 2
    return any(
        sum(_found(w, sentence, synonyms=False) for w in heads) >= need for sentence in _sentences(*texts)
    )


# --------------------------------------------------------------------------------------------
# The prompt's own examples
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """A value a prompt shows as an example (``negative``: as what *not* to write)."""

    text: str
    negative: bool = False

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(content_words(self.text))


@dataclass(frozen=True)
class TemplateText:
    """What a prompt template offers a reply to copy: examples, placeholders, rubric lines."""

    examples: tuple[Example, ...]
    """Quoted values and the strings of JSON arrays in the template, and ``examples`` /
    ``default`` strings of its reply schema."""
    placeholders: tuple[str, ...]
    """The blanks the reply format shows (``<object>``, ``<one line>``; ``...``)."""
    rubric: dict[str, str]
    """Labelled lines: a score or name → its text (``"3"`` → ``the answer is right but …``)."""
    grams: frozenset[tuple[str, ...]]
    """The word 4-grams of the template's own text (inputs and placeholders left out)."""


_QUOTED_RE = re.compile(r"[\"“](?P<text>[^\"“”\n$]{1,200})[\"”](?P<after>\s*:)?")
_NEGATIVE_BEFORE_RE = re.compile(r"(?:\bnot|\bnever|\binstead of|\brather than|\bavoid|\bno)\W{0,3}\Z", re.I)
_PLACEHOLDER_RE = re.compile(r"<(?P<inner>[^<>/\n$]{1,40})>")
_RUBRIC_RE = re.compile(
    r"^[ \t]*[-*]?[ \t]*(?P<label>\d|[A-Z]{2,4})\b[^:\n]{0,40}:[ \t]*(?P<text>\S.*)$", re.M
)
_INPUT_RE = re.compile(r"<(?P<tag>[a-z_]+)>.*?</(?P=tag)>", re.S)


def _schema_strings(value: Any) -> Iterable[str]:
    """``examples`` / ``default`` strings anywhere in a JSON schema."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("examples", "default") and isinstance(item, (list, str)):
                yield from (x for x in ([item] if isinstance(item, str) else item) if isinstance(x, str))
            else:
                yield from _schema_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _schema_strings(item)


@lru_cache(maxsize=32)
def _template_text(text: str, schema: str) -> TemplateText:
    examples: list[Example] = []
    placeholders: list[str] = []
    for match in _QUOTED_RE.finditer(text):
        value = match.group("text").strip()
        if match.group("after") or not content_words(value) or value.isupper() or value.startswith("<"):
            continue  # a JSON key, a blank ("...", "<object>": a placeholder), an enum value ("ADD")
        negative = _NEGATIVE_BEFORE_RE.search(text[max(0, match.start() - 16) : match.start()]) is not None
        examples.append(Example(value, negative))
    for line in text.splitlines():  # JSON arrays of strings: ["...", "..."]
        start = line.find("[")
        if start == -1:
            continue
        try:
            value = json.loads(line[start : line.rfind("]") + 1])
        except ValueError:
            continue
        if isinstance(value, list):
            examples += [Example(v) for v in value if isinstance(v, str) and content_words(v)]
    examples += (
        [Example(s) for s in _schema_strings(json.loads(schema)) if content_words(s)] if schema else []
    )
    tags = set(re.findall(r"</([a-z_]+)>", text))
    for match in _PLACEHOLDER_RE.finditer(text):
        inner = match.group("inner").strip()
        if inner not in tags:
            placeholders.append(inner)
    rubric: dict[str, str] = {}
    for m in _RUBRIC_RE.finditer(text):  # a label's first line of text (not "AC: <0 or 1>")
        if len(words(m.group("text"))) >= MIN_COPY_WORDS:
            rubric.setdefault(m.group("label"), m.group("text").strip())
    own = _INPUT_RE.sub(" ", text)
    own = _PLACEHOLDER_RE.sub(" ", own)
    return TemplateText(
        examples=tuple(dict.fromkeys(examples)),
        placeholders=tuple(dict.fromkeys(placeholders)),
        rubric=rubric,
        grams=frozenset(_grams(words(own))),
    )


def template_text(name: str) -> TemplateText:
    """What template ``name`` offers a reply to copy, read from the template as it is now."""
    schema = SCHEMAS.get(name)
    return _template_text(prompts.get_template(name).text, json.dumps(schema) if schema else "")


def _grams(tokens: Sequence[str], n: int = 4) -> Iterable[tuple[str, ...]]:
    return (tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _echo(value: str, template: TemplateText) -> Example | None:
    """The template's example or placeholder that ``value`` reproduces, or None: its content words,
    in order, are the example's, or (two or more of them) all words of the example (``red traffic
    light`` reproduces ``the red colour of the traffic light``)."""
    key = tuple(content_words(value))
    if not key:
        return None
    for example in template.examples:
        if example.key == key:
            return example
    specific = content_words(value, generic=False)
    for example in template.examples:
        if len(specific) >= 2 and set(specific) <= set(example.key):
            return example
    for blank in template.placeholders:
        if tuple(content_words(blank)) == key:
            return Example(f"<{blank}>", negative=True)
    return None


# --------------------------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------------------------


def echoed_concepts(
    concepts: Sequence[str], *, question: str, answer: str, explanation: str
) -> NotEvidence | None:
    """``echoed``: a concept is the prompt's example and no sentence of the question, answer or
    explanation cites it (holds half its words)."""
    template = template_text("extract_concepts")
    for i, concept in enumerate(concepts, 1):
        example = _echo(concept, template)
        if example is not None and (example.negative or not _cited(concept, explanation, question, answer)):
            return NotEvidence(
                "echoed",
                f"concept {i} {concept!r} is the prompt's own example, and the explanation does not cite it",
            )
    return None


def unsupported_concepts(
    concepts: Sequence[str], *, question: str, answer: str, explanation: str
) -> NotEvidence | None:
    """``unsupported``: no word of a concept (nor a variant or synonym) is in the question, answer
    or explanation it was extracted from."""
    for i, concept in enumerate(concepts, 1):
        if not supported(concept, explanation, question, answer):
            return NotEvidence(
                "unsupported",
                f"concept {i} {concept!r} has no word in the question, answer or explanation it was "
                "extracted from",
            )
    return None


def check_concepts(
    concepts: Sequence[str], *, question: str, answer: str, explanation: str
) -> NotEvidence | None:
    """The extractor's concepts against the texts they were extracted from: ``echoed_concepts``,
    then ``unsupported_concepts``."""
    texts = {"question": question, "answer": answer, "explanation": explanation}
    return echoed_concepts(concepts, **texts) or unsupported_concepts(concepts, **texts)


_CHANGE_LINE_RE = re.compile(r"^[ \t]*change[ \t]*:[ \t]*(?P<text>.*)$", re.I | re.M)


def _change_part(instruction: str) -> str:
    """An instruction's ``Change:`` line (what the edit acts on); the whole text without one."""
    match = _CHANGE_LINE_RE.search(instruction)
    return match.group("text") if match else instruction


def echoed_target(target: str, instruction: str) -> NotEvidence | None:
    """``echoed``: the edit target is the prompt's example and the instruction's change does not
    cite it, or its counter-example (``not "the colour of the light"``) or its blank (``<object>``)."""
    example = _echo(target, template_text("edit_parse"))
    if example is None or (not example.negative and _cited(target, _change_part(instruction))):
        return None
    what = "blank" if example.text.startswith("<") else "counter-example" if example.negative else "example"
    return NotEvidence(
        "echoed", f"edit target {target!r} is the prompt's own {what}, not an object of the instruction"
    )


def unsupported_target(target: str, instruction: str) -> NotEvidence | None:
    """``unsupported``: no word of the edit target (nor a variant or synonym) is in its instruction."""
    if supported(target, instruction):
        return None
    return NotEvidence("unsupported", f"edit target {target!r} has no word in its instruction")


def check_edit_target(target: str, instruction: str) -> NotEvidence | None:
    """The edit parser's target against the instruction it was read from: ``echoed_target``, then
    ``unsupported_target``."""
    return echoed_target(target, instruction) or unsupported_target(target, instruction)


_FILLER_TEXT = """a an the this that these those it its they them their
    is are was were be been being has have had of and there"""
_FILLER = frozenset(_FILLER_TEXT.split())
"""Words a restated change may add to its concept's words (no preposition, negation or adverb:
``without``, ``not``, ``behind``, ``no longer`` say what changes)."""


def restates(change: str, concept: str) -> bool:
    """``change`` holds words, and every one but articles, pronouns and the verbs *be* and *have* is
    a word of ``concept`` (the same stem): no action, no new value, no new place."""
    said = [_stem(w) for w in words(change) if w not in _FILLER]
    own = {_stem(w) for w in words(concept)}
    return bool(said) and bool(own) and all(w in own for w in said)


def restated_changes(changes: Sequence[tuple[str, str]]) -> NotEvidence | None:
    """``restated``: of the chain's ``(change, concept)`` pairs, a change restates its concept."""
    for j, (change, concept) in enumerate(changes, 1):
        if restates(change, concept):
            return NotEvidence(
                "restated",
                f"edit {j}'s change {change!r} restates its concept {concept!r}: no action, no new value",
            )
    return None


check_instructions = restated_changes
"""The instruction writer's chain against the listed concepts (``restated_changes``)."""


def _coverage(reason: str, grams: Iterable[tuple[str, ...]] | frozenset[tuple[str, ...]]) -> float:
    """The share of the reason's words inside a 4-gram of ``grams``."""
    tokens = words(reason)
    if len(tokens) < 4:
        return 0.0
    known = grams if isinstance(grams, frozenset) else frozenset(grams)
    covered = [False] * len(tokens)
    for i, gram in enumerate(_grams(tokens)):
        if gram in known:
            covered[i : i + 4] = [True] * 4
    return sum(covered) / len(tokens)


COPY_SHARE = 0.8
"""A reason is copied from a text when this share of its words sits in 4-grams of that text."""
MIN_COPY_WORDS = 6


def copied_rubric_lines(reason: str, template: str = "judge_graded") -> set[str]:
    """The rubric labels (``"3"``) whose lines the reason copies; empty when it copies none.

    A reason copies the rubric when ``COPY_SHARE`` of its words (at least ``MIN_COPY_WORDS``) sit in
    4-grams of the rubric's lines; the lines it copies are those it copies alone, else (a mix of
    lines) every line that covers a third of it.
    """
    if len(words(reason)) < MIN_COPY_WORDS:
        return set()
    lines = {label: frozenset(_grams(words(text))) for label, text in template_text(template).rubric.items()}
    if not lines or _coverage(reason, frozenset().union(*lines.values())) < COPY_SHARE:
        return set()
    alone = {label for label, grams in lines.items() if _coverage(reason, grams) >= COPY_SHARE}
    return alone or {label for label, grams in lines.items() if _coverage(reason, grams) >= 1 / 3}


def echoed_rubric(score: int, reason: str) -> NotEvidence | None:
    """``echoed``: the graded reason is the rubric's line for another score than the one given."""
    lines = copied_rubric_lines(reason)
    if lines and str(score) not in lines:
        which = ", ".join(sorted(lines))
        return NotEvidence(
            "echoed",
            f"the reason is the rubric's text for score {which}, but the score given is {score}",
        )
    return None


check_graded = echoed_rubric
"""The graded judge's verdict against the template's rubric (``echoed_rubric``)."""

RULES = {
    "concepts": (echoed_concepts, unsupported_concepts),
    "instructions": (restated_changes,),
    "edit_target": (echoed_target, unsupported_target),
    "graded": (echoed_rubric,),
}
"""Reply kind → its rules, each run alone by ``benchmarks/evidence_rules.py``."""


# --------------------------------------------------------------------------------------------
# Judge-health signals
# --------------------------------------------------------------------------------------------

_LABEL_WORDS = frozenset(
    ["ac", "ef", "ccs", "pcs", "ncc", "reason", "reasons", "reasoning", "score", "scores", "line", "n", "a"]
)


def reason_missing(reason: str, template: str | None = None) -> bool:
    """The judge gave no reason: empty, a label (``AC``), or the template's blank (``<one line>``)."""
    text = (reason or "").strip()
    if not text:
        return True
    if template is not None:
        blanks = {tuple(words(b)) for b in template_text(template).placeholders}
        if tuple(words(text.strip("<>"))) in blanks:
            return True
    return all(w in _LABEL_WORDS or w in _STOPWORDS or w.isdigit() for w in words(text))


def copies_template(reason: str, template: str) -> bool:
    """The reason is the template's own text (its rubric or instructions) for the most part."""
    if len(words(reason)) < MIN_COPY_WORDS:
        return False
    return _coverage(reason, template_text(template).grams) >= COPY_SHARE


_NEGATED = re.compile(
    r"\b(?:not|no|never|without|nor|hardly)\W+(?:\w+\W+){0,2}\Z|n't\W+(?:\w+\W+){0,2}\Z", re.I
)
_EF_FAIL_RE = re.compile(
    r"\bstill\s+(?:relies|rely|relying|cites?|citing|mentions?|mentioning|refers|referring|uses|using|"
    r"depends|points|names|describes|describing)\b[^.;\n]{0,80}?"
    r"\b(?:removed|altered|changed|deleted|old|original|previous|earlier|gone)\b",
    re.I,
)
_AC_FAIL_RE = re.compile(
    r"\b(?:inconsistent|not\s+(?:logically\s+)?consistent|contradicts\s+the\s+edits?|unwarranted|"
    r"not\s+warranted|drift(?:s|ed)?)\b",
    re.I,
)
_AC_OK_RE = re.compile(
    r"\b(?:is|are|remains?|stays?)\s+(?:logically\s+|fully\s+|still\s+)?consistent\s+with\b", re.I
)
_EF_OK_RE = re.compile(r"\bno\s+longer\s+(?:relies|cites|mentions|refers|uses)\b", re.I)


def _says(pattern: re.Pattern[str], text: str) -> bool:
    """The pattern occurs in the text, not negated by a word just before it."""
    return any(
        _NEGATED.search(text[max(0, m.start() - 40) : m.start()]) is None for m in pattern.finditer(text)
    )


def _fails(reason: str, which: str) -> bool:
    return _says(_AC_FAIL_RE if which == "ac" else _EF_FAIL_RE, reason)


def _passes(reason: str, which: str) -> bool:
    return _says(_AC_OK_RE if which == "ac" else _EF_OK_RE, reason)


def contradicts(score: int, reason: str, which: str) -> bool:
    """The reason says the opposite of its score. ``which``: ``ac`` or ``ef`` (a binary score), or
    ``graded`` (1..5).

    Conservative by design: AC 1 with "inconsistent" / "not consistent" / "unwarranted" / "drift";
    EF 1 with "still relies on / cites … removed / altered …"; AC 0 with "is consistent with" or EF
    0 with "no longer relies / cites" and nothing against it; a graded 4 or 5 with a failure of
    either kind; and any graded reason that copies the rubric's line of another score. A negation
    just before a phrase ("no drift", "not inconsistent") cancels it.
    """
    if which in ("ac", "ef"):
        if score == 1:
            return _fails(reason, which)
        return _passes(reason, which) and not _fails(reason, which)
    if score >= 4 and (_fails(reason, "ac") or _fails(reason, "ef")):
        return True
    lines = copied_rubric_lines(reason)
    return bool(lines) and str(score) not in lines


__all__ = [
    "KINDS",
    "RULES",
    "EvidenceKind",
    "Example",
    "NotEvidence",
    "TemplateText",
    "check_concepts",
    "check_edit_target",
    "check_graded",
    "check_instructions",
    "content_words",
    "contradicts",
    "copied_rubric_lines",
    "copies_template",
    "echoed_concepts",
    "echoed_rubric",
    "echoed_target",
    "reason_missing",
    "restated_changes",
    "restates",
    "supported",
    "template_text",
    "unsupported_concepts",
    "unsupported_target",
    "words",
]
