"""Linear-time scanning of model replies: labelled values, quotation, verdict blocks, refusals.

The building blocks of ``edct_task.parsing``. A *statement* is a label, a separator and a value
(``AC: 1``, ``**Score**: 4/5``, ``| EF | 0 |``, ``Type: MODIFY``). Statements are grouped into
*blocks*: a block ends where a label it already holds comes again, so ``AC: 1 EF: 1 ... EF: 0``
is the block ``{AC: 1, EF: 1}`` followed by the partial block ``{EF: 0}``.

Linear time, by construction: labels are found by a regex of plain alternatives; everything after
a label is read by hand or by patterns whose unbounded runs are single character classes that
never sit next to another run over the same characters; every scan moves forward only. No reply,
however padded with spaces, tabs, brackets or tags, can make a pattern backtrack over itself.

Fast as well as linear: labels are searched for in a lower-cased copy of the reply (``fold``) by
patterns without ``re.IGNORECASE``, which the regex engine scans several times faster; and what
costs a step in Python per line, label or cell is bounded (``MAX_LABELS``, ``MAX_LINES``,
``MAX_CELLS``: a reply's last 2,000 labels and lines, a table row's first 32 cells), so a megabyte
of any one character, or of a short pattern repeated, parses in a fraction of a second.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

ValueReader = Callable[[str, int], "tuple[str, int] | None"]
"""``(text, position) -> (raw value, end)`` of the value starting at ``position``, or None."""


def fold(text: str) -> str:
    """``text`` lower-cased character by character, as long as ``text``: a pattern of lower-case
    ASCII compiled without ``re.IGNORECASE`` finds in it what the same pattern compiled with it
    finds in ``text``, at the same offsets.

    ``str.lower`` keeps the length except for ``İ`` (two characters); the non-ASCII letters that
    ``re.IGNORECASE`` matches to ASCII ones (``İ ı`` → i, ``ſ`` → s, the Kelvin sign → k) are
    written as those.
    """
    if text.isascii():
        return text.lower()
    return text.replace("İ", "i").lower().replace("ı", "i").replace("ſ", "s")


class Labels:
    """A pattern of labels written in lower-case ASCII, compiled twice: ``folded`` to search a
    reply's ``fold`` (fast), ``anycase`` (``re.IGNORECASE``) to match a short piece of text as it is."""

    def __init__(self, pattern: str) -> None:
        self.folded = re.compile(pattern)
        self.anycase = re.compile(pattern, re.IGNORECASE)


def word_alternation(words: Sequence[str], not_after: str) -> str:
    """``(?<!not_after)(?:word|word|...)`` written so that the regex engine searches it fast.

    ``words``: regex fragments, each starting with a lower-case letter. They are grouped by that
    letter, each group written as the letter, then the lookbehind (``a(?<!X a)...``): a pattern
    that starts with an alternation of literals is skipped through at C speed to the letters it
    can start with, while one that starts with a lookbehind is tried at every position. The words
    keep their order within a letter, and words with different first letters never match at the
    same place, so the pattern finds the same words at the same places.
    """
    by_letter: dict[str, list[str]] = {}
    for word in words:
        by_letter.setdefault(word[0], []).append(word[1:])
    groups = [f"{letter}(?<!{not_after}{letter})(?:{'|'.join(rests)})" for letter, rests in by_letter.items()]
    return f"(?:{'|'.join(groups)})"


MAX_LINES = 2000
"""The readers that take a step in Python per line (markdown lists, tables, labelled edit
instructions) read at most this many lines of a reply: its last ones, or its first ones for the
instructions, which a chain lists from its start. Counted as ``str.splitlines`` counts them."""
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# one break ("\\r\\n" is one), written to start with a character class: the engine skips to it
_LINE_BREAK_RE = re.compile(f"[{_LINE_BREAKS}](?:(?<=\\r)\\n)?")
_LINE_BREAK_BACKWARDS_RE = re.compile(f"[{_LINE_BREAKS}](?:(?<=\\n)\\r)?")  # in a reversed text
_NEWLINE_RE = re.compile("\n")


def last_lines_start(text: str, count: int = MAX_LINES, *, newlines_only: bool = False) -> int:
    """Where the last ``count`` lines of ``text`` start (0 when it has no more); lines end where
    ``str.splitlines`` ends them, or, with ``newlines_only``, at ``"\\n"`` (``str.split("\\n")``)."""
    if len(text) <= count:
        return 0
    breaks = (_NEWLINE_RE if newlines_only else _LINE_BREAK_BACKWARDS_RE).finditer(text[::-1])
    # the count-th break from the end ends the line before the last `count` ones; a break that
    # ends the text starts no line for splitlines, an empty one for split
    ends_with_break = text[-1] in ("\n" if newlines_only else _LINE_BREAKS)
    skip = count if ends_with_break and not newlines_only else count - 1
    before = next(itertools.islice(breaks, skip, None), None)
    return 0 if before is None else len(text) - before.start()


def first_lines_end(text: str, count: int = MAX_LINES) -> int:
    """Where the first ``count`` lines of ``text`` (as ``str.splitlines`` counts them) end, their
    last line break included."""
    if len(text) <= count:
        return len(text)
    after = next(itertools.islice(_LINE_BREAK_RE.finditer(text), count - 1, None), None)
    return len(text) if after is None else after.end()


@dataclass(frozen=True)
class Statement:
    """One labelled value found in a reply."""

    name: str
    """Canonical name of the label (``"ac"``, ``"score"``, ``"target"`` ...)."""
    start: int
    """Offset of the label in the reply."""
    end: int
    """Offset just after the value."""
    value: str
    """The value as written (``"1"``, ``"4/5"``, ``"yes"``, ``"traffic light"``)."""
    value_start: int = 0
    enclosed: bool = False
    """The statement sits inside quotation marks or parentheses (a quote or an aside)."""


# Between a label and its value: decoration, an optional "(...)" aside, an optional "score" word,
# then one separator character.
_DECOR_RE = re.compile(r"[ \t*_`\"'“”‘’]*")
_VALUE_DECOR_RE = re.compile(r"[ \t*_`\"'“”‘’\[]*")
_ASIDE_RE = re.compile(r"\([^()\n]{0,60}\)")
_SCORE_WORD_RE = re.compile(r"(?:score|value|rating)(?![A-Za-z0-9_])", re.IGNORECASE)
_SEPARATORS = ":=：|"


def after_separator(text: str, pos: int) -> int | None:
    """Where the value of a label ending at ``pos`` starts, or None when no separator follows."""
    pos = _DECOR_RE.match(text, pos).end()  # type: ignore[union-attr]  # a * pattern always matches
    aside = _ASIDE_RE.match(text, pos)
    if aside is not None:
        pos = _DECOR_RE.match(text, aside.end()).end()  # type: ignore[union-attr]
    word = _SCORE_WORD_RE.match(text, pos)
    if word is not None:
        pos = _DECOR_RE.match(text, word.end()).end()  # type: ignore[union-attr]
    if pos >= len(text) or text[pos] not in _SEPARATORS:
        return None
    return _VALUE_DECOR_RE.match(text, pos + 1).end()  # type: ignore[union-attr]


# Values of scores: a number, optionally "/ n" or "out of n"; or a yes/no word. A number followed
# by "or 1", "to 5", "-5", "|1" restates the scale; "<...>" and "[...]" placeholders echo a template.
_NUMBER_RE = re.compile(r"[-+]?\d{1,6}(?:\.\d{1,6})?(?![\d.]?\d)")
_FRACTION_RE = re.compile(r"[ \t]{0,3}(?:/|out[ \t]of)[ \t]{0,3}(\d{1,6}(?:\.\d{1,6})?)", re.IGNORECASE)
_WORD_RE = re.compile(r"[A-Za-z]{1,12}(?![A-Za-z0-9_])")
_SCALE_RE = re.compile(
    r"[\]*_`\"' \t]{0,6}(?:or|to)[ \t]{1,3}[\[(*_`\"']{0,3}[-+]?(?:\d|yes\b|no\b|true\b|false\b)"
    r"|[ \t]?[-–—][ \t]?\d|\|\d",
    re.IGNORECASE,
)
SCORE_WORDS = ("yes", "no", "true", "false")


def read_score(text: str, pos: int) -> tuple[str, int] | None:
    """A score value at ``pos`` (``"1"``, ``"4/5"``, ``"4 out of 5"``, ``"yes"``), or None.

    None also for a restated scale (``0 or 1``, ``1 to 5``, ``1-5``), a template placeholder
    (``<0 or 1>``) and words that are not scores (``AC: The answer ...``).
    """
    number = _NUMBER_RE.match(text, pos)
    if number is not None:
        end = number.end()
        if end < len(text) and (text[end].isalpha() or text[end] == "_"):
            return None  # "1st", "3D"
        fraction = _FRACTION_RE.match(text, end)
        if fraction is not None:
            end = fraction.end()
        if _SCALE_RE.match(text, end) is not None:
            return None
        return text[pos:end], end
    word = _WORD_RE.match(text, pos)
    if word is not None and word.group(0).casefold() in SCORE_WORDS:
        if _SCALE_RE.match(text, word.end()) is not None:
            return None
        return word.group(0), word.end()
    return None


MAX_LABELS = 2000
"""Only a reply's last this many labels are read: the verdict is at its end, and this bounds the
work on a pathological reply that repeats a label a hundred thousand times."""


def scan(
    text: str,
    labels: Labels,
    canon: Callable[[str], str | None],
    read: ValueReader,
    accept: Callable[[str, int], bool] | None = None,
    folded: str | None = None,
) -> list[Statement]:
    """Every statement ``label <separator> value`` in ``text``, in order, not overlapping.

    ``accept(text, start)``: whether a label found at ``start`` is one (e.g. not after a foreign
    qualifier). ``folded``: ``fold(text)``, when the caller has it already.
    """
    out: list[Statement] = []
    taken = 0
    found = labels.folded.finditer(fold(text) if folded is None else folded)
    for match in deque(found, maxlen=MAX_LABELS):
        if match.start() < taken or (accept is not None and not accept(text, match.start())):
            continue
        name = canon(text[match.start() : match.end()])
        if name is None:
            continue
        start = after_separator(text, match.end())
        if start is None:
            continue
        value = read(text, start)
        if value is None:
            continue
        raw, end = value
        out.append(Statement(name, match.start(), end, raw, start))
        taken = end
    return out


_CELL_DECOR = " \t*_`\"'"


MAX_CELLS = 32
"""A table row's first this many cells are read (a verdict table has a handful of columns)."""
_NOT_RULE_RE = re.compile(r"[^-:|\s]")
_RULE_GAP_RE = re.compile(r"[-:] *[^\S ]\s*[-:]")
"""Whitespace other than spaces between the dashes of one cell (``-\t-``): not a rule cell."""


def _rule_row(cells: list[str]) -> bool:
    """Every cell is blank or dashes, colons and spaces (the ``|---|:---:|`` line under a header)."""
    joined = "|".join(cells)  # a cell holds no "|", so a match cannot span two cells
    return _NOT_RULE_RE.search(joined) is None and _RULE_GAP_RE.search(joined) is None


def table_statements(
    text: str, labels: Labels, canon: Callable[[str], str | None], read: ValueReader
) -> list[Statement]:
    """Statements of markdown tables laid out horizontally: a header row of labels, a row of values.

    ``| AC | EF | CCS |`` / ``|---|---|---|`` / ``| 1 | 0 | 0 |`` gives AC 1, EF 0, CCS 0. Rows
    laid out vertically (``| AC | 1 |``) are ordinary statements with ``|`` as the separator.
    Tables are read in the reply's last ``MAX_LINES`` lines, in each row's first ``MAX_CELLS``
    cells; the last ``MAX_LABELS`` statements are kept.
    """
    out: list[Statement] = []
    header: dict[int, str] | None = None
    offset = last_lines_start(text)
    for line in text[offset:].splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        cells = stripped.strip("|").split("|", MAX_CELLS)[:MAX_CELLS]
        if header is not None and _rule_row(cells):
            continue  # the |---| line under the header
        names = {}
        for index, cell in enumerate(cells):
            label = labels.anycase.fullmatch(cell.strip(_CELL_DECOR))
            if label is not None and canon(label.group(0)) is not None:
                names[index] = canon(label.group(0))
        if len(names) >= 2:
            header = names  # type: ignore[assignment]
            continue
        if header is None:
            continue
        column_start = start + line.index("|") + 1
        for index, cell in enumerate(cells):
            if index in header:
                value = read(cell.strip(_CELL_DECOR) + " ", 0)
                if value is not None:
                    out.append(Statement(header[index], column_start, column_start + len(cell), value[0]))
            column_start += len(cell) + 1
        header = None
    return out[-MAX_LABELS:]


def mark_enclosed(text: str, statements: Sequence[Statement]) -> list[Statement]:
    """Flag statements whose label and value both sit inside quotes or parentheses on their line.

    One forward pass: quotation (straight ``"`` pairs, typographic ``“ ”``) and parenthesis depth
    are tracked per line; ``"AC": 1`` is not enclosed (the quote closes before the value).
    """
    out: list[Statement] = []
    cursor = 0
    straight = curly = paren = 0

    def advance(to: int) -> bool:
        nonlocal cursor, straight, curly, paren
        segment = text[cursor:to]
        newline = segment.rfind("\n")
        if newline != -1:
            straight = curly = paren = 0
            segment = segment[newline + 1 :]
        straight = (straight + segment.count('"')) % 2
        curly = max(0, curly + segment.count("“") - segment.count("”"))
        paren = max(0, paren + segment.count("(") - segment.count(")"))
        cursor = max(cursor, to)
        return bool(straight or curly or paren)

    for statement in sorted(statements, key=lambda s: s.start):
        if statement.start < cursor:
            out.append(statement)
            continue
        at_label = advance(statement.start)
        at_value = advance(max(statement.value_start, statement.start))
        if at_label and at_value:
            statement = replace(statement, enclosed=True)
        out.append(statement)
    return out


@dataclass(frozen=True)
class Block:
    """Statements stated together, by canonical name; ``start``/``end`` span them in the reply."""

    fields: dict[str, Statement]
    start: int
    end: int

    def has(self, required: Iterable[str]) -> bool:
        return all(name in self.fields for name in required)


def blocks(statements: Iterable[Statement]) -> list[Block]:
    """Consecutive statements grouped into blocks; a block ends where one of its labels repeats."""
    out: list[Block] = []
    current: dict[str, Statement] = {}
    for statement in statements:
        if statement.name in current:
            out.append(_block(current))
            current = {}
        current[statement.name] = statement
    if current:
        out.append(_block(current))
    return out


def _block(fields: dict[str, Statement]) -> Block:
    return Block(dict(fields), min(s.start for s in fields.values()), max(s.end for s in fields.values()))


_REFUSAL_RE = re.compile(
    r"\b(?:I['’]?m sorry|I am sorry|I apologi[sz]e|I (?:can['’]?t|cannot|can not|won['’]?t|am unable"
    r"|am not able)|I['’]m (?:unable|not able)|unable to (?:help|assist|comply)|as an AI\b)",
    re.IGNORECASE,
)


def looks_refused(text: str) -> bool:
    """The reply opens by declining (``I'm sorry, I can't help with that``): judged on its start."""
    return _REFUSAL_RE.search(text[:300]) is not None


def line_before(text: str, pos: int, limit: int = 200) -> str:
    """The text on ``pos``'s line before it, or (when that is blank) the previous non-blank line."""
    window = text[max(0, pos - limit) : pos]
    head = window.rsplit("\n", 1)[-1]
    if head.strip():
        return head
    lines = [line for line in window.split("\n")[:-1] if line.strip()]
    return lines[-1] if lines else ""


__all__ = [
    "MAX_CELLS",
    "MAX_LABELS",
    "MAX_LINES",
    "Block",
    "Labels",
    "Statement",
    "after_separator",
    "blocks",
    "first_lines_end",
    "fold",
    "last_lines_start",
    "line_before",
    "looks_refused",
    "mark_enclosed",
    "read_score",
    "scan",
    "table_statements",
    "word_alternation",
]
