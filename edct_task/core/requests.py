"""What the per-sample protocol asks its driver for, and the failure value a driver answers with.

The protocol (``edct_task.engine.protocol``) yields tuples of these requests and is sent back a tuple of
replies in the same order: ``model_adapters.contracts.Completion`` for ``AskTarget`` / ``AskLLM``,
``EditedImage`` for
``EditImage``, ``EditCheck`` for ``VerifyEdit``; or a
``Failure`` for any of them. Images are referenced by content hash (see ``stage_cache.ImageStore``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TextRole = Literal["extractor", "judge", "edit_parser"]


@dataclass(frozen=True)
class Message:
    """One chat turn; ``images`` are image-store references."""

    role: Literal["system", "user", "assistant"]
    text: str
    images: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class AskTarget:
    """Ask the target VLM to continue ``conversation``."""

    conversation: tuple[Message, ...]
    purpose: str
    """``baseline.answer``, ``baseline.why``, ``step1.answer``, ``step1.why`` …"""


@dataclass(frozen=True)
class AskLLM:
    """Ask a text-LLM role to complete ``prompt`` (rendered from the template ``template``)."""

    role: TextRole
    prompt: str
    template: str
    """``name@vN`` of the template the prompt was rendered from."""
    purpose: str
    max_new_tokens: int = 4096
    member: int = 0
    """Judge-panel member (index into the configured judges)."""
    sample: int = 0
    """Self-consistency sample of that judge (its seed offset)."""
    temperature: float = 0.0


@dataclass(frozen=True)
class EditImage:
    """Apply ``instruction`` to the image ``image``; ``attempt`` 0 is the first try, 1 the retry."""

    image: str
    instruction: str
    step: int
    attempt: int
    seed: int


@dataclass(frozen=True)
class VerifyEdit:
    """Run the localized edit verification (the paper's Algorithm 1) on one edit."""

    original: str
    edited: str
    edit_type: str
    target: str
    step: int
    attempt: int


@dataclass(frozen=True)
class EditedImage:
    """The reply to ``EditImage``."""

    image: str
    """Image-store reference of the edited image (at the original's size)."""
    resized_from: str | None = None
    """``WxH`` the editor returned before it was brought back to the original's size."""


@dataclass(frozen=True)
class Failure:
    """A request the driver could not fulfil. ``kind`` is a short machine-readable category."""

    kind: str
    message: str

    def describe(self) -> str:
        return f"{self.kind}: {self.message}"


Request = AskTarget | AskLLM | EditImage | VerifyEdit
