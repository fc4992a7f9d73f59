"""Read the replies of the extractor, editor-instruction writer, edit parser and judges.

Pure functions, no I/O, linear time in the reply's length (``edct_task.reply_scan``), with the
steps taken in Python bounded (``MAX_JSON_TOKENS``, ``MAX_LIST_ITEMS``, ``MAX_WRAPPINGS`` here,
``MAX_LABELS``, ``MAX_LINES``, ``MAX_CELLS`` there): a megabyte of adversarial text parses in a
fraction of a second, and a reply of ordinary length is read whole. Every parser
takes the reply and the ``finish_reason`` the backend reported, first calls :func:`strip_thinking`,
then returns either ``Parsed(value)`` or ``Unparsed(reason, kind)``: a reply that cannot be read is
*unscored* with a specific reason (left out of the denominator and counted), never scored 0. No
parser raises on any text.

The rules (the README's "How replies are read" says the same)
--------------------------------------------------------------
* **The verdict is the last complete block.** A block is a run of labelled values stated together
  (``AC: 1`` ``EF: 0``; a JSON object; a list of concepts; ``Type:`` with ``Target:``); it ends
  where one of its labels comes again. The verdict is the last block that holds every required
  field (AC and EF; the score; type and target). Text after it, including a partial block
  ("I would have given EF: 0"), is commentary and never overrides it. A list of concepts under a
  commentary heading (``Notes:``, ``Excluded:``, ``Reasoning:`` ...) is not a block.
* **Quotes and asides.** Values inside quotation marks or parentheses count only when the reply
  has no complete block outside them.
* **Scales and template echoes never count**: ``0 or 1``, ``1 to 5``, ``1-5``, ``[0 or 1]``,
  ``<0 or 1>``, ``"..."``.
* **Cut replies are unscored, reason ``truncated``**: ``finish_reason == "length"``, a reply that
  ends inside its reasoning, or one without a complete block when the backend did not say why it
  ended. A reply that declines (``I'm sorry, I can't ...``, ``finish_reason == "content_filter"``)
  is ``refused``; one that ended normally but cannot be read is ``malformed``.
* **Formats read**: JSON (code fences and chatter around it, single quotes, trailing commas,
  typographic quotes), markdown (bold, headers, bullets, tables either way round), bracketed
  values (``PCS: [1]``), ``AC``/``EF`` or the paper's older ``PCS``/``NCC``, the paper's graded
  block (``<Final Scores> CCS: 4 </Final Scores>``, ``Final Scores: 3``), unquoted concept lists
  (``[red light, pedestrian]``), ``Concept 1:`` lines, one-line instruction chains,
  ``(MODIFY, traffic light)``, ``Type: MODIFY, Target: car``. A score named by another word
  (``Confidence score: 0.9``) is not the verdict.
* **Binary values** are ``0``/``1``, ``0.0``/``1.0``, ``1/1``, ``0/1`` and ``yes``/``no``/
  ``true``/``false``; any other number in the verdict (``2``, ``0.5``) makes the reply malformed:
  we do not round. ``CCS`` is always recomputed as ``ac * ef``; a disagreeing model CCS and a score
  stated elsewhere with another value are recorded in ``note``.
* **Graded scores** must be a whole number 1..5 (``4``, ``4.0``, ``4/5``, ``4 out of 5``).
* **Instructions**: a missing, empty or placeholder ``change`` in any edit makes the whole reply
  malformed, because dropping that edit would silently shift the chain. Fewer edits than asked is
  *parsed* (the caller compares lengths); more are cut to the first ``n``.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, Union

from edct_task import reply_scan
from edct_task.core.records import EditInstruction
from edct_task.reply_scan import Block, Statement
from verification.edit_parsing import EditTarget, edit_type_from_word

UnscoredKind = Literal["truncated", "malformed", "refused"]
"""Why a reply is unscored, as a category (the engine adds ``transport`` for failed calls)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """A reply that was read successfully."""

    value: T
    """What the reply says, as a typed value."""


@dataclass(frozen=True)
class Unparsed:
    """A reply that could not be read; the item it belongs to is unscored, not zero."""

    reason: str
    """Why, in words a person reading the run log understands (``"AC score missing"``)."""
    kind: UnscoredKind = "malformed"
    """``truncated`` (cut at the token limit, or no complete verdict and no word on why the reply
    ended), ``refused`` (the model declined) or ``malformed`` (it ended normally but cannot be read)."""


ParseResult = Union[Parsed[T], Unparsed]  # noqa: UP007 - a generic alias needs typing.Union on 3.10
"""``Parsed[T] | Unparsed``: the return type of every parser."""


@dataclass(frozen=True)
class BinaryJudgement:
    """The binary judge's verdict for one chain step: AC_j, EF_j and CCS_j = AC_j · EF_j."""

    ac: int
    """Answer consistency, 0 or 1."""
    ef: int
    """Explanation faithfulness, 0 or 1."""
    ccs: int
    """Recomputed as ``ac * ef`` whatever the model wrote."""
    ac_reason: str
    """The judge's one-line reason for AC ("" when it gave none)."""
    ef_reason: str
    """The judge's one-line reason for EF ("" when it gave none)."""
    note: str
    """Parser remarks for the log: a model CCS that disagreed, a restated score ... ("" if none)."""


@dataclass(frozen=True)
class GradedJudgement:
    """The graded judge's verdict for one chain step: a holistic score s_j in 1..5."""

    score: int
    """Holistic score, 1..5."""
    normalised: float
    """``(score - 1) / 4``, in [0, 1]."""
    reason: str
    """The judge's one-line reason ("" when it gave none)."""


# --------------------------------------------------------------------------------------------
# Thinking / reasoning removal
# --------------------------------------------------------------------------------------------

# Tag pairs of reasoning blocks, as regex fragments: (a word both tags hold, first character,
# rest of the opening tag, rest of the closing tag). Each pattern starts with its literal first
# character, so the regex engine skips to the next one at C speed instead of trying every position
# of the reply; and a reply without the word (in any case) is not searched for the tags at all.
_THINK_TAGS: tuple[tuple[str, str, str, str], ...] = (
    ("think>", "<", r"think>", r"/think>"),
    ("thinking>", "<", r"thinking>", r"/thinking>"),
    ("reasoning>", "<", r"reasoning>", r"/reasoning>"),
    ("reflection>", "<", r"reflection>", r"/reflection>"),
    ("think]", r"\[", r"THINK\]", r"/THINK\]"),
    ("think▷", "◁", r"think▷", r"/think▷"),
    ("_of_thought|>", "<", r"\|begin_of_thought\|>", r"\|end_of_thought\|>"),
)
_THINK_TAG_RES = tuple(
    (word, re.compile(rf"{first}(?:(?P<open>{open_rest})|(?P<close>{close_rest}))", re.IGNORECASE))
    for word, first, open_rest, close_rest in _THINK_TAGS
)
_HARMONY_FINAL_RE = re.compile(r"<\|channel\|>\s*final\s*(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>")
_HARMONY_ANALYSIS_RE = re.compile(
    r"<\|channel\|>\s*(?:analysis|commentary)\b.*?(?:<\|end\|>|(?=<\|start\|>)|(?=<\|channel\|>)|\Z)",
    re.DOTALL,
)
_SPECIAL_TOKEN_RE = re.compile(r"<\|[a-z_]{1,30}\|>")
_DECODED_HARMONY_RE = re.compile(r"\A\s*analysis.*assistantfinal", re.DOTALL)


def _strip_thinking(text: str) -> tuple[str, bool]:
    """Strip reasoning; also say whether an unclosed opening tag swallowed the rest."""
    truncated = False
    # Reasoning channels (gpt-oss "harmony" format): keep the final channel only.
    finals = list(_HARMONY_FINAL_RE.finditer(text))
    text = text[finals[-1].end() :] if finals else _HARMONY_ANALYSIS_RE.sub("", text)
    # Same format decoded with its special tokens dropped: "analysis...assistantfinal<answer>".
    decoded = _DECODED_HARMONY_RE.match(text)
    if decoded is not None:
        text = text[decoded.end() :]
    text = _SPECIAL_TOKEN_RE.sub("", text)

    folded = reply_scan.fold(text)  # a tag's word in any case is its word in this
    for word, tags in _THINK_TAG_RES:
        if word not in folded:
            continue
        text, cut = _remove_blocks(text, tags)
        truncated = truncated or cut
        folded = reply_scan.fold(text)  # removing blocks may join the halves of a word
    return text.strip(), truncated


def _remove_blocks(text: str, tags: re.Pattern[str]) -> tuple[str, bool]:
    """Remove one kind of reasoning block in a single pass (rules 2-4 of ``strip_thinking``)."""
    kept: list[str] = []
    pos = 0
    block_start: int | None = None
    for tag in tags.finditer(text):
        if tag.group("open") is not None:
            if block_start is None:
                kept.append(text[pos : tag.start()])
                block_start = tag.start()
        elif block_start is not None:  # closes the open block
            block_start, pos = None, tag.end()
        else:  # orphan close: the reply started inside the reasoning; drop everything so far
            kept, pos = [], tag.end()
    if block_start is not None:  # never closed: generation stopped inside the reasoning
        return "".join(kept), True
    kept.append(text[pos:])
    return "".join(kept), False


def strip_thinking(text: str) -> str:
    """Remove reasoning ("thinking") from a model reply, keeping the answer.

    Rules, applied in this order:

    1. Reasoning channels (gpt-oss harmony format): when a ``<|channel|>final<|message|>`` header
       is present only the text after the last one is kept; otherwise ``<|channel|>analysis`` /
       ``commentary`` segments are dropped up to their ``<|end|>``. The same format decoded
       without special tokens (``"analysis...assistantfinal<answer>"``) is cut after
       ``assistantfinal``. Remaining ``<|...|>`` tokens are removed.
    2. For each tag pair ``<think>…</think>``, ``<thinking>…</thinking>``,
       ``<reasoning>…</reasoning>``, ``<reflection>…</reflection>``, ``[THINK]…[/THINK]``,
       ``◁think▷…◁/think▷`` (case-insensitive): closed blocks are removed wherever they are.
    3. An orphan closing tag (Qwen3 / DeepSeek-R1 templates put the opening ``<think>`` in the
       prompt, so the reply starts inside the reasoning) → everything up to and including the
       last orphan closing tag is dropped.
    4. An opening tag that is never closed (generation stopped inside the reasoning, e.g. at the
       token limit) → everything from it to the end is dropped: the text after it is reasoning,
       and a score found in half-finished reasoning must not be read as the verdict. Such a reply
       usually becomes empty and parsers then report it as truncated.
    5. Surrounding whitespace is stripped.

    Parameters
    ----------
    text : str
        The raw reply.

    Returns
    -------
    str
        The reply without its reasoning.
    """
    return _strip_thinking(text)[0]


def _prepare(text: str, finish_reason: str | None = None) -> tuple[str, Unparsed | None]:
    """Strip thinking; an Unparsed for a cut or declined reply, or when nothing is left."""
    if not isinstance(text, str):
        return "", Unparsed(f"reply is not text but {type(text).__name__}")
    if finish_reason == "length":
        return "", Unparsed("reply cut at the token limit (finish_reason 'length')", "truncated")
    if finish_reason == "content_filter":
        return "", Unparsed("the server withheld the reply (finish_reason 'content_filter')", "refused")
    stripped, truncated = _strip_thinking(text)
    if stripped:
        return stripped, None
    if truncated:
        return "", Unparsed(
            "reply ends inside an unclosed thinking block (truncated reasoning?)", "truncated"
        )
    if text.strip():
        return "", _missing("", finish_reason, "reply is empty after removing its thinking")
    return "", _missing("", finish_reason, "reply is empty")


def _missing(body: str, finish_reason: str | None, reason: str) -> Unparsed:
    """No complete verdict: refused when the reply declines, else truncated or malformed.

    Truncated when the backend did not say why the reply ended (it may have been cut short);
    malformed when it says the reply ended normally.
    """
    if body and reply_scan.looks_refused(body):
        first = body.strip().splitlines()[0][:80]
        return Unparsed(f"the model declined: {first!r}", "refused")
    return Unparsed(reason, "truncated" if finish_reason is None else "malformed")


# --------------------------------------------------------------------------------------------
# Lenient JSON
# --------------------------------------------------------------------------------------------

_NOT_LETTERS_RE = re.compile(r"[^a-z]")


def _letters(text: str) -> str:
    """``text`` case-folded, every character but a-z dropped (``AC_reason`` → ``acreason``)."""
    folded = text.casefold()
    return folded if folded.isascii() and folded.isalpha() else _NOT_LETTERS_RE.sub("", folded)


_TRAILING_COMMA_RE = re.compile(r",\s*([\]}])")
_TYPOGRAPHIC_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    text: str


MAX_JSON_SPANS = 2000
"""Only a reply's last this many bracketed spans are read as JSON (the verdict is at the end)."""
MAX_JSON_TOKENS = 10_000
"""The bracket scan reads a reply's last this many tokens (a run of openers, a run of closers, a
quote), as if the reply started there: the verdict is at the end, and a token can cost a step in
Python, so this bounds the work on a reply of a megabyte of ``[}`` or ``["`` to a few hundredths
of a second. A reply with fewer (every reply a model writes) is read whole."""

_TOKEN_RE = re.compile(r"""[\[\]{}"'](?:(?<=[\[{])[\[{]*|(?<=[\]}])[\]}]*)?""")
"""A run of openers, a run of closers, or a quote; written to start with a character class, which
the regex engine skips to at C speed (an alternation of runs it would try at every position)."""
_OPENER_RE = re.compile(r"[\[{]")
_FLAT_CONTENT = r"""(?:[^\[\]{}"']|"[^"\\]*"){0,256}"""
_FLAT_SPAN_RE = re.compile(rf"\[{_FLAT_CONTENT}\]|\{{{_FLAT_CONTENT}\}}")
"""A span without brackets inside, its strings double-quoted without escapes (``{"AC": 1}``), at
most 256 characters and strings long: read in one step. (One character or string per repeat, so
a failed match backtracks linearly; a bounded repeat, so the engine keeps little state.)"""
_STRING_BODY_RES = {
    '"': re.compile(r'[^"\\]*(?:\\.[^"\\]*){0,1000}', re.DOTALL),
    "'": re.compile(r"[^'\\\n]*(?:\\.[^'\\\n]*){0,1000}", re.DOTALL),
}
"""A string's body up to its closing quote, a thousand escapes at a time (bounded repeats, so
the regex engine keeps no state for a megabyte of escapes)."""
_OPEN_TO_CLOSE = str.maketrans("[{", "]}")


def _string_end(text: str, pos: int, quote: str) -> int:
    """Where the unescaped ``quote`` (in a single-quoted string also a newline) that ends a string
    whose body starts at ``pos`` is; -1 when the reply ends first."""
    body = _STRING_BODY_RES[quote]
    while True:
        pos = body.match(text, pos).end()  # type: ignore[union-attr]  # a * pattern always matches
        if pos >= len(text) or (text[pos] == "\\" and pos + 1 >= len(text)):
            return -1
        if text[pos] != "\\":
            return pos
        # a thousand escapes read: go on


def _common_prefix(a: str, b: str) -> int:
    """The length of the common prefix of ``a`` and ``b`` (a binary search of C comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _scan_start(text: str) -> int:
    """Where the bracket scan starts: 0, or the reply's ``MAX_JSON_TOKENS``-th token from its end."""
    if len(text) <= MAX_JSON_TOKENS:
        return 0
    backwards = _TOKEN_RE.finditer(text[::-1])  # runs read backwards are the same runs
    last = next(itertools.islice(backwards, MAX_JSON_TOKENS - 1, None), None)
    return 0 if last is None else len(text) - last.end()


def _json_spans(text: str) -> list[_Span]:
    """The last ``MAX_JSON_SPANS`` outermost balanced ``[...]`` / ``{...}`` spans, in order, in
    one linear pass over the last ``MAX_JSON_TOKENS`` tokens.

    Quotes are only tracked inside brackets; a single-quoted string cannot cross a line (a
    newline in one drops the brackets open so far, so an apostrophe in bracketed prose does not
    swallow the rest of the reply), and an apostrophe inside a word (player's) opens none; a
    backslash escapes the next character of a string; a closer that does not match the innermost
    opener drops the brackets open so far. A step reads a run of brackets or a whole string.
    """
    spans: deque[tuple[int, int]] = deque(maxlen=MAX_JSON_SPANS)
    n = len(text)
    pos = _scan_start(text)
    next_token, next_opener, flat = _TOKEN_RE.search, _OPENER_RE.search, _FLAT_SPAN_RE.match
    while (opener := next_opener(text, pos)) is not None:
        start = opener.start()
        if (whole := flat(text, start)) is not None:
            pos = whole.end()
            spans.append((start, pos))
            continue
        stack: list[str] = []  # the closers the open brackets expect, innermost last
        at, pos = start, n  # pos: where the scan goes on outside brackets, if it does
        while (token := next_token(text, at)) is not None:
            run, at = token.group(), token.end()
            if run[0] in "[{":
                if (whole := flat(text, at - 1)) is not None:  # the last opener's span, in one step
                    run, at = run[:-1], whole.end()
                stack.extend(run.translate(_OPEN_TO_CLOSE))
            elif run[0] in "]}":
                count = min(len(run), len(stack))
                innermost = "".join(reversed(stack[-count:]))
                if run[:count] != innermost:  # matches no open bracket: drop them all
                    pos = token.start() + _common_prefix(run, innermost) + 1
                    break
                del stack[-count:]
                if not stack:
                    pos = token.start() + count
                    spans.append((start, pos))
                    break
            elif run == '"' or not text[at - 2 : at - 1].isalnum():  # not in a word (player's)
                end = _string_end(text, at, run)
                if end < 0:
                    break  # the reply ends inside the string
                at = end + 1
                if text[end] == "\n":  # a single-quoted string cannot cross a line
                    pos = at
                    break
    return [_Span(start, end, text[start:end]) for start, end in spans]


def _load_lenient(span: str) -> tuple[bool, Any]:
    """Read one span as JSON, then leniently; ``(False, None)`` when nothing works."""
    trimmed = _TRAILING_COMMA_RE.sub(r"\1", span)
    typographic = trimmed.translate(_TYPOGRAPHIC_QUOTES)
    for attempt in dict.fromkeys((span, trimmed, typographic)):  # each distinct text once
        try:
            return True, json.loads(attempt, strict=False)
        except (ValueError, RecursionError):
            pass
    for attempt in dict.fromkeys((trimmed, typographic)):
        if "'" not in attempt and '"' not in attempt:
            break  # nothing a Python literal could add: no strings
        try:
            return True, ast.literal_eval(attempt)
        except Exception:  # literal_eval raises many kinds on arbitrary text
            pass
    return False, None


@dataclass(frozen=True)
class _JsonValue:
    start: int
    end: int
    value: Any


def _json_values(text: str, *, objects_only: bool = False) -> tuple[list[_JsonValue], list[_Span]]:
    """The readable JSON(-ish) values in the reply in order, and the spans that could not be read.

    ``objects_only``: skip spans that cannot hold an object (no ``:``), for verdicts.
    """
    values: list[_JsonValue] = []
    unread: list[_Span] = []
    loaded: dict[str, tuple[bool, Any]] = {}  # a span written as an earlier one reads the same
    for span in _json_spans(text):
        if objects_only and ":" not in span.text:
            continue
        if len(span.text) == 2:  # [] or {}
            values.append(_JsonValue(span.start, span.end, [] if span.text == "[]" else {}))
            continue
        if span.text not in loaded:
            loaded[span.text] = _load_lenient(span.text)
        ok, value = loaded[span.text]
        if ok:
            values.append(_JsonValue(span.start, span.end, value))
        else:
            unread.append(span)
    return values, unread


def _outside(statements: list[Statement], values: list[_JsonValue]) -> list[Statement]:
    """Statements not inside a JSON value (those are read as JSON)."""
    if not values:
        return statements
    out, index = [], 0
    for statement in statements:
        while index < len(values) and values[index].end <= statement.start:
            index += 1
        if index < len(values) and values[index].start <= statement.start < values[index].end:
            continue
        out.append(statement)
    return out


def _keyed(value: Any) -> dict[str, Any]:
    """A JSON object's items under letters-only, lower-case keys ({} for anything else)."""
    if not isinstance(value, dict):
        return {}
    return {_letters(str(key)): item for key, item in value.items()}


# --------------------------------------------------------------------------------------------
# Markdown helpers
# --------------------------------------------------------------------------------------------

_QUOTE_CHARS = "\"'“”‘’`"
_PLACEHOLDERS = {"", "...", "…", "etc", "tbd", "n/a"}


MAX_WRAPPINGS = 16
"""At most this many layers of emphasis and quotes are taken off an item (``**"red light"**,``
has three): each layer copies the item, so this keeps a megabyte of ``* *`` linear."""
MAX_LIST_ITEMS = 2000
"""A list's first this many items are read (a list of concepts holds a handful)."""


def _clean_item(text: str) -> str:
    """Drop markdown emphasis, wrapping quotes and trailing separators from one list item."""
    text = text.strip()
    for _ in range(MAX_WRAPPINGS):
        previous = text
        text = text.strip()
        for marker in ("**", "__", "*", "_", "`"):
            if len(text) > 2 * len(marker) and text.startswith(marker) and text.endswith(marker):
                text = text[len(marker) : -len(marker)]
        text = text.rstrip(",;.").strip()
        if len(text) >= 2 and text[0] in _QUOTE_CHARS and text[-1] in _QUOTE_CHARS:
            text = text[1:-1]
        if text == previous:
            break
    text = text.replace("**", "").replace("__", "")
    return " ".join(text.split())


def _is_placeholder(text: str) -> bool:
    """A template's blank (``...``, ``<object>``) rather than content."""
    value = text.strip().strip(_QUOTE_CHARS + " ").casefold()
    return value in _PLACEHOLDERS or (value.startswith("<") and value.endswith(">"))


def _dedupe(raw_items: Iterable[str], k: int, clean: Callable[[str], str] = _clean_item) -> list[str]:
    """The first ``k`` distinct items that are not placeholders, cleaned, among the first
    ``MAX_LIST_ITEMS``; an item written exactly as an earlier one is not cleaned again."""
    seen: set[str] = set()
    read: set[str] = set()
    out: list[str] = []
    for raw in itertools.islice(raw_items, MAX_LIST_ITEMS):
        if raw in read:
            continue  # kept or dropped already
        read.add(raw)
        item = clean(raw)
        key = " ".join(item.casefold().split())
        if not key or key in seen or _is_placeholder(item):
            continue
        seen.add(key)
        out.append(item)
        if len(out) == k:
            break
    return out


# --------------------------------------------------------------------------------------------
# Concepts
# --------------------------------------------------------------------------------------------

_CONCEPT_KEYS = ("concepts", "visualconcepts", "conceptlist", "items", "evidence")
_ITEM_KEYS = ("concept", "name", "text", "description")
_COMMENTARY = frozenset(
    [
        "note",
        "notes",
        "nb",
        "excluded",
        "exclusions",
        "exclude",
        "omitted",
        "rejected",
        "discarded",
        "dropped",
        "reasoning",
        "rationale",
        "justification",
        "explanation",
        "comments",
        "comment",
        "why",
        "alternatives",
        "alternative",
        "not",
        "also",
        "caveats",
    ]
)


def _concepts_from_json(value: Any) -> list[str] | None:
    if isinstance(value, dict):
        lowered = _keyed(value)
        for key in _CONCEPT_KEYS:
            if key in lowered:
                return _concepts_from_json(lowered[key])
        return None
    if not isinstance(value, list):
        return None
    out: list[str] = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            lowered = _keyed(item)
            found = next((lowered[key] for key in _ITEM_KEYS if isinstance(lowered.get(key), str)), None)
            if found is None:
                return None
            out.append(found)
        else:
            return None
    return out


_LIST_ITEM_RE = re.compile(  # (?=(x))\1: an atomic run (the line fails at once if no marker follows)
    r"(?=(?P<indent>[ \t]*))(?P=indent)"
    r"(?:[-*•+]|\(?\d{1,2}[.):]|\*\*\d{1,2}[.):]?\*\*|#{1,6}[ \t]?\d{1,2}[.):]?"
    r"|\**concept[ \t]?\d{1,2}[.):]\**)"
    r"[ \t]+(?P<item>\S.*)",
    re.IGNORECASE,
)
# "**Red light** – because ..." / "**Red light**: ..." → the bold part; "**Concept 1:** X" → X
_BOLD_HEAD_RE = re.compile(r"\*\*(?P<bold>[^*]{1,200})\*\*(?P<rest>.*)")
_LABEL_RE = re.compile(r"(?:concept|item)[ \t]?\d{0,2}[ \t]?[:.)-]?", re.IGNORECASE)


def _list_item_text(item: str) -> str:
    """One markdown list item as a concept (see ``parse_concepts`` for the bold-head rules)."""
    item = item.strip()
    head = _BOLD_HEAD_RE.fullmatch(item)
    if head is not None:
        bold, rest = head.group("bold").strip(), head.group("rest").strip()
        if _LABEL_RE.fullmatch(bold):
            return _clean_item(rest.lstrip(":-–— ")) if rest else ""
        if bold.endswith(":") or not rest or rest[0] in ":-–—(":
            return _clean_item(bold.rstrip(":"))
    for dash in (" – ", " — "):
        item = item.split(dash, 1)[0]
    return _clean_item(item)


def _list_concept(item: str) -> str:
    """A markdown list item as a concept, cleaned."""
    return _clean_item(_list_item_text(item))


@dataclass(frozen=True)
class _ListBlock:
    start: int
    items: list[str]


def _list_blocks(text: str) -> list[_ListBlock]:
    """Blocks of markdown list items (top level only); blank and indented lines do not end a block.
    Read in the reply's last ``MAX_LINES`` lines."""
    blocks: list[_ListBlock] = []
    current: list[str] = []
    start = 0
    indent: int | None = None
    offset = reply_scan.last_lines_start(text, newlines_only=True)
    for line in text[offset:].split("\n"):
        line_start, offset = offset, offset + len(line) + 1
        match = _LIST_ITEM_RE.fullmatch(line)
        if match is not None:
            width = len(match.group("indent").expandtabs(4))
            if indent is None or not current:
                indent, start = width, line_start
            if width <= indent:
                indent = width
                current.append(match.group("item"))
            continue
        if not line.strip() or (line[:1] in " \t" and current):
            continue
        if current:
            blocks.append(_ListBlock(start, current))
        current, indent = [], None
    if current:
        blocks.append(_ListBlock(start, current))
    return blocks


def _commentary(text: str, start: int) -> bool:
    """The block at ``start`` sits under a commentary heading (``Notes:``, ``Excluded:`` ...)."""
    label = reply_scan.line_before(text, start)
    words = re.findall(r"[A-Za-z]+", label[:80])
    return bool(words) and words[0].casefold() in _COMMENTARY


_IN_WORD_APOSTROPHE_RE = re.compile(r"['’](?:(?<=\w['’])(?=\w)|(?<=s['’])(?=[\s,]|$))")
"""``player's``, ``it’s``, ``players'``: an apostrophe inside a word, no quote."""


def _bare_list(text: str, span: _Span, previous_end: int, next_start: int) -> list[str] | None:
    """``[red traffic light, pedestrian]``: an unquoted list alone on its line (or after a label).
    Items may hold any punctuation but brackets and quotes; apostrophes inside words
    (``[tennis racket in the player's hand]``) are no quotes. ``previous_end``, ``next_start``:
    where the bracketed spans before and after it end and start (0 and ``len(text)`` if none), so
    that the text around each span is looked at once."""
    inner = span.text[1:-1]
    if span.text[0] != "[" or not inner.strip() or any(c in inner for c in '[]{}"\n“”‘`'):
        return None
    if ("'" in inner or "’" in inner) and any(c in _IN_WORD_APOSTROPHE_RE.sub("", inner) for c in "'’"):
        return None
    # the line before it (another span ends with a bracket: text), and after it
    line_start = text.rfind("\n", previous_end, span.start) + 1 or max(previous_end - 1, 0)
    before = text[line_start : span.start].strip(" \t*_#>")
    line_end = text.find("\n", span.end, next_start)
    after = text[span.end : next_start + 1 if line_end < 0 else line_end].strip(" \t*_.")
    if (before and not before.endswith(":")) or after:
        return None
    items = [_clean_item(item) for item in inner.split(",", MAX_LIST_ITEMS)[:MAX_LIST_ITEMS]]
    if not all(items) or any(len(item) > 120 for item in items):
        return None
    return items


def parse_concepts(text: str, k: int, *, finish_reason: str | None = None) -> ParseResult[list[str]]:
    """Read the extractor's list of concepts: the visual evidence the explanation cites, ranked, at most k.

    Accepted: a JSON array of strings (also inside code fences, with chatter around, single
    quotes, trailing commas, typographic quotes), an array of objects with a ``"concept"`` key, an
    object with a ``"concepts"`` key, an unquoted ``[a, b]`` on its own line, or a markdown list
    (``1.``, ``1)``, ``-``, ``*``, ``•``, ``**1.**``, ``Concept 1:``). The last list that is not
    under a commentary heading (``Notes:``, ``Excluded:`` ...) wins. In a list item ``**Red light**
    – why ...`` gives ``Red light`` and ``**Concept 1:** red light`` gives ``red light``. Items lose
    wrapping quotes, markdown emphasis and trailing ``, ; .``; empties, placeholders (``...``) and
    duplicates (case- and whitespace-insensitive; the first spelling is kept) are dropped; at most
    ``k`` are kept, in order.

    Parameters
    ----------
    text : str
        The extractor's reply.
    k : int
        The most concepts to keep (paper: 2); at least 1.
    finish_reason : str or None
        Why the reply ended, as the backend reported it (``"length"``: cut, so unscored).

    Returns
    -------
    Parsed[list[str]] or Unparsed
        One to ``k`` distinct concepts, or why none could be read.

    Raises
    ------
    ValueError
        When ``k < 1`` (a configuration error, not a reply problem).
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    body, problem = _prepare(text, finish_reason)
    if problem is not None:
        return problem
    values, unread = _json_values(body)
    candidates: list[tuple[int, list[str], Callable[[str], str]]] = []
    for value in values:
        found = _concepts_from_json(value.value)
        if found is not None and not _commentary(body, value.start):
            candidates.append((value.start, found, _clean_item))
    ends = [0, *(span.end for span in unread)]
    starts = [*(span.start for span in unread[1:]), len(body)]
    for span, previous_end, next_start in zip(unread, ends, starts, strict=False):
        bare = _bare_list(body, span, previous_end, next_start)
        if bare is not None and not _commentary(body, span.start):
            candidates.append((span.start, bare, _clean_item))
    latest = max((c[0] for c in candidates), default=-1)
    for block in _list_blocks(body):
        if block.start > latest and not _commentary(body, block.start):
            candidates.append((block.start, block.items, _list_concept))
    if not candidates:
        return _missing(body, finish_reason, "no JSON array or list found")
    _, items, clean = max(candidates, key=lambda c: c[0])
    concepts = _dedupe(items, k, clean)
    if not concepts:
        return Unparsed("concept list is empty")
    return Parsed(concepts)


# --------------------------------------------------------------------------------------------
# Edit instructions
# --------------------------------------------------------------------------------------------

_FIELD_ALIASES = {
    "concept": "concept",
    "concepts": "concept",
    "keep": "keep",
    "change": "change",
    "changes": "change",
    "how": "how",
    "constraints": "constraints",
    "constraint": "constraints",
}
_FIELDS = ("concept", "keep", "change", "how", "constraints")


def _field_name(key: object) -> str | None:
    return _FIELD_ALIASES.get(_letters(str(key)))


def _field_text(value: Any) -> str:
    """A JSON field as one line; the items of (nested) lists joined by ``"; "``, empty ones left out."""
    if not isinstance(value, (list, tuple)):
        return "" if value is None else " ".join(str(value).split())
    parts: list[str] = []
    nested = [iter(value)]  # without recursion: a list may be nested as deep as JSON allows
    while nested:
        item = next(nested[-1], _END)
        if item is _END:
            nested.pop()
        elif isinstance(item, (list, tuple)):
            nested.append(iter(item))
        elif text := _field_text(item):
            parts.append(text)
    return "; ".join(parts)


_END = object()


def _instruction_dicts(value: Any) -> list[dict[str, Any]] | None:
    """The list of edit objects inside one JSON value, or None when it holds none."""
    if isinstance(value, dict):
        fields = {_field_name(key) for key in value}
        if "change" in fields or "keep" in fields:
            return [value]
        for item in value.values():
            if isinstance(item, list):
                found = _instruction_dicts(item)
                if found is not None:
                    return found
        return None
    if (
        isinstance(value, list)
        and value
        and all(isinstance(item, dict) for item in value)
        and any(_field_name(key) in ("change", "keep") for item in value for key in item)
    ):
        return value
    return None


def _build_instructions(raw: list[dict[str, str]], n: int) -> ParseResult[list[EditInstruction]]:
    if not raw:
        return Unparsed("no edit instructions found")
    out: list[EditInstruction] = []
    for index, fields in enumerate(raw[:n], start=1):
        change = fields.get("change", "").strip()
        if not change:
            return Unparsed(f"edit {index} has no 'change'")
        if _is_placeholder(change):
            return Unparsed(f"edit {index} repeats the template's placeholder {change!r} as its 'change'")
        # a template blank left in another field ("constraints": "...") states nothing: empty
        values = {name: fields.get(name, "").strip() for name in _FIELDS}
        out.append(EditInstruction(**{k: "" if _is_placeholder(v) else v for k, v in values.items()}))
    return Parsed(out)


_LABELS = r"keep|changes?|how|constraints?|concept"
# The runs before the label are taken whole, as atomic groups would (``(?=(x*))\1``: a lookahead
# is never backtracked into): written as plain runs, ``[ \t>]*`` and ``[*_ \t]*`` share spaces, and
# a line of spaces without a label took time quadratic in its length to fail.
_LABEL_LINE_RE = re.compile(
    r"(?=(?P<r1>[ \t>]*))(?P=r1)(?:[-*•+](?=(?P<r2>[ \t]+))(?P=r2)|\d{1,2}[.)](?=(?P<r3>[ \t]+))(?P=r3))?"
    r"(?:#{1,6}[ \t]?)?(?=(?P<r4>[*_ \t]*))(?P=r4)"
    rf"(?P<label>{_LABELS})[ \t]?(?:\([^()\n]{{0,60}}\))?"
    r"(?=(?P<r5>[*_ \t]*))(?P=r5)[:：][*_]*"
    r"(?P<value>.*)",
    re.IGNORECASE,
)
_INLINE_LABELS = reply_scan.Labels(
    reply_scan.word_alternation(_LABELS.split("|"), "[a-z]") + r"(?=([*_ \t]*))\1[:：]"
)
_EDIT_HEADER_RE = re.compile(  # the leading run atomic: (?=(x))\1
    r"(?=([ \t>#*_-]*))\1(?:edit|instruction|step)[ \t]?(?:#|no\.?)?[ \t]?\d{1,2}\b(?P<rest>.*)",
    re.IGNORECASE,
)
_FOR_RE = re.compile(r"\bfor[ \t]+(?P<concept>.+)", re.IGNORECASE)


def _split_inline(line: str) -> list[str]:
    """``1. For [x], Keep: … Change: … How: …`` → a ``Concept:`` line and one line per label."""
    # the first MAX_LINES + 1 labels give the first MAX_LINES parts, all that is read
    found = _INLINE_LABELS.folded.finditer(reply_scan.fold(line))
    labels = list(itertools.islice(found, reply_scan.MAX_LINES + 1))
    if len(labels) < 2:
        return [line]
    head = line[: labels[0].start()]
    parts = [
        line[a.start() : b.start()].rstrip(" \t,;")
        for a, b in zip(labels, [*labels[1:], None], strict=False)
        if b
    ]
    parts.append(line[labels[-1].start() :])
    if _LABEL_LINE_RE.fullmatch(head.strip() + ":x") is None:  # "1. For [x]," / "Edit 1 (x):" heads
        concept = _FOR_RE.search(head)
        if concept is not None:
            name = concept.group("concept").strip(" \t,;:*_-.").strip("[]")
            if name:
                return [f"Concept: {name}", *parts]
        if _EDIT_HEADER_RE.fullmatch(head) is not None:
            return [head, *parts]
    return [head + parts[0], *parts[1:]] if head.strip() else parts


def _text_instructions(body: str) -> list[dict[str, str]]:
    """Labelled text form, split into edits.

    A new edit starts at an ``Edit N`` header or at a repeated label; in a reply without headers
    also at a label that goes back in the order concept, keep, change, how, constraints. Read in
    the reply's first ``MAX_LINES`` lines (a line holding several labels counts as one per label).
    """
    window = body[: reply_scan.first_lines_end(body)].splitlines()
    parts = (part for line in window for part in _split_inline(line))
    lines = list(itertools.islice(parts, reply_scan.MAX_LINES))
    by_order = not any(_EDIT_HEADER_RE.fullmatch(line) for line in lines)
    edits: list[dict[str, str]] = []
    current: dict[str, list[str]] = {}  # the field's value, line by line (joined once: linear)
    last_field: str | None = None
    for line in lines:
        label = _LABEL_LINE_RE.fullmatch(line)
        if label is not None:
            name = _FIELD_ALIASES[label.group("label").casefold()]
            backwards = by_order and any(_FIELDS.index(seen) > _FIELDS.index(name) for seen in current)
            if name in current or backwards:
                edits.append(_joined(current))
                current = {}
            current[name] = [_clean_value(label.group("value"))]
            last_field = name
            continue
        header = _EDIT_HEADER_RE.fullmatch(line)
        if header is not None:
            if current:
                edits.append(_joined(current))
            current, last_field = {}, None
            rest = header.group("rest").lstrip(" \t:*_.)-–—")
            inline = _LABEL_LINE_RE.fullmatch(rest)
            if inline is not None:  # "Edit 1: Keep: ..." on one line
                name = _FIELD_ALIASES[inline.group("label").casefold()]
                current[name] = [_clean_value(inline.group("value"))]
                last_field = name
                continue
            concept = header.group("rest").strip(" \t:*_().-–—")
            if concept[:8].casefold().startswith("concept"):
                concept = concept[7:].lstrip(" \t:")
            if concept:
                current["concept"] = [_clean_value(concept)]
            continue
        stripped = line.strip()
        if stripped.startswith("```") or not stripped:
            last_field = None if not stripped else last_field
            continue
        if last_field is not None:  # continuation of a multi-line value
            current[last_field].append(_clean_value(stripped))
    if current:
        edits.append(_joined(current))
    return _complete_chain([edit for edit in edits if set(edit) - {"concept"}])


def _joined(fields: dict[str, list[str]]) -> dict[str, str]:
    """An edit's fields, each value's lines joined by spaces (empty ones left out)."""
    return {name: " ".join(line for line in lines if line) for name, lines in fields.items()}


def _complete_chain(edits: list[dict[str, str]]) -> list[dict[str, str]]:
    """The chain without a cut-off last edit: one that stops before a field every earlier edit
    has (``Edit 2: Keep: … Change: Remove the pede`` after an ``Edit 1`` with How and Constraints)
    was cut mid-edit, so the chain ends at the last complete edit."""
    return edits[:-1] if cut_off(edits) else edits


def cut_off(edits: list[dict[str, str]]) -> bool:
    """The last edit lacks a field, after its own last one in the order concept, keep, change,
    how, constraints, that every earlier edit has (a reply ends where it was cut)."""
    if len(edits) < 2:
        return False
    shared = set.intersection(*(set(edit) for edit in edits[:-1]))
    last = max(_FIELDS.index(name) for name in edits[-1])
    return any(_FIELDS.index(name) > last for name in shared - set(edits[-1]))


def _clean_value(value: str) -> str:
    value = value.strip()
    if value.endswith(("**", "__")):
        value = value[:-2]
    return " ".join(value.strip().split())


def parse_instructions(
    text: str, n: int, *, finish_reason: str | None = None
) -> ParseResult[list[EditInstruction]]:
    """Read the chain of edit instructions: one per concept, each Keep / Change / How / Constraints.

    Accepted: a JSON array of objects (key names case-insensitive, ``constraint`` for
    ``constraints``; also one object, or an object wrapping the array under any key), or the
    labelled text form ``Edit 1:`` / ``Keep:`` / ``Change:`` / ``How:`` / ``Constraints:`` with
    markdown bold, headers and bullets, multi-line values, and all labels of an edit on one line
    (``1. For [x], Keep: … Change: … How: … Constraints: …``). In the text form a new edit starts
    at an ``Edit N`` (``Instruction N``, ``Step N``) header or when a label repeats (without
    headers, also when labels go back in the order concept/keep/change/how/constraints); text
    after the header number ("Edit 1 (red light):") becomes the concept. Missing ``concept``,
    ``keep``, ``how`` and ``constraints`` become ``""``, except that a last text edit stopping
    before a field every earlier edit has (``How:``, ``Constraints:``) was cut mid-edit and is
    dropped: the chain ends at the last complete edit. The last JSON array of edits wins. A field
    that repeats the template's blank (``"..."``, ``"<object>"``) says nothing: ``""`` (in
    ``change``: unparsed).

    Parameters
    ----------
    text : str
        The instruction writer's reply.
    n : int
        The number of edits asked for; more are cut to the first ``n``. At least 1.
    finish_reason : str or None
        Why the reply ended, as the backend reported it (``"length"``: cut, so unscored).

    Returns
    -------
    Parsed[list[EditInstruction]] or Unparsed
        One to ``n`` instructions, each with a non-empty ``change``; or why none could be read.
        Fewer than ``n`` is parsed: the caller decides what a short chain means.

    Raises
    ------
    ValueError
        When ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    body, problem = _prepare(text, finish_reason)
    if problem is not None:
        return problem
    values, _ = _json_values(body)
    found = [d for d in (_instruction_dicts(v.value) for v in values) if d is not None]
    if found:
        raw: list[dict[str, str]] = []
        for obj in found[-1][:n]:  # the first n edits are read
            fields: dict[str, str] = {}
            for key, value in obj.items():
                name = _field_name(key)
                if name is not None and name not in fields:
                    fields[name] = _field_text(value)
            raw.append(fields)
        return _build_instructions(raw, n)
    raw = _text_instructions(body)
    if not raw:
        return _missing(body, finish_reason, "no JSON array of edits or 'Keep:/Change:' lines found")
    return _build_instructions(raw, n)


# --------------------------------------------------------------------------------------------
# Edit target (verification step 1)
# --------------------------------------------------------------------------------------------

_TYPE_KEYS = ("type", "edittype", "edit", "kind", "operation", "action")
_TARGET_KEYS = ("target", "object", "targetobject", "subject", "noun")
_TARGET_WORDS = (  # (?:edit[ _]?)?(?:type|kind|operation|action)|target[ _]?object|target|object
    "edit[ _]?(?:type|kind|operation|action)",
    *("type", "kind", "operation", "action"),
    *("target[ _]?object", "target", "object"),
)
_TARGET_LABELS = reply_scan.Labels(reply_scan.word_alternation(_TARGET_WORDS, "[a-z0-9_]") + "(?![a-z0-9_])")
_BARE_RE = re.compile(  # a whole line (MULTILINE ^ and $), its leading run atomic
    r"^(?=([ \t*_`\"'(]*))\1(?P<type>ADD|MODIFY|REMOVE)[ \t*_`\"']*[:,\-–—][ \t]*(?P<value>\S.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_LEADING_ARTICLE_RE = re.compile(r"(?:the|a|an)[ \t]+", re.IGNORECASE)


def _target_label(label: str) -> str:
    word = label.casefold()
    return "target" if word.startswith(("target", "object")) else "type"


def _target_value_reader(folded: str) -> reply_scan.ValueReader:
    """A reader of target values in the reply whose ``fold`` is ``folded``: the rest of the line,
    up to the next ``Type:``/``Target:`` label on it."""
    line_end = -1  # the end of the line last read, found once per line

    def read(text: str, pos: int) -> tuple[str, int] | None:
        nonlocal line_end
        if line_end < pos:
            line_end = text.find("\n", pos)
            line_end = len(text) if line_end == -1 else line_end
        end, search = line_end, pos
        while (label := _TARGET_LABELS.folded.search(folded, search, line_end)) is not None:
            if reply_scan.after_separator(text, label.end()) is not None:
                end = label.start()
                break
            search = label.end()
        value = text[pos:end]
        return (value, end) if value.strip(" \t,;|") else None

    return read


def _clean_target(value: str) -> str:
    value = _clean_item(value.strip().strip("{}[]()"))
    value = value.strip(_QUOTE_CHARS + " ").rstrip(")").strip()
    return _LEADING_ARTICLE_RE.sub("", value, count=1) if _LEADING_ARTICLE_RE.match(value) else value


def _text_targets(body: str, values: list[_JsonValue]) -> list[Block]:
    """``Type:``/``Target:`` statements outside JSON (a target ends where the next label starts)."""
    folded = reply_scan.fold(body)
    read = _target_value_reader(folded)
    found = _outside(reply_scan.scan(body, _TARGET_LABELS, _target_label, read, folded=folded), values)
    cut: list[Statement] = []
    for statement, following in zip(found, [*found[1:], None], strict=False):
        end = statement.end if following is None else min(statement.end, following.start)
        value = body[statement.value_start : end].rstrip(" \t,;|")
        if statement.name == "type":
            word = re.match(r"[A-Za-z]+", value.strip(" *_`\"'"))
            if word is None or " or " in value.casefold():  # '"ADD" or "MODIFY"': the template
                continue
            value = word.group(0)
        elif _is_placeholder(value):
            continue
        cut.append(Statement(statement.name, statement.start, end, value, statement.value_start))
    return reply_scan.blocks(reply_scan.mark_enclosed(body, cut))


def parse_edit_target(text: str, *, finish_reason: str | None = None) -> ParseResult[EditTarget]:
    """Read the edit-parser LLM's reply: kind of edit and target object (the first step of the
    paper's Algorithm 1).

    Accepted: a JSON object (``type``/``edit_type``/``kind`` and ``target``/``object``, any
    case), ``Type: ...`` / ``Target: ...`` lines or one line (``Type: MODIFY, Target: car``),
    markdown allowed, or a bare ``MODIFY: traffic light`` / ``(MODIFY, traffic light)``. The last
    complete pair wins. Type synonyms: insert/introduce → ADD; change/replace/recolour/alter/swap →
    MODIFY; delete/erase/eliminate → REMOVE (see ``verification.edit_parsing.edit_type_from_word``).
    The target loses quotes, markdown and a leading article.

    Parameters
    ----------
    text : str
        The edit parser's reply.
    finish_reason : str or None
        Why the reply ended, as the backend reported it (``"length"``: cut, so unscored).

    Returns
    -------
    Parsed[EditTarget] or Unparsed
    """
    body, problem = _prepare(text, finish_reason)
    if problem is not None:
        return problem
    values, _ = _json_values(body, objects_only=True)
    candidates: list[tuple[int, str, str]] = []
    partial_json = False
    for value in values:
        item = value.value[0] if isinstance(value.value, list) and len(value.value) == 1 else value.value
        lowered = _keyed(item)
        if not lowered:
            continue
        raw_type = next((lowered[key] for key in _TYPE_KEYS if isinstance(lowered.get(key), str)), None)
        raw_target = next((lowered[key] for key in _TARGET_KEYS if isinstance(lowered.get(key), str)), None)
        if raw_type is None or raw_target is None:
            partial_json = True
            continue
        candidates.append((value.start, raw_type, raw_target))
    statements_blocks = _text_targets(body, values)
    outside = [b for b in statements_blocks if not any(s.enclosed for s in b.fields.values())]
    for block in outside if any(b.has(("type", "target")) for b in outside) else statements_blocks:
        if block.has(("type", "target")):
            candidates.append((block.start, block.fields["type"].value, block.fields["target"].value))
    for bare in _BARE_RE.finditer(body):  # a line that is only "MODIFY: traffic light"
        candidates.append((bare.start(), bare.group("type"), bare.group("value")))
    if not candidates:
        types = any("type" in b.fields for b in statements_blocks)
        targets = any("target" in b.fields for b in statements_blocks)
        reason = "no edit type and target found"
        if partial_json:
            reason = "JSON object lacks 'type' or 'target'"
        elif types and not targets:
            reason = "edit target missing"
        elif targets and not types:
            reason = "edit type missing"
        return _missing(body, finish_reason, reason)
    _, raw_type, raw_target = max(candidates, key=lambda c: c[0])
    edit_type = edit_type_from_word(raw_type)
    if edit_type is None:
        return Unparsed(f"unknown edit type {raw_type!r}")
    target = _clean_target(raw_target)
    if not target or _is_placeholder(target):
        return Unparsed("edit target is empty")
    return Parsed(EditTarget(edit_type, target))


# --------------------------------------------------------------------------------------------
# Judgements
# --------------------------------------------------------------------------------------------

_BINARY_WORDS = ("ac", "ef", "ccs", "pcs", "ncc", "answer[ _-]consistency", "explanation[ _-]faithfulness")
_BINARY_LABELS = reply_scan.Labels(reply_scan.word_alternation(_BINARY_WORDS, "[a-z0-9_]") + "(?![a-z0-9_])")
_BINARY_NAMES = {
    "ac": "ac",
    "pcs": "ac",
    "answerconsistency": "ac",
    "ef": "ef",
    "ncc": "ef",
    "explanationfaithfulness": "ef",
    "ccs": "ccs",
}
_BINARY_REASON_KEYS = {
    "ac": ("acreason", "pcsreason", "answerconsistencyreason", "acreasoning"),
    "ef": ("efreason", "nccreason", "explanationfaithfulnessreason", "efreasoning"),
}
_REASON_LABELS = reply_scan.Labels(
    r"(?<![a-z0-9])(?:(?P<who>ac|ef|pcs|ncc|answer[ _-]consistency|explanation[ _-]faithfulness)[ _-]?)?"
    r"(?:reason|reasoning|justification|rationale)(?![a-z0-9])"
)
_REASON_WORD_RE = re.compile(r"(?:reason|reasoning|justification|rationale)(?![a-z0-9])")
"""The word every reason label ends with, searched for first (at C speed: it starts with a
literal), in a folded reply."""
_REASON_LABEL_REACH = 26
"""How far before its word a reason label can start (``explanation faithfulness reason``)."""
_REASON_SEPARATOR_RE = re.compile(r"[ \t*_]*[:=][ \t*_]*")


@functools.lru_cache(maxsize=256)
def _binary_label(label: str) -> str | None:
    return _BINARY_NAMES.get(_letters(label))


def _binary_value(raw: str) -> int | str:
    """0/1 from a raw value, or a message when it is not a binary score."""
    raw = raw.strip()
    word = raw.casefold()
    if word.isalpha():
        return {"yes": 1, "true": 1, "no": 0, "false": 0}.get(word, f"{raw!r} is not 0 or 1")
    parts = re.split(r"[ \t]{0,3}(?:/|out[ \t]of)[ \t]{0,3}", raw)
    try:
        numbers = [float(part) for part in parts]
    except ValueError:
        return f"{raw!r} is not 0 or 1"
    if len(numbers) == 2 and numbers[1] != 1:
        return f"{raw!r} is not 0 or 1"
    if numbers[0] in (0.0, 1.0):
        return int(numbers[0])
    return f"{raw!r} is not 0 or 1"


def _json_score_text(value: Any) -> str | None:
    """A JSON score as text (``1``, ``"1"``, ``true``, ``{"score": 1}``); None when there is none."""
    if isinstance(value, dict):
        lowered = _keyed(value)
        value = next((lowered[key] for key in ("score", "value", "rating") if key in lowered), None)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


@dataclass(frozen=True)
class _Verdict:
    scores: dict[str, str]
    reasons: dict[str, str]
    start: int
    end: int


def _json_verdicts(
    values: list[_JsonValue], names: dict[str, str], reasons: dict[str, tuple[str, ...]]
) -> list[_Verdict]:
    """Verdict objects among the reply's JSON values (one level of nesting is looked into)."""
    out = []
    for value in values:
        for candidate in (value.value, *(_keyed(value.value).values())):
            lowered = _keyed(candidate)
            scores = {}
            for key, item in lowered.items():
                name = names.get(key)
                text = _json_score_text(item)
                if name is not None and text is not None and name not in scores:
                    scores[name] = text
            if scores:
                found = {
                    name: _field_text(next((lowered[k] for k in keys if k in lowered), ""))
                    for name, keys in reasons.items()
                }
                for name, item in lowered.items():  # {"AC": {"score": 1, "reason": "..."}}
                    inner = _keyed(item)
                    if names.get(name) in reasons and "reason" in inner:
                        found[names[name]] = _field_text(inner["reason"])
                out.append(_Verdict(scores, found, value.start, value.end))
                break
    return out


_Canon = Callable[[str], "str | None"]
_Accept = Callable[[str, int], bool]


def _text_verdicts(
    body: str, labels: reply_scan.Labels, canon: _Canon, values: list[_JsonValue], accept: _Accept | None
) -> tuple[list[Block], list[Block]]:
    """Blocks of labelled scores outside JSON: (those outside quotes and asides, all)."""
    found = reply_scan.scan(body, labels, canon, reply_scan.read_score, accept)
    found += reply_scan.table_statements(body, labels, canon, reply_scan.read_score)
    found = reply_scan.mark_enclosed(body, _outside(sorted(found, key=lambda s: s.start), values))
    return reply_scan.blocks(s for s in found if not s.enclosed), reply_scan.blocks(found)


def _last_verdict(
    body: str,
    labels: reply_scan.Labels,
    canon: _Canon,
    required: tuple[str, ...],
    json_names: dict[str, str],
    json_reasons: dict[str, tuple[str, ...]],
    accept: _Accept | None = None,
) -> tuple[_Verdict | None, list[Block]]:
    """The last complete verdict (JSON or text); also the text blocks, for notes and reasons."""
    values, _ = _json_values(body, objects_only=True)
    verdicts = [
        v for v in _json_verdicts(values, json_names, json_reasons) if all(n in v.scores for n in required)
    ]
    outside, every = _text_verdicts(body, labels, canon, values, accept)
    for text_blocks in (outside, every):
        complete = [
            _Verdict({n: s.value for n, s in b.fields.items()}, {}, b.start, b.end)
            for b in text_blocks
            if b.has(required)
        ]
        if complete or verdicts:
            return max([*verdicts, *complete], key=lambda v: v.start), outside
    return None, every


def _reasons_before(body: str, end: int, whos: tuple[str, ...]) -> dict[str, str]:
    """For each of ``whos``, the value of the last ``<who> reason:`` line starting before ``end``
    ("" for the plain ``REASON:``), among the last ``MAX_LABELS`` reason words: read from the last.

    A label ends with its word (``reason``...) and starts at most ``_REASON_LABEL_REACH``
    characters before it, after the word before it: searched for there, it is the label a scan
    of the whole reply finds."""
    found: dict[str, str] = {}
    folded = reply_scan.fold(body[:end])
    words = deque(_REASON_WORD_RE.finditer(folded), maxlen=reply_scan.MAX_LABELS)
    for index in range(len(words) - 1, -1, -1):
        word = words[index]
        after_previous = words[index - 1].end() if index else 0
        lo = max(after_previous, word.start() - _REASON_LABEL_REACH)
        match = _REASON_LABELS.folded.search(folded, lo, word.end())
        if match is None:
            continue
        who = _binary_label(body[match.start("who") : match.end("who")]) or ""
        if who not in whos or who in found:
            continue
        separator = _REASON_SEPARATOR_RE.match(body, match.end())
        if separator is not None:
            line_end = body.find("\n", separator.end())
            found[who] = _clean_value(body[separator.end() : len(body) if line_end < 0 else line_end])
            if len(found) == len(whos):
                break
    return {who: found.get(who, "") for who in whos}


def parse_binary_judgement(text: str, *, finish_reason: str | None = None) -> ParseResult[BinaryJudgement]:
    """Read the binary judge's verdict: AC, EF (and CCS = AC · EF) with their reasons.

    Accepted forms of a score: ``AC: 1``, ``**AC**: 1``, ``**AC:** 1``, ``AC = 1``,
    ``AC score: 1``, ``- AC: 1/1``, ``AC (answer consistency): 1``, ``Answer consistency: 1``,
    ``PCS: [1]``, ``| AC | 1 |``, a table with ``AC | EF`` as its header, several on one line
    (``AC: 1 / EF: 0 / CCS: 0``) and JSON (``{"AC": 1, "EF": 0}``, any key case, ``ac_reason``
    keys). ``PCS`` = AC and ``NCC`` = EF. Values: see the module docstring. The last block with
    both AC and EF is the verdict. Reasons come from the verdict's JSON, else the last
    ``AC_REASON:`` / ``AC reason:`` (or ``PCS_REASON``) line before the verdict ends, likewise EF.

    Parameters
    ----------
    text : str
        The binary judge's reply.
    finish_reason : str or None
        Why the reply ended, as the backend reported it (``"length"``: cut, so unscored).

    Returns
    -------
    Parsed[BinaryJudgement] or Unparsed
        ``Unparsed`` when no block holds both AC and EF, or the verdict's value is not binary.
    """
    body, problem = _prepare(text, finish_reason)
    if problem is not None:
        return problem
    verdict, text_blocks = _last_verdict(
        body, _BINARY_LABELS, _binary_label, ("ac", "ef"), _BINARY_NAMES, _BINARY_REASON_KEYS
    )
    if verdict is None:
        stated = {name for block in text_blocks for name in block.fields}
        missing = "AC score missing" if "ac" not in stated else "EF score missing"
        return _missing(body, finish_reason, missing)
    scores = {name: _binary_value(verdict.scores[name]) for name in ("ac", "ef")}
    for name, value in scores.items():
        if isinstance(value, str):
            return Unparsed(f"{name.upper()} value {value}")
    ac, ef = int(scores["ac"]), int(scores["ef"])
    ccs = ac * ef
    notes: list[str] = []
    for name, value in (("ac", ac), ("ef", ef)):
        stated = {_binary_value(b.fields[name].value) for b in text_blocks if name in b.fields}
        if len(stated - {value}) > 0:
            notes.append(f"{name.upper()} stated with different values; the verdict's ({value}) was used")
    if "ccs" in verdict.scores:
        model_ccs = _binary_value(verdict.scores["ccs"])
        if isinstance(model_ccs, str):
            notes.append(f"model's CCS {model_ccs}; recomputed as AC·EF = {ccs}")
        elif model_ccs != ccs:
            notes.append(f"model's CCS {model_ccs} disagrees with AC·EF = {ccs}; recomputed")
    missing = tuple(who for who in ("ac", "ef") if not verdict.reasons.get(who))
    reasons = {**verdict.reasons, **_reasons_before(body, verdict.end, missing)}
    return Parsed(
        BinaryJudgement(
            ac=ac, ef=ef, ccs=ccs, ac_reason=reasons["ac"], ef_reason=reasons["ef"], note="; ".join(notes)
        )
    )


_GRADED_LABELS = reply_scan.Labels(
    reply_scan.word_alternation(("scores?", "rating", "grade", "ccs"), "[a-z0-9_]") + "(?![a-z0-9_])"
)
_GRADED_PREFIXES = frozenset(
    [
        "final",
        "overall",
        "graded",
        "holistic",
        "total",
        "my",
        "the",
        "your",
        "a",
        "judge",
        "judgement",
        "judgment",
        "ccs",
    ]
)
_GRADED_JSON_NAMES = {
    name: "score"
    for name in ("score", "rating", "grade", "ccs", "finalscore", "overallscore", "gradedscore", "ccsgraded")
}
_GRADED_REASON_KEYS = {"": ("reason", "reasoning", "justification", "rationale", "explanation")}


def _graded_label_ok(body: str, start: int) -> bool:
    """A score label is the verdict's unless a foreign word qualifies it (``Confidence score``)."""
    head = body[max(0, start - 24) : start].rsplit("\n", 1)[-1].rstrip(" \t*_#")
    word = re.search(r"[A-Za-z]+\Z", head)
    return word is None or word.group(0).casefold() in _GRADED_PREFIXES


def parse_graded_judgement(text: str, *, finish_reason: str | None = None) -> ParseResult[GradedJudgement]:
    """Read the graded judge's verdict: a holistic score 1..5 and its reason.

    Accepted: ``SCORE: 4``, ``Score: 4/5``, ``**Score:** 4``, ``**Score**: 4``, ``Final score:
    4``, ``Score = 4``, ``Rating: 4 out of 5``, ``4.0``, the paper's ``<Final Scores> CCS: 4
    </Final Scores>`` and ``Final Scores: 3``, JSON (``{"reason": ..., "score": 4}``). A score
    qualified by another word (``Confidence score: 0.9``) is not the verdict. The last score is the
    verdict. The reason is the JSON's ``reason``, else the last ``REASON:`` line before the verdict.

    Parameters
    ----------
    text : str
        The graded judge's reply.
    finish_reason : str or None
        Why the reply ended, as the backend reported it (``"length"``: cut, so unscored).

    Returns
    -------
    Parsed[GradedJudgement] or Unparsed
        ``Unparsed`` when no score is found or the verdict is not a whole number in 1..5 on a
        5-point scale.
    """
    body, problem = _prepare(text, finish_reason)
    if problem is not None:
        return problem
    verdict, _ = _last_verdict(
        body,
        _GRADED_LABELS,
        lambda label: "score",
        ("score",),
        _GRADED_JSON_NAMES,
        _GRADED_REASON_KEYS,
        accept=_graded_label_ok,
    )
    if verdict is None:
        return _missing(body, finish_reason, "score missing")
    raw = verdict.scores["score"].strip()
    parts = re.split(r"[ \t]{0,3}(?:/|out[ \t]of)[ \t]{0,3}", raw)
    try:
        numbers = [float(part) for part in parts]
    except ValueError:
        return Unparsed(f"score {raw!r} is not a number")
    if len(numbers) == 2 and numbers[1] != 5:
        return Unparsed(f"score {raw} is not on the 1–5 scale")
    value = numbers[0]
    if not 1 <= value <= 5:
        return Unparsed(f"score {parts[0]} outside 1–5")
    if not value.is_integer():
        return Unparsed(f"score {parts[0]} is not a whole number")
    score = int(value)
    reason = verdict.reasons.get("") or _reasons_before(body, verdict.end, ("",))[""]
    return Parsed(GradedJudgement(score=score, normalised=(score - 1) / 4, reason=reason))


__all__ = [
    "BinaryJudgement",
    "EditTarget",
    "GradedJudgement",
    "ParseResult",
    "Parsed",
    "Unparsed",
    "UnscoredKind",
    "parse_binary_judgement",
    "parse_concepts",
    "parse_edit_target",
    "parse_graded_judgement",
    "parse_instructions",
    "strip_thinking",
]
