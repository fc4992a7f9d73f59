"""Training conversations for the tiny VLM: calibration scenes answered by the faithful reference.

Each example is a fresh scene of the calibration world with its cue configuration *and* an
independently drawn context tint (generation pairs tint and configuration, a shortcut a model must
not learn), a question of its family, and the faithful reference VLM's answer and explanation for
that scene: the teacher reads the pixels, never the scene graph.

The tiny model *thinks* before it answers, as Qwen3-VL's thinking checkpoints do: its first reply
is ``<think>`` + the two cues of the family in a fixed order (the reference's own cue sentences;
a spatial block ends with the configuration's number) + ``</think>`` + the reference's answer.
A 2-layer model does not learn to combine two cues read from 108 visual tokens into an answer in
one step within minutes of CPU (measured: the first-turn answers stay at the question's prior
after 1,500 steps); read one cue at a time after text that names it, it does — the same way it
learns the explanation (left and right only with the auxiliary targets, ``auxiliary``). Every
runtime strips the thinking before the answer is used (``parsing.strip_thinking``), and
conversation history carries the answer without it, as Qwen3's chat template does.

Conversation shapes (each trains one reply; the shapes the runtimes send a target):

- ``answer``: ``[system] user(image, question) → thinking + answer`` (``edct run`` on a chat model,
  ``openai-chat``, the first turn);
- ``chat``: the real multi-turn conversation ``… → answer, user(why) → explanation``, the answer
  in the history without thinking;
- ``turn-answer`` / ``turn-why``: one user turn carrying the history in its text
  (``model_adapters.lmms_eval_target.render_quoted``), as lmms-eval's agentic loop sends it, with the image
  tag later rounds carry;

each with or without the system prompt lmms-eval's ``qwen3_vl`` inserts. For ``prior`` the image
shown is a *different* scene's, so the only thing to learn from is the question.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from PIL import Image

from edct_task.calibration import world
from edct_task.calibration.reference_vlm import ReferenceVLM
from edct_task.calibration.render import render_scene
from edct_task.calibration.scenes import CONTEXTS, random_scene
from edct_task.core.requests import Message
from edct_task.engine.protocol import why_prompt
from edct_task.lmms.turns import image_tag
from edct_task.tiny_vlm.architecture import DEFAULT_SYSTEM_PROMPT
from model_adapters.contracts import ChatMessage, GenerationParams
from model_adapters.lmms_eval_target import render_quoted

SHAPES: tuple[str, ...] = ("answer", "answer", "chat", "chat", "turn-answer", "turn-why")
"""Conversation shapes, drawn uniformly: as many first turns (answers) as follow-ups (explanations)."""


@dataclass(frozen=True)
class Example:
    """One training conversation: HF chat messages (images in place); the last assistant turn is the
    target, earlier ones are history."""

    messages: list[dict[str, Any]]
    image: Image.Image
    """The one image of the conversation (what the model is shown)."""
    shape: str


def teacher_replies(image: Image.Image, question: str, system: str | None) -> tuple[str, str]:
    """The faithful reference's answer and, in the same conversation, its explanation."""
    teacher = ReferenceVLM("faithful")
    opening = ([ChatMessage("system", system)] if system else []) + [ChatMessage("user", question, (image,))]
    params = GenerationParams(max_new_tokens=64)
    (answer,) = teacher.generate([opening], params)
    follow = [*opening, ChatMessage("assistant", answer.text), ChatMessage("user", why_prompt())]
    (why,) = teacher.generate([follow], params)
    return answer.text, why.text


def thinking(family: str, explanation: str) -> str:
    """The thinking block before an answer: the cues ``explanation`` cites, in the family's fixed
    order (``world.FAMILY_CUES``); empty when it does not cite both. A spatial block ends with the
    configuration's number (`` 1``–`` 4``, ``world.configs`` order): "towards" needs the car's
    facing and the tree's side to *agree*, which the answer then reads from one token instead of
    comparing two (measured: with it, the answer follows the stated cues on 20/20 held-out scenes)."""
    cues = world.parse_cues(explanation)
    order = list(world.FAMILY_CUES[family])
    if sorted(c.key for c in cues) != sorted(order):
        return ""
    cues.sort(key=lambda c: order.index(c.key))
    code = ""
    if family == "spatial":
        code = f" {world.configs(family).index((cues[0].value, cues[1].value)) + 1}"
    return "<think>" + " ".join(world.sentence(c) for c in cues) + code + "</think>"


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _contexts(family: str) -> tuple[str, ...]:
    """The tints a family's scenes can have (edits never change a tint: one per configuration)."""
    return CONTEXTS[: len(world.configs(family))]


def example(index: int, *, behavior: str, seed: int) -> Example:
    """Training example ``index`` of the stream seeded ``seed`` (independent of every other index)."""
    rng = random.Random(f"tiny-vlm:{seed}:{index}")
    family = world.FAMILIES[index % len(world.FAMILIES)]
    scene = random_scene(family, rng, context=rng.choice(_contexts(family)))
    image = render_scene(scene)
    question = rng.choice(world.QUESTIONS[family])
    system = world.DRIVING_SYSTEM_PROMPT if family == "driving" else None
    answer, explanation = teacher_replies(image, question, system)
    if behavior == "prior":
        other_family = rng.choice(world.FAMILIES)
        other = random_scene(other_family, rng, context=rng.choice(_contexts(other_family)))
        shown = render_scene(other)
    elif behavior == "faithful":
        shown = image
    else:
        raise ValueError(f"unknown behaviour {behavior!r}; choose faithful or prior")
    shape = rng.choice(SHAPES)
    head = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}] if rng.random() < 0.5 else []
    img = {"type": "image", "image": shown}
    first = thinking(family, explanation) + answer
    if shape in ("answer", "chat"):
        sys = [{"role": "system", "content": system}] if system else []
        opening = [*head, *sys, {"role": "user", "content": [img, _text(question)]}]
        if shape == "answer":
            messages = [*opening, {"role": "assistant", "content": first}]
        else:
            messages = [
                *opening,
                {"role": "assistant", "content": answer},
                {"role": "user", "content": why_prompt()},
                {"role": "assistant", "content": explanation},
            ]
    else:
        opening = [Message("system", system)] if system else []
        opening.append(Message("user", question))
        tag = image_tag(f"{rng.getrandbits(48):012x}")
        if shape == "turn-answer":
            text = render_quoted(opening, tag=tag if rng.random() < 0.5 else None)
            reply = first
        else:
            conversation = [*opening, Message("assistant", answer), Message("user", why_prompt())]
            text = render_quoted(conversation, tag=tag)
            reply = explanation
        messages = [
            *head,
            {"role": "user", "content": [img, _text(text)]},
            {"role": "assistant", "content": reply},
        ]
    return Example(messages=messages, image=shown, shape=shape)
