"""Secrets never leave through a reply: the one place replies enter the engine removes them.

A key reaches a backend from an environment variable (``api_key_env: NAME``); the adapters
already scrub it from their error messages. An endpoint can also *echo* it in a successful
reply (a proxy that repeats the request headers, a model asked to print its configuration); the
reply then flows into ``samples.jsonl``, the stage cache, the audit pages and a published bundle.
So every text reply (:class:`Completion`: text and separate reasoning) and every failure message
passes through :class:`Redactor` in the request handlers, before it is cached or recorded: each
configured secret value is replaced by ``[redacted]`` wherever it appears, in every encoding an
echo can take (:func:`secret_patterns`):

- as it is, in any letter case (an endpoint that upper-cases what it repeats);
- with any character percent-encoded (``%73%6B-…``, either hex case) and with zero-width or
  soft-hyphen characters between its characters;
- base64-encoded (standard or URL-safe alphabet) inside a longer encoded text, at any of the three
  byte alignments: the part of the encoding that depends on the key alone is what is matched;
- split across a reply's ``text`` and its separate ``reasoning`` (the key's head, at least
  :data:`MIN_PIECE_CHARS` characters, in one and the rest of it in the other, either way round):
  both pieces are masked.

Values shorter than :data:`MIN_SECRET_CHARS` are not redacted (no real API key is that short, and
replacing a 3-letter value would mangle ordinary text).
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Iterable
from typing import overload

from edct_task.core.requests import Failure
from model_adapters.contracts import Completion

MIN_SECRET_CHARS = 8
MASK = "[redacted]"
INVISIBLE = "\u00ad\u180e\u200b\u200c\u200d\u2060\ufeff"
"""Characters that show as nothing: an echo may slip them between a key's characters."""


def _char(ch: str) -> str:
    """One character of a key: itself (any case) or percent-encoded (any hex case)."""
    encoded = "".join(f"%{b:02x}" for b in ch.encode("utf-8"))
    return f"(?:{re.escape(ch)}|{re.escape(encoded)})"


MIN_PIECE_CHARS = 4
"""The shortest piece of a key cut between a reply's text and its reasoning that is masked."""


def _piece(part: str) -> re.Pattern[str]:
    gap = f"[{INVISIBLE}]*"
    return re.compile("(?i:" + gap.join(_char(ch) for ch in part) + ")")


def _base64_cores(secret: str) -> list[str]:
    """The parts of the base64 encodings of ``secret`` inside any longer text that depend on the
    key alone: one per byte alignment (0, 1, 2 bytes before it) and alphabet."""
    raw = secret.encode("utf-8")
    cores = []
    for lead in range(3):
        encoded = base64.b64encode(b"\0" * lead + raw).decode("ascii")
        start = (lead * 4 + 2) // 3  # characters that also encode the bytes before the key
        end = ((lead + len(raw)) // 3) * 4  # the last full group holds only key bytes
        core = encoded[start:end]
        if len(core) >= MIN_SECRET_CHARS:
            cores += [core, core.replace("+", "-").replace("/", "_")]
    return cores


def secret_patterns(secret: str) -> re.Pattern[str]:
    """One pattern matching ``secret`` in every encoding the module docstring lists."""
    gap = f"[{INVISIBLE}]*"
    plain = gap.join(_char(ch) for ch in secret)
    encoded = "|".join(re.escape(c) for c in dict.fromkeys(_base64_cores(secret)))
    return re.compile(f"(?i:{plain})" + (f"|{encoded}" if encoded else ""))


class Redactor:
    """Replaces each configured secret value, in every encoding :func:`secret_patterns` knows, by
    ``[redacted]`` (longest first)."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        values = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}
        self.secrets = tuple(sorted(values, key=len, reverse=True))
        self.patterns = tuple(secret_patterns(s) for s in self.secrets)
        self.pieces = tuple(
            (_piece(s[:cut]), _piece(s[cut:]))
            for s in self.secrets
            for cut in range(MIN_PIECE_CHARS, len(s) - MIN_PIECE_CHARS + 1)
        )

    def __bool__(self) -> bool:
        return bool(self.secrets)

    @overload
    def text(self, value: str) -> str: ...
    @overload
    def text(self, value: None) -> None: ...
    def text(self, value: str | None) -> str | None:
        """``value`` with every secret masked (None stays None)."""
        if value is None or not self.secrets:
            return value
        for pattern in self.patterns:
            value = pattern.sub(MASK, value)
        return value

    def split(self, first: str, second: str) -> tuple[str, str]:
        """``first`` and ``second`` with a key cut in two, its head (at least
        ``MIN_PIECE_CHARS``) in ``first`` and the rest of it in ``second``, masked on both sides
        (each is also redacted on its own: ``text``)."""
        for head, tail in self.pieces:
            if head.search(first) and tail.search(second):
                first, second = head.sub(MASK, first), tail.sub(MASK, second)
        return first, second

    def reply(self, reply: object) -> object:
        """A handler's reply with every secret removed from its text (other replies unchanged)."""
        if not self.secrets:
            return reply
        if isinstance(reply, Completion):
            text, reasoning = self.text(reply.text), self.text(reply.reasoning)
            if text is not None and reasoning is not None:
                reasoning, text = self.split(reasoning, text)
                text, reasoning = self.split(text, reasoning)
            return dataclasses.replace(reply, text=text, reasoning=reasoning)
        if isinstance(reply, Failure):
            return dataclasses.replace(reply, message=self.text(reply.message))
        return reply


NO_SECRETS = Redactor()
