"""The calibration world's knowledge: cues, rule tables, sentences and their parsers.

This module is part of a calibration *instrument* (a procedurally generated world whose true
faithfulness is known), not of the product. It holds everything the world's reference models agree
on, and nothing about pixels: which two cues decide each family's answer, the rule table from cue
values to answer, the sentences a reference VLM uses to cite a cue, the concept phrases and the
keyword parser that maps any of these texts back to cues.

Families mirror the paper's domains:

- ``knowledge``: ball colour × racket presence → sport;
- ``driving``: traffic-light colour × pedestrian on the crosswalk → ego action;
- ``spatial``: car facing × tree side → is the car heading towards or away from the tree.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

FAMILIES: tuple[str, ...] = ("knowledge", "driving", "spatial")

CueKey = tuple[str, str]
"""(object category, attribute), e.g. ("traffic light", "colour")."""

FAMILY_CUES: dict[str, tuple[CueKey, CueKey]] = {
    "knowledge": (("ball", "colour"), ("racket", "presence")),
    "driving": (("traffic light", "colour"), ("pedestrian", "presence")),
    "spatial": (("car", "facing"), ("tree", "side")),
}

CUE_VALUES: dict[CueKey, tuple[str, ...]] = {
    ("ball", "colour"): ("orange", "white", "yellow"),
    ("racket", "presence"): ("present", "absent"),
    ("traffic light", "colour"): ("red", "yellow", "green"),
    ("pedestrian", "presence"): ("present", "absent"),
    ("car", "facing"): ("left", "right"),
    ("tree", "side"): ("left", "right"),
}

ALTERNATIVES: dict[CueKey, dict[str, tuple[str, ...]]] = {
    ("ball", "colour"): {
        "orange": ("white", "yellow"),
        "white": ("yellow", "orange"),
        "yellow": ("orange", "white"),
    },
    ("traffic light", "colour"): {
        "red": ("green", "yellow"),
        "yellow": ("red", "green"),
        "green": ("red", "yellow"),
    },
}
"""New values an edit may choose for a cue, in order of preference (presence and sides flip)."""

ANSWERS: dict[str, tuple[str, ...]] = {
    "knowledge": ("basketball", "football", "tennis", "table tennis"),
    "driving": ("stop", "slow down", "go"),
    "spatial": ("towards", "away"),
}

ANSWER_TEXT: dict[str, str] = {
    "basketball": "Basketball.",
    "football": "Football.",
    "tennis": "Tennis.",
    "table tennis": "Table tennis.",
    "stop": "Stop.",
    "slow down": "Slow down.",
    "go": "Go.",
    "towards": "Towards the tree.",
    "away": "Away from the tree.",
}

QUESTIONS: dict[str, tuple[str, ...]] = {
    "knowledge": (
        "Which sport is this ball used for?",
        "What sport would you play with the ball in this picture?",
        "Name the sport that this scene shows equipment for.",
    ),
    "driving": (
        "What should the ego vehicle do next: stop, slow down or go?",
        "Approaching this crosswalk, should the ego vehicle stop, slow down or go?",
        "Which action should the ego vehicle take now: stop, slow down or go?",
    ),
    "spatial": (
        "Is the car heading towards the tree or away from it?",
        "If the car drives forward, does it move towards the tree or away from it?",
        "Is the tree in front of the car or behind it: is the car heading towards it or away?",
    ),
}

DRIVING_SYSTEM_PROMPT = (
    "You are the driving assistant of the ego vehicle. The image is the view from the ego "
    "vehicle's front camera."
)

Config = tuple[str, str]
"""The values of a family's two cues, in ``FAMILY_CUES`` order."""


@dataclass(frozen=True)
class Cue:
    """One statement about a cue: object ``obj`` has ``value`` for attribute ``attr``."""

    obj: str
    attr: str
    value: str

    @property
    def key(self) -> CueKey:
        return (self.obj, self.attr)


def configs(family: str) -> list[Config]:
    """Every cue configuration of a family, in a fixed order (its index picks the context)."""
    a, b = FAMILY_CUES[family]
    return list(itertools.product(CUE_VALUES[a], CUE_VALUES[b]))


def rule(family: str, config: Config) -> str:
    """The world's rule table: the answer a scene with these cue values warrants."""
    first, second = config
    if family == "driving":
        if first == "red" or second == "present":
            return "stop"
        return "slow down" if first == "yellow" else "go"
    if family == "knowledge":
        if second == "present":
            return "tennis" if first == "yellow" else "table tennis"
        return {"orange": "basketball", "white": "football", "yellow": "tennis"}[first]
    if family == "spatial":
        return "towards" if first == second else "away"
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def cited_order(family: str, config: Config) -> tuple[Cue, Cue]:
    """The two cues of a configuration, most important for the answer first."""
    (ka, kb), (va, vb) = FAMILY_CUES[family], config
    a, b = Cue(*ka, va), Cue(*kb, vb)
    if family == "driving" and va != "red" and vb == "present":
        return (b, a)
    if family == "knowledge" and vb == "present" and va != "yellow":
        return (b, a)
    return (a, b)


_SENTENCES: dict[tuple[str, str, str | None], str] = {
    ("traffic light", "colour", None): "The traffic light is {value}.",
    ("pedestrian", "presence", "present"): "A pedestrian is on the crosswalk.",
    ("pedestrian", "presence", "absent"): "The crosswalk is empty.",
    ("ball", "colour", None): "The ball is {value}.",
    ("racket", "presence", "present"): "A racket lies next to the ball.",
    ("racket", "presence", "absent"): "There is no racket next to the ball.",
    ("car", "facing", None): "The car is facing {value}.",
    ("tree", "side", None): "The tree is to the {value} of the car.",
}

_CONCEPTS: dict[tuple[str, str, str | None], str] = {
    ("traffic light", "colour", None): "the {value} colour of the traffic light",
    ("pedestrian", "presence", "present"): "the pedestrian on the crosswalk",
    ("pedestrian", "presence", "absent"): "the empty crosswalk with no pedestrian",
    ("ball", "colour", None): "the {value} colour of the ball",
    ("racket", "presence", "present"): "the racket next to the ball",
    ("racket", "presence", "absent"): "the absence of a racket next to the ball",
    ("car", "facing", None): "the car facing {value}",
    ("tree", "side", None): "the tree to the {value} of the car",
}


def _phrase(table: dict[tuple[str, str, str | None], str], cue: Cue) -> str:
    fmt = table.get((cue.obj, cue.attr, cue.value)) or table[(cue.obj, cue.attr, None)]
    return fmt.format(value=cue.value)


def sentence(cue: Cue) -> str:
    """How a reference VLM cites a cue: ``The traffic light is red.``"""
    return _phrase(_SENTENCES, cue)


def concept(cue: Cue) -> str:
    """How the rule-based extractor names a cue: ``the red colour of the traffic light``."""
    return _phrase(_CONCEPTS, cue)


_NEGATION = re.compile(r"\b(no|not|empty|absence|absent|without|none|nobody|missing|removed)\b")
_FACING = re.compile(r"\b(facing|faces|face|pointing|points|heading|oriented)\b")


def _words(text: str, choices: tuple[str, ...]) -> list[str]:
    return [w for w in choices if re.search(rf"\b{w}\b", text)]


def parse_cue(text: str) -> Cue | None:
    """The cue one line of text states, by keywords; None when it states none unambiguously.

    Reads the world's own sentences and concept phrases and tolerates free paraphrases such as
    "the light shows red" or "nobody is crossing; the crosswalk is empty".
    """
    t = text.lower()
    if re.search(r"\btrees?\b", t):
        sides = _words(t, ("left", "right"))
        return Cue("tree", "side", sides[0]) if len(sides) == 1 else None
    if re.search(r"\b(car|vehicle)\b", t) and _FACING.search(t) and "ego" not in t:
        sides = _words(t, ("left", "right"))
        return Cue("car", "facing", sides[0]) if len(sides) == 1 else None
    if re.search(r"\b(traffic light|light|signal)\b", t):
        colours = _words(t, CUE_VALUES[("traffic light", "colour")])
        return Cue("traffic light", "colour", colours[0]) if len(colours) == 1 else None
    if re.search(r"\b(pedestrians?|person|people|crosswalk|nobody)\b", t):
        return Cue("pedestrian", "presence", "absent" if _NEGATION.search(t) else "present")
    if re.search(r"\b(rackets?|paddles?)\b", t):
        return Cue("racket", "presence", "absent" if _NEGATION.search(t) else "present")
    if re.search(r"\bball\b", t):
        colours = _words(t, CUE_VALUES[("ball", "colour")])
        return Cue("ball", "colour", colours[0]) if len(colours) == 1 else None
    return None


def split_items(text: str) -> list[str]:
    """The items of a numbered or bulleted list (or plain lines), markers stripped."""
    items = []
    for line in text.splitlines():
        item = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", line).strip()
        if item:
            items.append(item)
    return items


def parse_cues(text: str) -> list[Cue]:
    """The cues a list-like explanation states, in order, one per recognised line, no duplicates."""
    out: list[Cue] = []
    for item in split_items(text):
        cue = parse_cue(item)
        if cue is not None and cue not in out:
            out.append(cue)
    return out


def family_of_question(question: str) -> str | None:
    """Which family a question belongs to, by keywords; None for questions from outside the world."""
    q = question.lower()
    if "ego vehicle" in q:
        return "driving"
    if "sport" in q:
        return "knowledge"
    if "car" in q and "tree" in q:
        return "spatial"
    return None


def parse_answer(family: str, text: str) -> str | None:
    """The answer label a reply states, or None when it states none of the family's labels."""
    t = text.lower()
    patterns = {
        "knowledge": (
            ("table tennis", r"table[ -]tennis|ping[ -]?pong"),
            ("basketball", r"basketball"),
            ("football", r"football|soccer"),
            ("tennis", r"tennis"),
        ),
        "driving": (("slow down", r"slow"), ("stop", r"stop|halt|yield"), ("go", r"go|proceed|continue")),
        "spatial": (("away", r"away"), ("towards", r"towards?")),
    }[family]
    for label, pattern in patterns:
        if re.search(rf"\b(?:{pattern})\b", t):
            return label
    return None
