"""Secrets never leave through a reply: the one place replies enter the engine removes them.

A key reaches a backend from an environment variable (``api_key_env: NAME``); the adapters
already scrub it from their error messages. An endpoint can also *echo* it in a successful
reply (a proxy that repeats the request headers, a model asked to print its configuration); the
reply then flows into ``samples.jsonl``, the stage cache, the audit pages and a published bundle.
So every text reply (:class:`Completion`: text and separate reasoning) and every failure message
passes through :class:`Redactor` in the request handlers, before it is cached or recorded: each
configured secret value is replaced by ``[redacted]`` wherever it appears.

Values shorter than :data:`MIN_SECRET_CHARS` are not redacted (no real API key is that short, and
replacing a 3-letter value would mangle ordinary text).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from edct_task.core.requests import Failure
from model_adapters.contracts import Completion

MIN_SECRET_CHARS = 8
MASK = "[redacted]"


class Redactor:
    """Replaces each configured secret value by ``[redacted]`` (longest first)."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        values = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}
        self.secrets = tuple(sorted(values, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, value: str | None) -> str | None:
        if value is None or not self.secrets:
            return value
        for s in self.secrets:
            if s in value:
                value = value.replace(s, MASK)
        return value

    def reply(self, reply: object) -> object:
        """A handler's reply with every secret removed from its text (other replies unchanged)."""
        if not self.secrets:
            return reply
        if isinstance(reply, Completion):
            text, reasoning = self.text(reply.text), self.text(reply.reasoning)
            return dataclasses.replace(reply, text=text, reasoning=reasoning)
        if isinstance(reply, Failure):
            return dataclasses.replace(reply, message=self.text(reply.message))
        return reply


NO_SECRETS = Redactor()
