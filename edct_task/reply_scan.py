"""Linear-time scanning of model replies: labelled values, quotation, verdict blocks, refusals.

The building blocks of ``edct_task.parsing``. A *statement* is a label, a separator and a value
(``AC: 1``, ``**Score**: 4/5``, ``| EF | 0 |``, ``Type: MODIFY``). Statements are grouped into
*blocks*: a block ends where a label it already holds comes again, so ``AC: 1 EF: 1 ... EF: 0``
is the block ``{AC: 1, EF: 1}`` followed by the partial block ``{EF: 0}``.

Linear time, by construction: labels are found by a regex of plain alternatives; everything after
a label is read by hand or by patterns whose unbounded runs are single character classes that
never sit next to another run over the same characters; every scan moves forward only. No reply,
however padded with spaces, tabs, brackets or tags, can make a pattern backtrack over itself.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

ValueReader = Callable[[str, int], "tuple[str, int] | None"]
"""``(text, position) -> (raw value, end)`` of the value starting at ``position``, or None."""


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
    labels: re.Pattern[str],
    canon: Callable[[str], str | None],
    read: ValueReader,
    accept: Callable[[str, int], bool] | None = None,
) -> list[Statement]:
    """Every statement ``label <separator> value`` in ``text``, in order, not overlapping.

    ``accept(text, start)``: whether a label found at ``start`` is one (e.g. not after a foreign
    qualifier).
    """
    out: list[Statement] = []
    taken = 0
    for match in deque(labels.finditer(text), maxlen=MAX_LABELS):
        if match.start() < taken or (accept is not None and not accept(text, match.start())):
            continue
        name = canon(match.group(0))
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


def table_statements(
    text: str, labels: re.Pattern[str], canon: Callable[[str], str | None], read: ValueReader
) -> list[Statement]:
    """Statements of markdown tables laid out horizontally: a header row of labels, a row of values.

    ``| AC | EF | CCS |`` / ``|---|---|---|`` / ``| 1 | 0 | 0 |`` gives AC 1, EF 0, CCS 0. Rows
    laid out vertically (``| AC | 1 |``) are ordinary statements with ``|`` as the separator.
    """
    out: list[Statement] = []
    header: dict[int, str] | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        cells = stripped.strip("|").split("|")
        if header is not None and all(set(c.strip()) <= set("-: ") for c in cells):
            continue  # the |---| line under the header
        names = {}
        for index, cell in enumerate(cells):
            label = labels.fullmatch(cell.strip(_CELL_DECOR))
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
    return out


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
    "Block",
    "Statement",
    "after_separator",
    "blocks",
    "line_before",
    "looks_refused",
    "mark_enclosed",
    "read_score",
    "scan",
    "table_statements",
]
