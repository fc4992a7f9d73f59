"""Read the replies of the extractor, editor-instruction writer, edit parser and judges.

Pure functions, no I/O. Every parser first calls :func:`strip_thinking`, then returns either
``Parsed(value)`` or ``Unparsed(reason)``: a reply that cannot be read is *unscored* with a
specific, human-readable reason, never scored 0 (SPEC §3). No parser raises on any text.

Decisions (where the prompts leave room)
----------------------------------------
* **Which occurrence wins.** Models restate and correct themselves, so for every labelled value
  (``AC: 1``, ``SCORE: 4``, ``Type: ADD``) and for JSON, the *last* readable occurrence wins.
* **JSON leniency.** Arrays/objects are found anywhere in the reply (code fences and chatter
  around them do not matter) and read with ``json``; failing that, after dropping trailing commas
  and turning typographic quotes into straight ones, and finally as Python literals (single
  quotes). ``true/false/null`` are only understood by the ``json`` attempts.
* **Binary scores** accept ``0``/``1``, ``0.0``/``1.0``, ``1/1``, ``0/1`` and the words
  ``yes``/``no``/``true``/``false`` (unambiguous, and some models write them despite the
  prompt). Any other number (``2``, ``0.5``) in the *last* statement of a score makes the reply
  unparsed: we do not round. Words that are not scores ("AC: The answer ...") are skipped as prose.
  ``PCS`` is read as ``AC`` and ``NCC`` as ``EF`` (the paper's older names), and the long names
  "Answer consistency" / "Explanation faithfulness" are accepted too. ``CCS`` is always
  recomputed as ``ac * ef``; a disagreeing or unreadable model CCS, and a score restated with
  different values, are recorded in ``note``.
* **Graded scores** must be a whole number 1..5 (``4``, ``4.0``, ``4/5``, ``4 out of 5``); a
  fraction (``3.5``), another scale (``8/10``) or a value outside 1..5 is unparsed.
* **Instructions**: a missing ``change`` (or an empty one) in any edit makes the whole reply
  unparsed, because dropping that edit would silently shift the chain. Fewer edits than asked is
  *parsed* (the caller compares lengths); more are cut to the first ``n``.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union

from edct_task.core.records import EditInstruction
from verification.edit_parsing import EditTarget, edit_type_from_word

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


ParseResult = Union[Parsed[T], Unparsed]  # noqa: UP007 - a generic alias needs typing.Union on 3.10
"""``Parsed[T] | Unparsed``: the return type of every parser."""


@dataclass(frozen=True)
class BinaryJudgement:
    """The binary judge's verdict for one chain step (SPEC §2.7)."""

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
    """The graded judge's verdict for one chain step (SPEC §2.7)."""

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


def _prepare(text: str) -> tuple[str, Unparsed | None]:
    """Strip thinking; give an Unparsed when nothing is left."""
    if not isinstance(text, str):
        return "", Unparsed(f"reply is not text but {type(text).__name__}")
    stripped, truncated = _strip_thinking(text)
    if stripped:
        return stripped, None
    if truncated:
        return "", Unparsed("reply ends inside an unclosed thinking block (truncated reasoning?)")
    if text.strip():
        return "", Unparsed("reply is empty after removing its thinking")
    return "", Unparsed("reply is empty")


# --------------------------------------------------------------------------------------------
# Lenient JSON
# --------------------------------------------------------------------------------------------

_CLOSERS = {"[": "]", "{": "}"}
_TRAILING_COMMA_RE = re.compile(r",\s*([\]}])")
_TYPOGRAPHIC_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})


def _json_spans(text: str) -> list[str]:
    """Outermost balanced ``[...]`` / ``{...}`` spans, in order, in one linear pass.

    Quotes are only tracked inside brackets; a single-quoted string cannot cross a line (so an
    apostrophe in bracketed prose does not swallow the rest of the reply).
    """
    spans: list[str] = []
    stack: list[str] = []
    start = 0
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
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
            if ch in "\"'":
                quote = ch
            elif ch in "]}":
                if ch != stack[-1]:
                    stack = []
                    continue
                stack.pop()
                if not stack:
                    spans.append(text[start : i + 1])
    return spans


def _load_lenient(span: str) -> tuple[bool, Any]:
    """Read one span as JSON, then leniently; ``(False, None)`` when nothing works."""
    attempts = (span, _TRAILING_COMMA_RE.sub(r"\1", span))
    for attempt in (*attempts, attempts[1].translate(_TYPOGRAPHIC_QUOTES)):
        try:
            return True, json.loads(attempt, strict=False)
        except (ValueError, RecursionError):
            pass
    for attempt in (attempts[1], attempts[1].translate(_TYPOGRAPHIC_QUOTES)):
        try:
            return True, ast.literal_eval(attempt)
        except Exception:  # literal_eval raises many kinds on arbitrary text
            pass
    return False, None


def _json_values(text: str) -> list[Any]:
    """All readable JSON(-ish) values in the reply, in order of appearance."""
    values = []
    for span in _json_spans(text):
        ok, value = _load_lenient(span)
        if ok:
            values.append(value)
    return values


# --------------------------------------------------------------------------------------------
# Markdown helpers
# --------------------------------------------------------------------------------------------

_QUOTE_CHARS = "\"'“”‘’`"


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


def _dedupe(items: list[str], k: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = " ".join(item.casefold().split())
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) == k:
            break
    return out


# --------------------------------------------------------------------------------------------
# Concepts
# --------------------------------------------------------------------------------------------

_CONCEPT_KEYS = ("concepts", "visual_concepts", "concept_list", "items", "evidence")
_ITEM_KEYS = ("concept", "name", "text", "description")


def _concepts_from_json(value: Any) -> list[str] | None:
    if isinstance(value, dict):
        lowered = {str(key).casefold().strip(): item for key, item in value.items()}
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
            lowered = {str(key).casefold().strip(): v for key, v in item.items()}
            found = next((lowered[key] for key in _ITEM_KEYS if isinstance(lowered.get(key), str)), None)
            if found is None:
                return None
            out.append(found)
        else:
            return None
    return out


_LIST_ITEM_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*•+]|\(?\d{1,2}[.):]|\*\*\d{1,2}[.):]?\*\*|#{1,6}\s*\d{1,2}[.):]?)"
    r"[ \t]+(?P<item>\S.*)$"
)
# "**Red light** – because ..." / "**Red light**: ..." → the bold part; "**Concept 1:** X" → X
_BOLD_HEAD_RE = re.compile(r"^\*\*(?P<bold>[^*]+?)\*\*\s*(?P<rest>.*)$")
_LABEL_RE = re.compile(r"^(?:concept|item)\s*\d*\s*[:.)-]?$", re.IGNORECASE)


def _list_item_text(item: str) -> str:
    """One markdown list item as a concept (see ``parse_concepts`` for the bold-head rules)."""
    item = item.strip()
    head = _BOLD_HEAD_RE.match(item)
    if head is not None:
        bold, rest = head.group("bold").strip(), head.group("rest").strip()
        if _LABEL_RE.match(bold):
            return _clean_item(rest.lstrip(":-–— ")) if rest else ""
        if bold.endswith(":") or not rest or rest[0] in ":-–—(":
            return _clean_item(bold.rstrip(":"))
    for dash in (" – ", " — "):
        item = item.split(dash, 1)[0]
    return _clean_item(item)


def _list_blocks(text: str) -> list[list[str]]:
    """Blocks of markdown list items (top level only); blank and indented lines do not end a block."""
    blocks: list[list[str]] = []
    current: list[str] = []
    indent: int | None = None
    for line in text.splitlines():
        match = _LIST_ITEM_RE.match(line)
        if match is not None:
            width = len(match.group("indent").expandtabs(4))
            if indent is None or not current:
                indent = width
            if width <= indent:
                indent = width
                current.append(match.group("item"))
            continue
        if not line.strip() or (line[:1] in " \t" and current):
            continue
        if current:
            blocks.append(current)
        current, indent = [], None
    if current:
        blocks.append(current)
    return blocks


def parse_concepts(text: str, k: int) -> ParseResult[list[str]]:
    """Read the extractor's list of concepts (SPEC §2.2).

    Accepted: a JSON array of strings (also inside code fences, with chatter around, single
    quotes, trailing commas, typographic quotes), an array of objects with a ``"concept"`` key, an
    object with a ``"concepts"`` key, or a markdown list (``1.``, ``1)``, ``-``, ``*``, ``•``,
    ``**1.**``). The last readable JSON value wins; without one, the last list block. In a list
    item ``**Red light** – why ...`` gives ``Red light`` and ``**Concept 1:** red light`` gives
    ``red light``. Items lose wrapping quotes, markdown emphasis and trailing ``, ; .``; empties
    and duplicates (case- and whitespace-insensitive; the first spelling is kept) are dropped; at
    most ``k`` are kept, in order.

    Parameters
    ----------
    text : str
        The extractor's reply.
    k : int
        The most concepts to keep (paper: 2); at least 1.

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
    body, problem = _prepare(text)
    if problem is not None:
        return problem
    candidates = [c for c in (_concepts_from_json(v) for v in _json_values(body)) if c is not None]
    if candidates:
        concepts = _dedupe([_clean_item(item) for item in candidates[-1]], k)
        if not concepts:
            return Unparsed("concept list is empty")
        return Parsed(concepts)
    blocks = _list_blocks(body)
    if not blocks:
        return Unparsed("no JSON array or list found")
    concepts = _dedupe([_list_item_text(item) for item in blocks[-1]], k)
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
        if not fields.get("change", "").strip():
            return Unparsed(f"edit {index} has no 'change'")
        out.append(EditInstruction(**{name: fields.get(name, "").strip() for name in _FIELDS}))
    return Parsed(out)


_LABEL_LINE_RE = re.compile(
    r"^[ \t>]*(?:[-*•+][ \t]+|\d{1,2}[.)][ \t]+)?(?:#{1,6}[ \t]*)?[*_]*[ \t]*"
    r"(?P<label>keep|change|changes|how|constraints?|concept)[ \t]*(?:\([^()\n]{0,60}\))?"
    r"[ \t]*[*_]*[ \t]*[:：][ \t]*[*_]*"
    r"(?P<value>.*)$",
    re.IGNORECASE,
)
_EDIT_HEADER_RE = re.compile(
    r"^[ \t>#*_-]*(?:edit|instruction|step)[ \t]*(?:#|no\.?)?[ \t]*\d{1,2}\b(?P<rest>.*)$",
    re.IGNORECASE,
)


def _text_instructions(body: str) -> list[dict[str, str]]:
    """Labelled text form, split into edits.

    A new edit starts at an ``Edit N`` header or at a repeated label; in a reply without headers
    also at a label that goes back in the order concept, keep, change, how, constraints.
    """
    lines = body.splitlines()
    by_order = not any(_EDIT_HEADER_RE.match(line) for line in lines)
    edits: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last_field: str | None = None
    for line in lines:
        label = _LABEL_LINE_RE.match(line)
        if label is not None:
            name = _FIELD_ALIASES[label.group("label").casefold()]
            backwards = by_order and any(_FIELDS.index(seen) > _FIELDS.index(name) for seen in current)
            if name in current or backwards:
                edits.append(current)
                current = {}
            current[name] = _clean_value(label.group("value"))
            last_field = name
            continue
        header = _EDIT_HEADER_RE.match(line)
        if header is not None:
            if current:
                edits.append(current)
            current, last_field = {}, None
            rest = header.group("rest").lstrip(" \t:*_.)-–—")
            inline = _LABEL_LINE_RE.match(rest)
            if inline is not None:  # "Edit 1: Keep: ..." on one line
                name = _FIELD_ALIASES[inline.group("label").casefold()]
                current[name] = _clean_value(inline.group("value"))
                last_field = name
                continue
            concept = re.sub(r"^[\s:*_().\-–—]+|[\s:*_().\-–—]+$", "", header.group("rest"))
            concept = re.sub(r"^concept[ \t]*:[ \t]*", "", concept, flags=re.IGNORECASE)
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
    return [edit for edit in edits if set(edit) - {"concept"}]


def _clean_value(value: str) -> str:
    value = value.strip()
    if value.endswith(("**", "__")):
        value = value[:-2]
    return " ".join(value.strip().split())


def parse_instructions(text: str, n: int) -> ParseResult[list[EditInstruction]]:
    """Read the chain of edit instructions (SPEC §2.3).

    Accepted: a JSON array of objects (key names case-insensitive, ``constraint`` for
    ``constraints``; also one object, or an object wrapping the array under any key), or the
    labelled text form ``Edit 1:`` / ``Keep:`` / ``Change:`` / ``How:`` / ``Constraints:`` with
    markdown bold, headers and bullets, and multi-line values. In the text form a new edit starts
    at an ``Edit N`` (``Instruction N``, ``Step N``) header or when a label repeats (without
    headers, also when labels go back in the order concept/keep/change/how/constraints); text after the
    header number ("Edit 1 (red light):") becomes the concept. Missing ``concept``, ``keep``,
    ``how`` and ``constraints`` become ``""``.

    Parameters
    ----------
    text : str
        The instruction writer's reply.
    n : int
        The number of edits asked for; more are cut to the first ``n``. At least 1.

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
    body, problem = _prepare(text)
    if problem is not None:
        return problem
    found = [d for d in (_instruction_dicts(v) for v in _json_values(body)) if d is not None]
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
        return Unparsed("no JSON array of edits or 'Keep:/Change:' lines found")
    return _build_instructions(raw, n)


# --------------------------------------------------------------------------------------------
# Edit target (verification step 1)
# --------------------------------------------------------------------------------------------

_TYPE_KEYS = ("type", "edittype", "edit", "kind", "operation", "action")
_TARGET_KEYS = ("target", "object", "targetobject", "subject", "noun")
_TYPE_LINE_RE = re.compile(
    r"^[ \t>#*_-]*(?:edit[ \t_]*)?(?:type|kind|operation|action)[ \t]*[*_]*[ \t]*[:=][ \t*_\"'`]*"
    r"(?P<value>[A-Za-z]+)",
    re.IGNORECASE | re.MULTILINE,
)
_TARGET_LINE_RE = re.compile(
    r"^[ \t>#*_-]*(?:target(?:[ \t_]*object)?|object)[ \t]*[*_]*[ \t]*[:=][ \t]*(?P<value>.+)$",
    re.IGNORECASE | re.MULTILINE,
)
_BARE_RE = re.compile(
    r"^[ \t*_`\"']*(?P<type>ADD|MODIFY|REMOVE)[ \t*_`\"']*[:,\-–—][ \t]*(?P<value>\S.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_LEADING_ARTICLE_RE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


def _clean_target(value: str) -> str:
    value = _clean_item(value.strip().strip("{}[]"))
    value = value.strip(_QUOTE_CHARS + " ")
    return _LEADING_ARTICLE_RE.sub("", value).strip()


def parse_edit_target(text: str) -> ParseResult[EditTarget]:
    """Read the edit-parser LLM's reply: kind of edit and target object (SPEC §4 step 1).

    Accepted: a JSON object (``type``/``edit_type``/``kind`` and ``target``/``object``, any
    case), ``Type: ...`` / ``Target: ...`` lines (markdown allowed), or a bare ``MODIFY: traffic
    light``. Type synonyms: insert/introduce → ADD; change/replace/recolour/alter/swap → MODIFY;
    delete/erase/eliminate → REMOVE (see ``verification.edit_parsing.edit_type_from_word``). The
    target loses quotes, markdown and a leading article.

    Parameters
    ----------
    text : str
        The edit parser's reply.

    Returns
    -------
    Parsed[EditTarget] or Unparsed
    """
    body, problem = _prepare(text)
    if problem is not None:
        return problem
    reason = "no edit type and target found"
    for value in reversed(_json_values(body)):
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, dict):
            continue
        lowered = {re.sub(r"[^a-z]", "", str(key).casefold()): item for key, item in value.items()}
        raw_type = next((lowered[key] for key in _TYPE_KEYS if isinstance(lowered.get(key), str)), None)
        raw_target = next((lowered[key] for key in _TARGET_KEYS if isinstance(lowered.get(key), str)), None)
        if raw_type is None or raw_target is None:
            reason = "JSON object lacks 'type' or 'target'"
            continue
        edit_type = edit_type_from_word(raw_type)
        if edit_type is None:
            return Unparsed(f"unknown edit type {raw_type!r}")
        target = _clean_target(raw_target)
        if not target:
            return Unparsed("edit target is empty")
        return Parsed(EditTarget(edit_type, target))

    types = _TYPE_LINE_RE.findall(body)
    targets = _TARGET_LINE_RE.findall(body)
    if types and targets:
        edit_type = edit_type_from_word(types[-1])
        if edit_type is None:
            return Unparsed(f"unknown edit type {types[-1]!r}")
        target = _clean_target(targets[-1])
        if not target:
            return Unparsed("edit target is empty")
        return Parsed(EditTarget(edit_type, target))
    bare = _BARE_RE.findall(body)
    if bare:
        raw_type, raw_target = bare[-1]
        edit_type = edit_type_from_word(raw_type)
        target = _clean_target(raw_target)
        if edit_type is not None and target:
            return Parsed(EditTarget(edit_type, target))
    if types and not targets:
        reason = "edit target missing"
    elif targets and not types:
        reason = "edit type missing"
    return Unparsed(reason)


# --------------------------------------------------------------------------------------------
# Judgements
# --------------------------------------------------------------------------------------------

_SCORE_VALUE = r"(?P<value>-?\d+(?:\.\d+)?(?:[ \t]*(?:/|out[ \t]+of)[ \t]*\d+(?:\.\d+)?)?|[A-Za-z]+)"
_SEP = r"[ \t]*(?:\([^()\n]{0,60}\))?[ \t]*[*_]*[ \t]*(?:score|value)?[ \t]*[*_]*[ \t]*[:=][ \t]*[*_`]*[ \t]*"


def _score_re(names: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{names})\)?[*_]*{_SEP}{_SCORE_VALUE}", re.IGNORECASE)


_AC_RE = _score_re(r"AC|PCS|answer[ _-]consistency")
_EF_RE = _score_re(r"EF|NCC|explanation[ _-]faithfulness")
_CCS_RE = _score_re(r"CCS")
_YES_NO = {"yes": 1, "true": 1, "no": 0, "false": 0}


def _binary_value(raw: str) -> int | str | None:
    """0/1 from a raw value; a message when it is a number that is not a binary score; None for prose."""
    raw = raw.strip()
    word = raw.casefold()
    if word.isalpha():
        return _YES_NO.get(word)
    number = re.split(r"[ \t]*(?:/|out[ \t]+of)[ \t]*", raw)
    if len(number) == 2 and float(number[1]) != 1:
        return f"{raw!r} is not 0 or 1"
    value = float(number[0])
    if value in (0.0, 1.0):
        return int(value)
    return f"{raw!r} is not 0 or 1"


def _last_binary(pattern: re.Pattern[str], body: str) -> tuple[int | str | None, set[int]]:
    """The last readable binary statement and the set of all values stated."""
    last: int | str | None = None
    stated: set[int] = set()
    for match in pattern.finditer(body):
        value = _binary_value(match.group("value"))
        if value is None:
            continue
        last = value
        if isinstance(value, int):
            stated.add(value)
    return last, stated


def _reason(names: str, body: str) -> str:
    pattern = re.compile(
        rf"(?<![A-Za-z0-9_])(?:{names})[ \t]*[_ -]?[ \t]*reason(?:ing)?"
        r"[ \t]*[*_]*[ \t]*[:=][ \t]*[*_]*(?P<v>.*)$",
        re.IGNORECASE | re.MULTILINE,
    )
    found = [m.group("v") for m in pattern.finditer(body)]
    return _clean_value(found[-1]) if found else ""


def parse_binary_judgement(text: str) -> ParseResult[BinaryJudgement]:
    """Read the binary judge's verdict: AC, EF (and CCS) with their reasons (SPEC §2.7).

    Accepted forms of a score: ``AC: 1``, ``**AC**: 1``, ``**AC:** 1``, ``AC = 1``,
    ``AC score: 1``, ``- AC: 1/1``, ``AC (answer consistency): 1``, ``Answer consistency: 1`` and
    several on one line (``AC: 1 / EF: 0 / CCS: 0``). ``PCS`` = AC and ``NCC`` = EF. Values: see
    the module docstring (0/1, 0.0/1.0, x/1, yes/no, true/false). The last statement of each
    score wins. Reasons come from the last ``AC_REASON:`` / ``AC reason:`` (or ``PCS_REASON``)
    line, likewise for EF.

    Parameters
    ----------
    text : str
        The binary judge's reply.

    Returns
    -------
    Parsed[BinaryJudgement] or Unparsed
        ``Unparsed`` when AC or EF is missing or its last statement is not a binary value.
    """
    body, problem = _prepare(text)
    if problem is not None:
        return problem
    ac, ac_stated = _last_binary(_AC_RE, body)
    ef, ef_stated = _last_binary(_EF_RE, body)
    for name, value in (("AC", ac), ("EF", ef)):
        if value is None:
            return Unparsed(f"{name} score missing")
        if isinstance(value, str):
            return Unparsed(f"{name} value {value}")
    assert isinstance(ac, int) and isinstance(ef, int)
    ccs = ac * ef
    notes: list[str] = []
    for name, stated, value in (("AC", ac_stated, ac), ("EF", ef_stated, ef)):
        if len(stated) > 1:
            notes.append(f"{name} stated with different values; the last ({value}) was used")
    model_ccs, _ = _last_binary(_CCS_RE, body)
    if isinstance(model_ccs, str):
        notes.append(f"model's CCS {model_ccs}; recomputed as AC·EF = {ccs}")
    elif model_ccs is not None and model_ccs != ccs:
        notes.append(f"model's CCS {model_ccs} disagrees with AC·EF = {ccs}; recomputed")
    return Parsed(
        BinaryJudgement(
            ac=ac,
            ef=ef,
            ccs=ccs,
            ac_reason=_reason("AC|PCS|answer[ _-]consistency", body),
            ef_reason=_reason("EF|NCC|explanation[ _-]faithfulness", body),
            note="; ".join(notes),
        )
    )


_GRADED_RE = re.compile(
    rf"(?<![A-Za-z0-9_])(?:final[ \t]+|overall[ \t]+|graded[ \t]+)?(?:score|rating|grade)[*_]*{_SEP}"
    r"(?P<value>-?\d+(?:\.\d+)?(?:[ \t]*(?:/|out[ \t]+of)[ \t]*\d+(?:\.\d+)?)?)",
    re.IGNORECASE,
)


def parse_graded_judgement(text: str) -> ParseResult[GradedJudgement]:
    """Read the graded judge's verdict: a score 1..5 and its reason (SPEC §2.7).

    Accepted: ``SCORE: 4``, ``Score: 4/5``, ``**Score:** 4``, ``**Score**: 4``, ``Final score:
    4``, ``Score = 4``, ``Rating: 4 out of 5``, ``4.0``. The last statement wins. The reason is
    the last ``REASON:`` line.

    Parameters
    ----------
    text : str
        The graded judge's reply.

    Returns
    -------
    Parsed[GradedJudgement] or Unparsed
        ``Unparsed`` when no score is found or the last one is not a whole number in 1..5 on a
        5-point scale.
    """
    body, problem = _prepare(text)
    if problem is not None:
        return problem
    matches = list(_GRADED_RE.finditer(body))
    if not matches:
        return Unparsed("score missing")
    raw = matches[-1].group("value").strip()
    parts = re.split(r"[ \t]*(?:/|out[ \t]+of)[ \t]*", raw)
    if len(parts) == 2 and float(parts[1]) != 5:
        return Unparsed(f"score {raw} is not on the 1–5 scale")
    value = float(parts[0])
    if not 1 <= value <= 5:
        return Unparsed(f"score {parts[0]} outside 1–5")
    if not value.is_integer():
        return Unparsed(f"score {parts[0]} is not a whole number")
    score = int(value)
    return Parsed(GradedJudgement(score=score, normalised=(score - 1) / 4, reason=_reason("", body)))


__all__ = [
    "BinaryJudgement",
    "EditTarget",
    "GradedJudgement",
    "ParseResult",
    "Parsed",
    "Unparsed",
    "parse_binary_judgement",
    "parse_concepts",
    "parse_edit_target",
    "parse_graded_judgement",
    "parse_instructions",
    "strip_thinking",
]
