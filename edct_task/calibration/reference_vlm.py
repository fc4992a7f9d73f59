"""Reference target VLMs of the calibration world, with known faithfulness.

Part of the calibration instrument, not the product. A ``ReferenceVLM`` answers the calibration
questions from *pixels* (``perception.perceive`` on ``np.asarray(image)``; the scene metadata is
never read) and explains itself with a numbered list of cited cues. Behaviours:

- ``faithful``: perceives the cues, answers by the rule table, cites what it perceived;
- ``prior``: answers from the context shortcut (background tint → the configuration generation
  paired with it) and cites that configuration's cues without checking them;
- ``stale``: answers like ``faithful`` but explains like ``prior``;
- ``mixed:p`` (or ``mixed:p:seed=s``): per scene, ``faithful`` with probability p, else ``prior``;
  decided by a hash of the run seed s (default 0), the question and the perceived context (tint +
  texture), which edits do not change, so a baseline and its re-queries agree. Runs of one seed on
  the same items are identical byte for byte; runs of two seeds decide every scene independently
  (two models of the same p), so error rates can be simulated by running seeds. Seed 0 is the hash
  ``mixed:p`` always had.

Conversations: optional system message, a user message with one image and the question; for the
follow-up, the answer as an assistant message and a user message (the ``answer_why`` prompt).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from edct_task.calibration import world
from edct_task.calibration.perception import Percept, perceive
from edct_task.calibration.scenes import config_of_context
from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.errors import BadInput

BEHAVIORS = ("faithful", "prior", "stale", "mixed:<p>[:seed=<s>]")
_MIXED = re.compile(r"mixed:(0(?:\.\d+)?|1(?:\.0+)?|\.\d+)(?::seed=(0|[1-9]\d{0,17}))?")


class Behavior(NamedTuple):
    """A parsed reference behaviour."""

    kind: str
    """``faithful``, ``prior``, ``stale`` or ``mixed``."""
    p: float
    """The share of scenes answered faithfully (1 for ``faithful``, 0 for ``prior``/``stale``)."""
    seed: int = 0
    """``mixed``: the run seed of the per-scene draw."""


def parse_behavior(behavior: str) -> Behavior:
    """``(kind, p, seed)``: ``faithful``/``prior``/``stale``, or ``mixed`` with its probability p in
    [0, 1] and its run seed (``mixed:0.5:seed=3``; 0 when not given)."""
    if behavior in ("faithful", "prior", "stale"):
        return Behavior(behavior, {"faithful": 1.0}.get(behavior, 0.0))
    if isinstance(behavior, str) and (m := _MIXED.fullmatch(behavior)):
        return Behavior("mixed", float(m.group(1)), int(m.group(2) or 0))
    raise ValueError(
        f"unknown reference behaviour {behavior!r}; valid forms: faithful, prior, stale, "
        "mixed:<p> with 0 <= p <= 1 (e.g. mixed:0.5), mixed:<p>:seed=<s> with a run seed s >= 0"
    )


def _unit_hash(text: str) -> float:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16) / float(16**12)


class ReferenceVLM:
    """A VisionChatModel over the calibration world with a known behaviour."""

    name = "calibration-reference"

    def __init__(self, behavior: str = "faithful") -> None:
        self.kind, self.p, self.seed = parse_behavior(behavior)
        self.behavior = behavior

    def identity(self) -> dict[str, Any]:
        return {"backend": "calibration-reference", "behavior": self.behavior}

    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]:
        out: list[Completion | Exception] = []
        for conversation in conversations:
            try:
                out.append(Completion(self._reply(conversation), finish_reason="stop"))
            except BadInput as exc:
                out.append(exc)
        return out

    def mode(self, question: str, percept: Percept) -> str:
        """The behaviour used for one scene: ``faithful``, ``prior`` or ``stale``."""
        if self.kind != "mixed":
            return self.kind
        key = f"{question}|{percept.context}|{percept.signature}"
        u = _unit_hash(f"seed={self.seed}|{key}" if self.seed else key)  # seed 0: the hash of old
        return "faithful" if u < self.p else "prior"

    def _reply(self, conversation: Sequence[ChatMessage]) -> str:
        users = [m for m in conversation if m.role == "user"]
        if not users or len(users[0].images) != 1:
            raise BadInput("the first user message must carry exactly one image")
        question = users[0].text
        family = world.family_of_question(question)
        if family is None:
            raise BadInput(f"not a calibration-world question: {question[:80]!r}")
        image = users[0].images[0]
        percept = perceive(np.asarray(image.convert("RGB")), family)
        mode = self.mode(question, percept)
        prior_config = config_of_context(family, percept.context)
        seen = percept.config
        answer_config = prior_config if mode == "prior" else seen
        follow_up = conversation[-1].role == "user" and any(m.role == "assistant" for m in conversation)
        if not follow_up:
            if answer_config is None:
                return "I cannot tell from this image."
            return world.ANSWER_TEXT[world.rule(family, answer_config)]
        cite_config = seen if mode == "faithful" else prior_config
        if cite_config is None:
            return "1. I could not make out the relevant objects in the image."
        cues = world.cited_order(family, cite_config)
        return "\n".join(f"{i}. {world.sentence(c)}" for i, c in enumerate(cues, 1))
