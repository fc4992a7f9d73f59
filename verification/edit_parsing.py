"""What an edit instruction does, and to which object: the first step of the paper's Algorithm 1.

``EditTarget`` is the answer to "which kind of edit, on which object"; the LLM-backed parser
lives in ``edct_task.parsing.parse_edit_target`` (it reads the LLM's reply), and this module holds
the rule-based fallback used when no LLM is configured (``rule_based_edit_target``).

This package is a leaf: nothing here imports ``edct_task``.

Rules of the fallback (pure regex, no NLP library)
--------------------------------------------------
1. Text read: the value of the last ``Change:`` line when there is one (markdown such as
   ``**Change:**`` or ``- Change:`` is accepted), else the whole instruction.
2. Edit type: the *earliest* edit verb in that text decides.
   ``add / insert / place / put / introduce`` → ADD; ``remove / delete / erase / eliminate /
   take out / take away / get rid of`` → REMOVE; every other verb (``recolour, change, replace,
   turn, make, paint, swap, convert, move, ...``) → MODIFY. Without any known verb the text is
   read as a bare noun phrase and the type is MODIFY.
3. Target: the noun phrase right after the verb. Determiners (``the, a, an, this, its, ...``)
   are dropped; the phrase ends at the first preposition, conjunction or punctuation
   (``from, to, with, on, in, into, at, by, so, that, and, ',' ...``). ``<attribute> of X``
   ("the colour of the traffic light") and ``X's <attribute>`` give ``X``. After ``make / turn /
   paint / colour / dye`` a trailing result adjective ("make the car *blue*") is dropped when it is
   a colour or a known state/comparative word (``open, closed, empty, larger, darker, ...``).
4. **Attributes stay**: "add a red umbrella to the left of the man" → ADD ``red umbrella``;
   "make the red car blue" → MODIFY ``red car``. The phrase is what a detector should look for in
   the image it searches (Î for ADD, I otherwise), and in both cases the attribute written in the
   instruction describes the object *in that image*.
5. ``None`` when no target phrase is left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

EditType = Literal["ADD", "MODIFY", "REMOVE"]
"""The three kinds of localized edit: add an object, modify one, remove one."""

EDIT_TYPES: tuple[EditType, ...] = ("ADD", "MODIFY", "REMOVE")


@dataclass(frozen=True)
class EditTarget:
    """Kind of edit and the object it acts on."""

    type: EditType
    """ADD (the object exists only after the edit), MODIFY or REMOVE."""
    target: str
    """Short noun phrase an open-vocabulary detector can search for, e.g. ``"traffic light"``."""


# Prefixes (matched on a word's start, case-insensitively) that name each edit type. Shared with the
# LLM-reply parser so both readers agree on synonyms ("Insertion", "recolor", "Deleting" ...).
_TYPE_PREFIXES: tuple[tuple[str, EditType], ...] = (
    ("add", "ADD"),
    ("insert", "ADD"),
    ("introduc", "ADD"),
    ("creat", "ADD"),
    ("remov", "REMOVE"),
    ("delet", "REMOVE"),
    ("eras", "REMOVE"),
    ("eliminat", "REMOVE"),
    ("modif", "MODIFY"),
    ("chang", "MODIFY"),
    ("replac", "MODIFY"),
    ("recolo", "MODIFY"),
    ("alter", "MODIFY"),
    ("edit", "MODIFY"),
    ("swap", "MODIFY"),
    ("transform", "MODIFY"),
)


def edit_type_from_word(word: str) -> EditType | None:
    """Map an edit-type word or synonym to ADD / MODIFY / REMOVE.

    Parameters
    ----------
    word : str
        A word such as ``"ADD"``, ``"insert"``, ``"Recolour"``, ``"deletion"``; surrounding
        quotes, markdown and punctuation are ignored.

    Returns
    -------
    EditType or None
        The edit type, or ``None`` when the word names none.
    """
    match = re.search(r"[A-Za-z]+", word)
    if match is None:
        return None
    token = match.group(0).casefold()
    for prefix, edit_type in _TYPE_PREFIXES:
        if token.startswith(prefix):
            return edit_type
    return None


_ADD_VERBS = (
    "add",
    "adds",
    "adding",
    "insert",
    "inserts",
    "inserting",
    "place",
    "places",
    "placing",
    "put",
    "puts",
    "putting",
    "introduce",
    "introduces",
    "introducing",
)
_REMOVE_VERBS = (
    "remove",
    "removes",
    "removing",
    "delete",
    "deletes",
    "deleting",
    "erase",
    "erases",
    "erasing",
    "eliminate",
    "eliminates",
    "eliminating",
    r"take\s+out",
    r"take\s+away",
    r"get\s+rid\s+of",
    r"removal\s+of",
    r"deletion\s+of",
)
_MODIFY_VERBS = (
    "recolou?r",
    "recolou?rs",
    "recolou?ring",
    "colou?r",
    "change",
    "changes",
    "changing",
    "replace",
    "replaces",
    "replacing",
    "turn",
    "turns",
    "turning",
    "make",
    "makes",
    "making",
    "paint",
    "paints",
    "painting",
    "dye",
    "swap",
    "swaps",
    "swapping",
    "convert",
    "converts",
    "converting",
    "alter",
    "alters",
    "altering",
    "modify",
    "modifies",
    "modifying",
    "transform",
    "transforms",
    "transforming",
    "move",
    "moves",
    "moving",
    "rotate",
    "rotates",
    "rotating",
    "shift",
    "shifts",
    "resize",
    "resizes",
    "enlarge",
    "shrink",
    "darken",
    "brighten",
    "switch",
    "switches",
    "flip",
    "flips",
    "tint",
    "repaint",
    "repaints",
    "retexture",
    "edit",
    "adjust",
    "adjusts",
    "reposition",
)
_RESULT_ADJECTIVE_VERBS = {
    "make",
    "makes",
    "making",
    "turn",
    "turns",
    "turning",
    "paint",
    "paints",
    "painting",
    "repaint",
    "repaints",
    "colour",
    "color",
    "recolour",
    "recolor",
    "dye",
    "tint",
}


_VERB_CLASSES: tuple[tuple[EditType, tuple[str, ...]], ...] = (
    ("ADD", _ADD_VERBS),
    ("REMOVE", _REMOVE_VERBS),
    ("MODIFY", _MODIFY_VERBS),
)


def _verb_search_pattern() -> str:
    """Every verb, as ``\\b(?:add|adds|...|remove|...)\\b`` would find them, written for speed: the
    verbs grouped by first letter, each group starting with that letter (so the regex engine skips
    to the letters verbs start with) followed by a lookbehind that is the leading ``\\b``. Within a
    letter the verbs keep their order, so the same verb is found at the same place."""
    by_letter: dict[str, list[str]] = {}
    for _, verbs in _VERB_CLASSES:
        for verb in verbs:
            by_letter.setdefault(verb[0], []).append(verb[1:])
    groups = [rf"{letter}(?<!\w{letter})(?:{'|'.join(rests)})" for letter, rests in by_letter.items()]
    return rf"(?:{'|'.join(groups)})\b"


_VERB_RE = re.compile(_verb_search_pattern())
"""Searches ``_fold(text)``: lower-case patterns without ``re.IGNORECASE`` scan several times faster."""
_VERB_CLASS_RES = tuple((edit_type, re.compile("|".join(verbs))) for edit_type, verbs in _VERB_CLASSES)


def _fold(text: str) -> str:
    """``text`` lower-cased character by character, as long as ``text``, so that a lower-case ASCII
    pattern finds in it what the pattern with ``re.IGNORECASE`` finds in ``text`` (the same as
    ``edct_task.reply_scan.fold``, which this leaf package does not import)."""
    if text.isascii():
        return text.lower()
    return text.replace("İ", "i").lower().replace("ı", "i").replace("ſ", "s")


_CHANGE_LINE_RE = re.compile(
    # one character class per run, no two overlapping runs side by side: linear on any text
    r"^[ \t>#*_-]*(?:\d{1,3}[.)][ \t]*[*_]*)?change[*_]*[ \t]*[:：][*_]*[ \t]*(?P<value>.*)$",
    re.IGNORECASE | re.MULTILINE,
)

_DETERMINERS = {
    "the",
    "a",
    "an",
    "this",
    "that",
    "these",
    "those",
    "its",
    "their",
    "his",
    "her",
    "any",
    "all",
    "both",
    "some",
    "each",
    "every",
    "existing",
    "current",
    "original",
    "visible",
    "entire",
    "whole",
}
_STOP_WORDS = {
    "from",
    "to",
    "into",
    "onto",
    "with",
    "on",
    "in",
    "at",
    "by",
    "so",
    "that",
    "which",
    "who",
    "while",
    "and",
    "or",
    "but",
    "near",
    "next",
    "beside",
    "behind",
    "above",
    "below",
    "under",
    "over",
    "for",
    "as",
    "instead",
    "between",
    "toward",
    "towards",
    "around",
    "across",
    "along",
    "leaving",
    "keeping",
    "making",
    "without",
    "until",
    "where",
    "then",
    "using",
    "through",
    "inside",
    "outside",
    "against",
    "within",
    "is",
    "are",
    "should",
    "must",
    "will",
    "be",
}
_ATTRIBUTE_NOUNS = {
    "colour",
    "color",
    "colours",
    "colors",
    "shape",
    "material",
    "size",
    "texture",
    "pattern",
    "position",
    "orientation",
    "pose",
    "state",
    "style",
    "surface",
    "type",
    "appearance",
    "brand",
    "number",
    "text",
    "sign",
    "label",
    "direction",
    "lights",
    "paint",
    "paintwork",
    "finish",
    "hue",
    "shade",
    "length",
    "height",
    "width",
}
_COLOURS = {
    "red",
    "green",
    "blue",
    "yellow",
    "orange",
    "purple",
    "violet",
    "pink",
    "black",
    "white",
    "grey",
    "gray",
    "brown",
    "silver",
    "gold",
    "golden",
    "beige",
    "cyan",
    "magenta",
    "teal",
    "navy",
    "maroon",
    "turquoise",
    "amber",
    "transparent",
}
_STATE_WORDS = {
    "open",
    "closed",
    "shut",
    "empty",
    "full",
    "broken",
    "wet",
    "dry",
    "invisible",
    "cloudy",
    "sunny",
    "snowy",
    "rainy",
    "round",
    "square",
    "flat",
    "lit",
    "unlit",
    "on",
    "off",
    "striped",
    "plain",
    "matte",
    "glossy",
    "rusty",
    "clean",
    "dirty",
    "larger",
    "smaller",
    "bigger",
    "darker",
    "brighter",
    "lighter",
    "taller",
    "shorter",
    "wider",
    "narrower",
    "longer",
    "older",
    "newer",
    "cleaner",
    "dirtier",
}

_MAX_PHRASE_WORDS = 12
"""A target phrase is cut after this many words: detectors want short noun phrases."""
_MAX_PHRASE_CHARS = 400
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*|[^\sA-Za-z0-9]")


def _clean_phrase_words(words: list[str], verb: str) -> list[str]:
    while words and words[0].casefold() in _DETERMINERS:
        words = words[1:]
    if verb.casefold() in _RESULT_ADJECTIVE_VERBS and len(words) >= 2:
        last = words[-1].casefold()
        if last in _COLOURS or last in _STATE_WORDS:
            words = words[:-1]
    return words


def _phrase_after(text: str, start: int, verb: str) -> str:
    tokens = _WORD_RE.findall(text[start : start + _MAX_PHRASE_CHARS])
    words: list[str] = []
    for i, token in enumerate(tokens):
        if not token[0].isalnum() or len(words) >= _MAX_PHRASE_WORDS:
            break
        low = token.casefold()
        content = [w for w in words if w.casefold() not in _DETERMINERS]
        if low == "of":
            if len(content) == 1 and content[0].casefold() in _ATTRIBUTE_NOUNS:
                words = []  # "the colour of the traffic light" → "traffic light"
                continue
            break
        if low in _DETERMINERS and not content:
            words.append(token)  # dropped by _clean_phrase_words
            continue
        if low in _STOP_WORDS:
            break
        nxt = tokens[i + 1].casefold() if i + 1 < len(tokens) else ""
        if low.endswith(("'s", "’s")) and nxt in _ATTRIBUTE_NOUNS:
            words.append(token[:-2])  # "the traffic light's colour" → "traffic light"
            break
        words.append(token)
    return " ".join(_clean_phrase_words(words, verb)).strip(" '’-")


def rule_based_edit_target(instruction: str) -> EditTarget | None:
    """Classify an edit instruction and extract its target object without an LLM.

    The fallback when no edit-parser LLM is configured (ours); the rules are in the module docstring.

    Parameters
    ----------
    instruction : str
        A full four-part instruction (``EditInstruction.as_text()``) or just the change sentence.

    Returns
    -------
    EditTarget or None
        The edit type and the target noun phrase, or ``None`` when no target can be found.

    Examples
    --------
    >>> rule_based_edit_target("Change: recolour the traffic light from red to green")
    EditTarget(type='MODIFY', target='traffic light')
    >>> rule_based_edit_target("Remove the pedestrian from the crosswalk.")
    EditTarget(type='REMOVE', target='pedestrian')
    >>> rule_based_edit_target("Add a red umbrella to the left of the man")
    EditTarget(type='ADD', target='red umbrella')
    """
    change_lines = (
        line.strip().strip("*_").strip() for line in reversed(_CHANGE_LINE_RE.findall(instruction))
    )
    text = next((line for line in change_lines if line), instruction)  # the last non-empty one
    text = text.replace("**", "").replace("__", "").replace("`", "")

    folded = _fold(text)
    match = _VERB_RE.search(folded)
    if match is None:
        target = _phrase_after(text, 0, "")
        return EditTarget("MODIFY", target) if target else None
    # the class of the first verb (in the lists' order) written as this one: the one found
    edit_type = next(kind for kind, verbs in _VERB_CLASS_RES if verbs.fullmatch(match.group(0)))
    target = _phrase_after(text, match.end(), text[match.start() : match.end()])
    if not target:
        return None
    return EditTarget(edit_type, target)


__all__ = ["EDIT_TYPES", "EditTarget", "EditType", "edit_type_from_word", "rule_based_edit_target"]
