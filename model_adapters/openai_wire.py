"""What the openai client and OpenAI-compatible servers say, in our words.

- ``backend_error``: the one boundary where the client's exceptions (after its retries) become
  ``model_adapters.errors``;
- ``openai_shaped``: a server's 2xx reply that is not OpenAI-shaped (not JSON, no choices, a
  router's 200 carrying an ``error``) becomes the error status it stands for, so the client
  retries it like any 5xx; ``attempt_failure`` names each attempt's outcome for endpoint health
  and accounting;
- ``completion_of``: the typed reply (text, separately returned reasoning, token usage).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion
from openai.types.completion_usage import CompletionUsage

from model_adapters.contracts import Completion, TokenUsage
from model_adapters.errors import BackendError, PermanentBackendError, Timeout, TransientBackendError
from model_adapters.retry import retry_after_seconds
from model_adapters.transport import QUOTA_CODES, MalformedReply, Scrubber, body_error_code, error_for_status

_MALFORMED = ("x-edct-reply", "malformed")
"""Marks a 502 that ``openai_shaped`` made of an unreadable 2xx reply."""


def backend_error(exc: Exception, what: str, scrub: Scrubber, *, key_env: str | None = None) -> BackendError:
    """The openai client's error (after its retries) as ours; the message is scrubbed.

    ``APITimeoutError`` → ``Timeout``; ``APIConnectionError`` (refused, reset, dropped) →
    ``TransientBackendError``; ``APIStatusError`` by status (``RateLimitError`` → ``RateLimited``
    with the server's Retry-After, ``AuthenticationError`` / ``PermissionDeniedError`` name the
    key's variable, ``BadRequestError`` … → ``PermanentBackendError``), a reply that was not
    OpenAI-shaped → ``MalformedReply``; anything else the client raises → ``PermanentBackendError``.
    """
    if isinstance(exc, BackendError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return Timeout(f"{what}: timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {scrub(str(cause))[:200]}" if cause else scrub(exc.message)
        return TransientBackendError(f"{what}: connection failed ({detail})")
    if isinstance(exc, openai.APIStatusError):
        message = exc.body.get("message") if isinstance(exc.body, Mapping) else None
        detail = scrub(str(message if message is not None else exc.message))[:300]
        if exc.response.headers.get(_MALFORMED[0]) == _MALFORMED[1]:
            return MalformedReply(f"{what}: {detail}")
        return error_for_status(
            exc.status_code,
            f"{what}: HTTP {exc.status_code}" + (f": {detail}" if detail else ""),
            retry_after=retry_after_seconds(exc.response.headers),
            key_env=key_env,
            code=exc.code or (exc.type if isinstance(exc.type, str) else None),
        )
    return PermanentBackendError(f"{what}: {type(exc).__name__}: {scrub(str(exc))[:300]}")


def attempt_failure(response: httpx2.Response | None, error: Exception | None) -> str | None:
    """The error kind of one attempt on the wire (``None``: it succeeded), for health and accounting."""
    if error is not None or response is None:
        return Timeout.kind if isinstance(error, httpx2.TimeoutException) else TransientBackendError.kind
    if response.is_success:
        return None
    if response.headers.get(_MALFORMED[0]) == _MALFORMED[1]:
        return MalformedReply.kind
    return error_for_status(response.status_code, "").kind


def openai_shaped(response: httpx2.Response) -> httpx2.Response:
    """A 2xx chat reply as the openai client can read it, or the error status it stands for.

    A 429 whose code says the quota is exhausted (``insufficient_quota``) is marked
    ``x-should-retry: false``: the openai client retries every other 429 by itself, and no retry
    refills a balance (``backend_error`` then stops the role: ``ProviderStop``)."""
    if response.status_code == 429 and _quota_code(response) in QUOTA_CODES:
        headers = {k: v for k, v in response.headers.items() if k.lower() != "x-should-retry"}
        return httpx2.Response(429, headers={**headers, "x-should-retry": "false"}, content=response.content)
    if not response.is_success:
        return response
    try:
        data = json.loads(response.content)
    except ValueError:
        return _malformed(response, f"reply is not valid JSON ({len(response.content)} bytes)")
    if isinstance(data, dict) and data.get("error") and not data.get("choices"):  # routers do this
        error = data["error"]
        code = error.get("code") if isinstance(error, Mapping) else None
        status = code if isinstance(code, int) and 400 <= code < 600 else 502
        body = data if isinstance(error, Mapping) else {"error": {"message": str(error)}}
        return httpx2.Response(status, json=body)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _malformed(response, "reply has no choices")
    return response


def _quota_code(response: httpx2.Response) -> str | None:
    try:
        response.read()
        return body_error_code(json.loads(response.content))
    except ValueError:
        return None


def _malformed(response: httpx2.Response, message: str) -> httpx2.Response:
    return httpx2.Response(502, headers=[_MALFORMED], json={"error": {"message": message}})


def completion_of(reply: ChatCompletion) -> Completion:
    """The first choice's text, its separately returned reasoning, token usage and finish reason.

    A ``refusal`` without content (OpenAI's structured outputs) becomes the text with the finish
    reason ``content_filter``, so the parsers record it as refused.
    """
    choice = reply.choices[0]
    message = choice.message
    content: Any = message.content
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    finish_reason = choice.finish_reason
    if content is None:
        content = message.refusal or ""
        if message.refusal:  # the model declined (structured outputs say so in ``refusal``)
            finish_reason = "content_filter"
    reasoning = extra_field(message, "reasoning_content") or extra_field(message, "reasoning")
    return Completion(
        text=str(content),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning.strip() else None,
        usage=token_usage(reply.usage),
        finish_reason=str(finish_reason) if finish_reason else None,
    )


def token_usage(usage: CompletionUsage | None) -> TokenUsage | None:
    if usage is None:
        return None
    details = usage.completion_tokens_details
    return TokenUsage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        reasoning_tokens=(details.reasoning_tokens if details is not None else None) or 0,
    )


def extra_field(model: Any, name: str) -> Any:
    """A field the server sent beyond the OpenAI schema (``reasoning_content``, ``usage.cost``…)."""
    extra = getattr(model, "model_extra", None) or {}
    return extra.get(name)
