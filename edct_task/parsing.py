"""Read the replies of the extractor, editor-instruction writer, edit parser and judges.

Pure functions, no I/O, linear time in the reply's length (``edct_task.reply_scan``). Every parser
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
import json
import re
from collections import deque
from collections.abc import Callable
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

# (open, close) tag pairs of reasoning blocks, as regex fragments.
_THINK_TAGS: tuple[tuple[str, str], ...] = (
    (r"<think>", r"</think>"),
    (r"<thinking>", r"</thinking>"),
    (r"<reasoning>", r"</reasoning>"),
    (r"<reflection>", r"</reflection>"),
    (r"\[THINK\]", r"\[/THINK\]"),
    (r"◁think▷", r"◁/think▷"),
    (r"<\|begin_of_thought\|>", r"<\|end_of_thought\|>"),
)
_THINK_TAG_RES = tuple(
    re.compile(rf"(?P<open>{open_tag})|(?P<close>{close_tag})", re.IGNORECASE)
    for open_tag, close_tag in _THINK_TAGS
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

    for tags in _THINK_TAG_RES:
        text, cut = _remove_blocks(text, tags)
        truncated = truncated or cut
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

_CLOSERS = {"[": "]", "{": "}"}
_TRAILING_COMMA_RE = re.compile(r",\s*([\]}])")
_TYPOGRAPHIC_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    text: str


MAX_JSON_SPANS = 2000
"""Only a reply's last this many bracketed spans are read as JSON (the verdict is at the end)."""
_JSON_SPECIAL_RE = re.compile(r"[\[\]{}\"'\\\n]")


def _json_spans(text: str) -> list[_Span]:
    """The last ``MAX_JSON_SPANS`` outermost balanced ``[...]`` / ``{...}`` spans, in order, in one
    linear pass.

    Quotes are only tracked inside brackets; a single-quoted string cannot cross a line (so an
    apostrophe in bracketed prose does not swallow the rest of the reply). Only brackets, quotes,
    backslashes and newlines are visited.
    """
    spans: deque[_Span] = deque(maxlen=MAX_JSON_SPANS)
    stack: list[str] = []
    start = 0
    quote = ""
    escaped_at = -1
    for match in _JSON_SPECIAL_RE.finditer(text):
        i, ch = match.start(), match.group()
        if quote:
            if escaped_at == i - 1:
                escaped_at = -1
                continue
            if ch == "\\":
                escaped_at = i
            elif ch == quote:
                quote = ""
            elif ch == "\n" and quote == "'":
                quote, stack = "", []
            continue
        if ch in _CLOSERS:
            if not stack:
                start = i
            stack.append(_CLOSERS[ch])
        elif stack:
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                continue  # an apostrophe inside a word (player's) opens no string
            if ch in "\"'":
                quote = ch
            elif ch in "]}":
                if ch != stack[-1]:
                    stack = []
                    continue
                stack.pop()
                if not stack:
                    spans.append(_Span(start, i + 1, text[start : i + 1]))
    return list(spans)


def _load_lenient(span: str) -> tuple[bool, Any]:
    """Read one span as JSON, then leniently; ``(False, None)`` when nothing works."""
    attempts = (span, _TRAILING_COMMA_RE.sub(r"\1", span))
    for attempt in (*attempts, attempts[1].translate(_TYPOGRAPHIC_QUOTES)):
        try:
            return True, json.loads(attempt, strict=False)
        except (ValueError, RecursionError):
            pass
    for attempt in (attempts[1], attempts[1].translate(_TYPOGRAPHIC_QUOTES)):
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
    for span in _json_spans(text):
        if objects_only and ":" not in span.text:
            continue
        if len(span.text) == 2:  # [] or {}
            values.append(_JsonValue(span.start, span.end, [] if span.text == "[]" else {}))
            continue
        ok, value = _load_lenient(span.text)
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
    return {re.sub(r"[^a-z]", "", str(key).casefold()): item for key, item in value.items()}


# --------------------------------------------------------------------------------------------
# Markdown helpers
# --------------------------------------------------------------------------------------------

_QUOTE_CHARS = "\"'“”‘’`"
_PLACEHOLDERS = {"", "...", "…", "etc", "tbd", "n/a"}


def _clean_item(text: str) -> str:
    """Drop markdown emphasis, wrapping quotes and trailing separators from one list item."""
    text = text.strip()
    previous = None
    while text != previous:
        previous = text
        text = text.strip()
        for marker in ("**", "__", "*", "_", "`"):
            if len(text) > 2 * len(marker) and text.startswith(marker) and text.endswith(marker):
                text = text[len(marker) : -len(marker)]
        text = text.rstrip(",;.").strip()
        if len(text) >= 2 and text[0] in _QUOTE_CHARS and text[-1] in _QUOTE_CHARS:
            text = text[1:-1]
    text = text.replace("**", "").replace("__", "")
    return " ".join(text.split())


def _is_placeholder(text: str) -> bool:
    """A template's blank (``...``, ``<object>``) rather than content."""
    value = text.strip().strip(_QUOTE_CHARS + " ").casefold()
    return value in _PLACEHOLDERS or (value.startswith("<") and value.endswith(">"))


def _dedupe(items: list[str], k: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
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


_LIST_ITEM_RE = re.compile(
    r"(?P<indent>[ \t]*)(?:[-*•+]|\(?\d{1,2}[.):]|\*\*\d{1,2}[.):]?\*\*|#{1,6}[ \t]?\d{1,2}[.):]?"
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


@dataclass(frozen=True)
class _ListBlock:
    start: int
    items: list[str]


def _list_blocks(text: str) -> list[_ListBlock]:
    """Blocks of markdown list items (top level only); blank and indented lines do not end a block."""
    blocks: list[_ListBlock] = []
    current: list[str] = []
    start = 0
    indent: int | None = None
    offset = 0
    for line in text.split("\n"):
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


_IN_WORD_APOSTROPHE_RE = re.compile(r"(?<=\w)['’](?=\w)|(?<=s)['’](?=[\s,]|$)")
"""``player's``, ``it’s``, ``players'``: an apostrophe inside a word, no quote."""


def _bare_list(text: str, span: _Span) -> list[str] | None:
    """``[red traffic light, pedestrian]``: an unquoted list alone on its line (or after a label).
    Items may hold any punctuation but brackets and quotes; apostrophes inside words
    (``[tennis racket in the player's hand]``) are no quotes."""
    inner = span.text[1:-1]
    unquoted = _IN_WORD_APOSTROPHE_RE.sub("", inner)
    if span.text[0] != "[" or not inner.strip() or any(c in unquoted for c in "[]{}\"'\n“”‘’`"):
        return None
    before = text[: span.start].rsplit("\n", 1)[-1].strip(" \t*_#>")
    after = text[span.end :].split("\n", 1)[0].strip(" \t*_.")
    if (before and not before.endswith(":")) or after:
        return None
    items = [_clean_item(item) for item in inner.split(",")]
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
    candidates: list[tuple[int, list[str]]] = []
    for value in values:
        found = _concepts_from_json(value.value)
        if found is not None and not _commentary(body, value.start):
            candidates.append((value.start, found))
    for span in unread:
        bare = _bare_list(body, span)
        if bare is not None and not _commentary(body, span.start):
            candidates.append((span.start, bare))
    latest = max((c[0] for c in candidates), default=-1)
    for block in _list_blocks(body):
        if block.start > latest and not _commentary(body, block.start):
            candidates.append((block.start, [_list_item_text(item) for item in block.items]))
    if not candidates:
        return _missing(body, finish_reason, "no JSON array or list found")
    _, items = max(candidates, key=lambda c: c[0])
    concepts = _dedupe([_clean_item(item) for item in items], k)
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
    return _FIELD_ALIASES.get(re.sub(r"[^a-z]", "", str(key).casefold()))


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "; ".join(_field_text(item) for item in value if _field_text(item))
    return " ".join(str(value).split())


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
_LABEL_LINE_RE = re.compile(
    r"[ \t>]*(?:[-*•+][ \t]+|\d{1,2}[.)][ \t]+)?(?:#{1,6}[ \t]?)?[*_ \t]*"
    rf"(?P<label>{_LABELS})[ \t]?(?:\([^()\n]{{0,60}}\))?"
    r"[*_ \t]*[:：][*_]*"
    r"(?P<value>.*)",
    re.IGNORECASE,
)
_INLINE_LABEL_RE = re.compile(rf"(?<![A-Za-z])(?:{_LABELS})[*_ \t]*[:：]", re.IGNORECASE)
_EDIT_HEADER_RE = re.compile(
    r"[ \t>#*_-]*(?:edit|instruction|step)[ \t]?(?:#|no\.?)?[ \t]?\d{1,2}\b(?P<rest>.*)",
    re.IGNORECASE,
)
_FOR_RE = re.compile(r"\bfor[ \t]+(?P<concept>.+)", re.IGNORECASE)


def _split_inline(line: str) -> list[str]:
    """``1. For [x], Keep: … Change: … How: …`` → a ``Concept:`` line and one line per label."""
    labels = list(_INLINE_LABEL_RE.finditer(line))
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
    also at a label that goes back in the order concept, keep, change, how, constraints.
    """
    lines = [part for line in body.splitlines() for part in _split_inline(line)]
    by_order = not any(_EDIT_HEADER_RE.fullmatch(line) for line in lines)
    edits: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last_field: str | None = None
    for line in lines:
        label = _LABEL_LINE_RE.fullmatch(line)
        if label is not None:
            name = _FIELD_ALIASES[label.group("label").casefold()]
            backwards = by_order and any(_FIELDS.index(seen) > _FIELDS.index(name) for seen in current)
            if name in current or backwards:
                edits.append(current)
                current = {}
            current[name] = _clean_value(label.group("value"))
            last_field = name
            continue
        header = _EDIT_HEADER_RE.fullmatch(line)
        if header is not None:
            if current:
                edits.append(current)
            current, last_field = {}, None
            rest = header.group("rest").lstrip(" \t:*_.)-–—")
            inline = _LABEL_LINE_RE.fullmatch(rest)
            if inline is not None:  # "Edit 1: Keep: ..." on one line
                name = _FIELD_ALIASES[inline.group("label").casefold()]
                current[name] = _clean_value(inline.group("value"))
                last_field = name
                continue
            concept = header.group("rest").strip(" \t:*_().-–—")
            if concept[:8].casefold().startswith("concept"):
                concept = concept[7:].lstrip(" \t:")
            if concept:
                current["concept"] = _clean_value(concept)
            continue
        stripped = line.strip()
        if stripped.startswith("```") or not stripped:
            last_field = None if not stripped else last_field
            continue
        if last_field is not None:  # continuation of a multi-line value
            current[last_field] = f"{current[last_field]} {_clean_value(stripped)}".strip()
    if current:
        edits.append(current)
    return _complete_chain([edit for edit in edits if set(edit) - {"concept"}])


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
        for obj in found[-1]:
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
_TARGET_LABEL_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?:(?:edit[ _]?)?(?:type|kind|operation|action)|target[ _]?object|target|object)"
    r"(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
_BARE_RE = re.compile(
    r"[ \t*_`\"'(]*(?P<type>ADD|MODIFY|REMOVE)[ \t*_`\"']*[:,\-–—][ \t]*(?P<value>\S.*)",
    re.IGNORECASE,
)
_LEADING_ARTICLE_RE = re.compile(r"(?:the|a|an)[ \t]+", re.IGNORECASE)


def _target_label(label: str) -> str:
    word = label.casefold()
    return "target" if word.startswith(("target", "object")) else "type"


def _read_target_value(text: str, pos: int) -> tuple[str, int] | None:
    """The rest of the line, up to the next ``Type:``/``Target:`` label on it."""
    end = text.find("\n", pos)
    end = len(text) if end == -1 else end
    search = pos
    while (label := _TARGET_LABEL_RE.search(text, search, end)) is not None:
        if reply_scan.after_separator(text, label.end()) is not None:
            end = label.start()
            break
        search = label.end()
    value = text[pos:end]
    return (value, end) if value.strip(" \t,;|") else None


def _clean_target(value: str) -> str:
    value = _clean_item(value.strip().strip("{}[]()"))
    value = value.strip(_QUOTE_CHARS + " ").rstrip(")").strip()
    return _LEADING_ARTICLE_RE.sub("", value, count=1) if _LEADING_ARTICLE_RE.match(value) else value


def _text_targets(body: str, values: list[_JsonValue]) -> list[Block]:
    """``Type:``/``Target:`` statements outside JSON (a target ends where the next label starts)."""
    found = _outside(reply_scan.scan(body, _TARGET_LABEL_RE, _target_label, _read_target_value), values)
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
    offset = 0
    for line in body.split("\n"):
        bare = _BARE_RE.fullmatch(line)
        if bare is not None:
            candidates.append((offset, bare.group("type"), bare.group("value")))
        offset += len(line) + 1
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

_BINARY_LABEL_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?:AC|EF|CCS|PCS|NCC|answer[ _-]consistency|explanation[ _-]faithfulness)"
    r"(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
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
_REASON_LABEL_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:(?P<who>AC|EF|PCS|NCC|answer[ _-]consistency|explanation[ _-]faithfulness)[ _-]?)?"
    r"(?:reason|reasoning|justification|rationale)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_REASON_VALUE_RE = re.compile(r"[ \t*_]*[:=][ \t*_]*(?P<v>[^\n]*)")


def _binary_label(label: str) -> str | None:
    return _BINARY_NAMES.get(re.sub(r"[^a-z]", "", label.casefold()))


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
    body: str, labels: re.Pattern[str], canon: _Canon, values: list[_JsonValue], accept: _Accept | None
) -> tuple[list[Block], list[Block]]:
    """Blocks of labelled scores outside JSON: (those outside quotes and asides, all)."""
    found = reply_scan.scan(body, labels, canon, reply_scan.read_score, accept)
    found += reply_scan.table_statements(body, labels, canon, reply_scan.read_score)
    found = reply_scan.mark_enclosed(body, _outside(sorted(found, key=lambda s: s.start), values))
    return reply_scan.blocks(s for s in found if not s.enclosed), reply_scan.blocks(found)


def _last_verdict(
    body: str,
    labels: re.Pattern[str],
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


def _reason_before(body: str, end: int, who: str) -> str:
    """The last ``<who> reason:`` line starting before ``end`` ("" for the plain ``REASON:``)."""
    found = ""
    for match in _REASON_LABEL_RE.finditer(body, 0, end):
        label_who = _binary_label(match.group("who") or "") or ""
        if label_who != who:
            continue
        value = _REASON_VALUE_RE.match(body, match.end())
        if value is not None:
            found = value.group("v")
    return _clean_value(found)


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
        body, _BINARY_LABEL_RE, _binary_label, ("ac", "ef"), _BINARY_NAMES, _BINARY_REASON_KEYS
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
    reasons = {
        who: verdict.reasons.get(who) or _reason_before(body, verdict.end, who) for who in ("ac", "ef")
    }
    return Parsed(
        BinaryJudgement(
            ac=ac, ef=ef, ccs=ccs, ac_reason=reasons["ac"], ef_reason=reasons["ef"], note="; ".join(notes)
        )
    )


_GRADED_LABEL_RE = re.compile(r"(?<![A-Za-z0-9_])(?:scores?|rating|grade|CCS)(?![A-Za-z0-9_])", re.IGNORECASE)
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
        _GRADED_LABEL_RE,
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
    reason = verdict.reasons.get("") or _reason_before(body, verdict.end, "")
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
