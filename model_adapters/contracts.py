"""The contracts every backend implements: one per backend kind (cf. httpx transports).

Images travel as RGB ``PIL.Image.Image`` objects. A backend reports its identity (what changes its
output: backend name, model id, revision, decoding settings that matter) for the stage cache.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: importing the contracts loads no imaging library
    from PIL import Image


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a chat conversation."""

    role: Literal["system", "user", "assistant"]
    text: str
    images: tuple[Image.Image, ...] = field(default=())


@dataclass(frozen=True)
class ReplySchema:
    """A JSON schema the reply should follow (OpenAI ``response_format`` ``json_schema``).

    The protocol attaches one to every text-LLM request of a known reply kind; a backend that can
    constrain its output (``openai-chat`` with ``structured`` not ``off``) sends it, others ignore it.
    ``schema`` is the schema as JSON text, so the value stays hashable.
    """

    name: str
    schema: str


@dataclass(frozen=True)
class GenerationParams:
    """Decoding parameters; recorded in results and part of every cache key.

    ``reply_schema`` is left out of ``as_dict``: it follows from the prompt template (which every
    text-LLM cache key holds) and whether it is sent follows from the backend's identity
    (``structured``).
    """

    max_new_tokens: int = 4096
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    reply_schema: ReplySchema | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class TokenUsage:
    """Tokens one reply cost, as the server reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    """One model reply, typed: what the model said, its separate reasoning, what it cost.

    ``text`` is the message content exactly as received (inline ``<think>`` blocks included; the
    protocol's parsers strip them). ``reasoning`` is reasoning the server returned *separately*
    (``reasoning_content``); it is kept for audit and never pasted into ``text``.
    ``finish_reason`` is why generation stopped, as the server said (``"stop"``, ``"length"`` at the
    token limit, ``"content_filter"``…; None when the backend does not say): the parsers read a
    reply cut at the limit as truncated, never as a verdict.
    """

    text: str
    reasoning: str | None = None
    usage: TokenUsage | None = None
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        # A reply is text: a lone surrogate (a JSON reply holding "\\ud800") cannot be written as
        # UTF-8 anywhere (cache, records, reports), so it becomes U+FFFD here, for every backend.
        object.__setattr__(self, "text", scrub_surrogates(self.text))
        if self.reasoning is not None:
            object.__setattr__(self, "reasoning", scrub_surrogates(self.reasoning))


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate code point replaced by U+FFFD (valid UTF-8 from then on).

    A Python ``str`` decoded from JSON joins a well-formed pair (``\\ud83d\\ude00``) into one
    character, so any surrogate left is unpaired and has no UTF-8 encoding.
    """
    return _SURROGATE.sub("\ufffd", text) if isinstance(text, str) else text


@runtime_checkable
class VisionChatModel(Protocol):
    """A target VLM. ``generate`` answers a batch of conversations in one call.

    Returns one item per conversation: the ``Completion``, or a ``BackendError`` instance for a
    conversation that failed on its own (the others are still answered). Raising means the whole
    batch failed.
    """

    name: str

    def identity(self) -> dict[str, Any]: ...

    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]: ...


@runtime_checkable
class TextModel(Protocol):
    """A text LLM for the extractor, judge and edit-parser roles. One prompt, one reply.

    Raises ``BackendError`` subclasses on failure. The reply may contain thinking text; the
    protocol's parsers strip it.
    """

    name: str

    def identity(self) -> dict[str, Any]: ...

    def complete(self, prompt: str, params: GenerationParams) -> Completion: ...


@runtime_checkable
class ImageEditor(Protocol):
    """A text-guided image editor. Returns the edited RGB image.

    Raises ``EditRefused`` on moderation or refusal and other ``BackendError`` subclasses on
    failure. ``seed`` differs between the first attempt and the retry.
    """

    name: str

    def identity(self) -> dict[str, Any]: ...

    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image: ...
