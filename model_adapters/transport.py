"""HTTP plumbing shared by the remote backends: credentials, error mapping, option checks.

Everything httpx raises or a server answers is mapped here, at the boundary, into the
``model_adapters.errors`` hierarchy (cf. ``httpx._exceptions``):

=====================================  ===========================================
402; 429 ``insufficient_quota``        ``ProviderStop``: no credits / quota exhausted, no retry fixes it
429                                    ``RateLimited`` (with the server's Retry-After)
408, 5xx, 520-599                      ``TransientBackendError`` (endpoint counted down)
timeouts                               ``Timeout``
connection refused / reset / dropped   ``TransientBackendError``
400, 404, 409, 422                     ``PermanentBackendError`` (413: ``BadInput``)
401, 403                               ``PermanentBackendError`` naming the key variable
=====================================  ===========================================

Secrets come only from environment variables named in the options (``api_key_env``) and are
scrubbed from every message built here, together with anything shaped like a key.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from model_adapters.errors import (
    BackendError,
    BadInput,
    OptionsError,
    PermanentBackendError,
    ProviderStop,
    RateLimited,
    Timeout,
    TransientBackendError,
)
from model_adapters.retry import retry_after_seconds
from model_adapters.secrets import is_secret_name

_KEYLIKE = re.compile(r"(?i)(bearer\s+\S+|\b(?:sk|rk|pk)-[A-Za-z0-9_*.\-]{6,}|\bAIza[0-9A-Za-z_\-]{10,})")


def check_options(options: Mapping[str, Any], allowed: Iterable[str], backend: str) -> None:
    extra = sorted(set(options) - set(allowed))
    if extra:
        raise OptionsError(
            f"backend {backend!r} does not take option(s) {', '.join(extra)} "
            f"(known: {', '.join(sorted(allowed))})"
        )


def secret_from_env(
    options: Mapping[str, Any],
    backend: str,
    *,
    option: str = "api_key_env",
    default_env: str | None = None,
    required: bool = False,
) -> str | None:
    """The secret in the environment variable the options name (never the value itself)."""
    name = options.get(option, default_env)
    if name is None:
        if required:
            raise OptionsError(f"backend {backend!r} needs a key: set {option}: NAME_OF_ENV_VARIABLE")
        return None
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise OptionsError(
            f"{option} must name an environment variable (like OPENAI_API_KEY), not hold a value"
        )
    value = os.environ.get(name)
    if not value:
        raise OptionsError(
            f"backend {backend!r}: environment variable {name} (from {option}) is not set or empty"
        )
    return value


def check_base_url(url: object, backend: str) -> str:
    """A base URL that carries no credentials (those go in environment variables)."""
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
        # never echo the value: a URL with a key in it (HTTPS://user:key@…) is exactly the mistake
        raise OptionsError(f"backend {backend!r}: base_url must be an http:// or https:// URL")
    parts = urllib.parse.urlsplit(url)
    query_keys = [k for k, _ in urllib.parse.parse_qsl(parts.query)]
    if parts.password or parts.username or any(is_secret_name(k) for k in query_keys):
        raise OptionsError(
            f"backend {backend!r}: base_url must not carry credentials (user info or key parameters); "
            "put the key in an environment variable and name it with api_key_env"
        )
    return url.rstrip("/")


def check_headers(headers: object, backend: str) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise OptionsError(f"backend {backend!r}: headers must be a mapping of name to value")
    bad = [k for k in headers if is_secret_name(k)]
    if bad:
        raise OptionsError(
            f"backend {backend!r}: header(s) {', '.join(bad)} look like credentials; use api_key_env instead"
        )
    return {str(k): str(v) for k, v in headers.items()}


class Scrubber:
    """Removes the configured secrets and key-shaped strings from text."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self.secrets = [s for s in secrets if s]

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "[redacted]")
        return _KEYLIKE.sub("[redacted]", text)


def map_transport_error(exc: httpx.HTTPError, what: str, scrub: Scrubber) -> BackendError:
    """An httpx exception (no response) as our error."""
    if isinstance(exc, httpx.TimeoutException):
        return Timeout(f"{what}: timed out ({type(exc).__name__})")
    if isinstance(exc, (httpx.TransportError, httpx.StreamError)):
        return TransientBackendError(
            f"{what}: connection failed ({type(exc).__name__}: {scrub(str(exc))[:200]})"
        )
    return TransientBackendError(f"{what}: {type(exc).__name__}: {scrub(str(exc))[:200]}")


def map_status(
    response: httpx.Response, what: str, scrub: Scrubber, *, key_env: str | None = None
) -> BackendError:
    """A non-2xx response as our error, with the server's message (scrubbed, truncated)."""
    detail = scrub(_error_message(response))[:300]
    return error_for_status(
        response.status_code,
        f"{what}: HTTP {response.status_code}" + (f": {detail}" if detail else ""),
        retry_after=retry_after_seconds(response.headers),
        key_env=key_env,
        code=error_code(response),
    )


QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
"""OpenAI's 429 error codes/types for a spent balance or quota: "You exceeded your current quota"."""


def error_for_status(
    status: int,
    text: str,
    *,
    retry_after: float | None = None,
    key_env: str | None = None,
    code: str | None = None,
) -> BackendError:
    """The error an HTTP status stands for (the table in this module's docstring); ``code`` is the
    body's ``error.code`` / ``error.type`` (OpenAI's ``insufficient_quota`` 429 is no rate limit)."""
    if status == 402:
        return ProviderStop(f"{text} (the provider says the account has no credits left)")
    if status == 429 and code in QUOTA_CODES:
        return ProviderStop(f"{text} (the provider says the quota is exhausted: {code})")
    if status == 429:
        return RateLimited(text, retry_after)
    if status == 408 or status >= 500:
        return TransientBackendError(text)
    if status == 413:
        return BadInput(text)
    if status in (401, 403):
        hint = f" (check the key in ${key_env})" if key_env else " (set api_key_env to the key's variable)"
        return PermanentBackendError(text + hint)
    return PermanentBackendError(text)


class MalformedReply(TransientBackendError):
    """The server answered 2xx with a body we cannot read; retried like a transient failure."""

    kind = "malformed_reply"


def json_body(response: httpx.Response, what: str) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        raise MalformedReply(f"{what}: reply is not valid JSON ({len(response.content)} bytes)") from None


def error_code(response: httpx.Response) -> str | None:
    """``error.code`` (else ``error.type``) of an OpenAI-style error body, if any."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        return None
    return body_error_code(body)


def body_error_code(body: object) -> str | None:
    err = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(err, Mapping):
        value = err.get("code") or err.get("type")
        return str(value) if value is not None else None
    return None


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        return response.text[:300].strip()
    if isinstance(body, Mapping):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, Mapping):
            return str(err.get("message") or err)
        if err is not None:
            return str(err)
    return str(body)[:300]
