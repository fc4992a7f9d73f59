"""What reaches the annotation API's handlers: small, finite JSON from the server's own page.

An ASGI middleware in front of the application (pure ASGI, so a body is never read twice):

- a write (any method but GET/HEAD/OPTIONS) whose ``Origin`` is not the server's own origin, or
  whose ``Sec-Fetch-Site`` says another site sent it, is refused with 403 before its body is read.
  ``Host`` is checked by ``TrustedHostMiddleware``; ``Origin`` is what stops a page on another
  site from posting labels (a "simple" cross-site POST needs no preflight to be *sent*);
- a body larger than :data:`MAX_BODY_BYTES` is refused with 413 (by ``Content-Length`` at once,
  else as soon as the streamed bytes pass the limit): nothing large is held in memory;
- a JSON body with ``NaN``, ``Infinity`` or a number too large for a float (``1e400``) is refused
  with 422 (Python's ``json`` would accept all three).

Replies never repeat the request body: a refused request is answered with what is wrong only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["MAX_BODY_BYTES", "WriteGuard"]

MAX_BODY_BYTES = 16 * 1024
"""Largest request body accepted (a label is about 150 bytes)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class _NotFinite(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"the number {text[:20]} is too large")
    return value


def check_json(body: bytes) -> str | None:
    """Why ``body`` is not acceptable JSON (non-finite numbers included), or None."""
    try:
        json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
    except _NotFinite as exc:
        return str(exc)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"the body is not JSON ({type(exc).__name__})"
    return None


async def _reply(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"cache-control", b"no-store"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class WriteGuard:
    """The middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self._foreign(headers, scope)
        if refused:
            await _reply(send, 403, refused)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _reply(send, 413, f"the request body is larger than {self.max_body} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await _reply(send, 413, f"the request body is larger than {self.max_body} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if "json" in headers.get("content-type", ""):
            problem = check_json(body)
            if problem is not None:
                await _reply(send, 422, problem)
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _foreign(headers: dict[str, str], scope: Scope) -> str | None:
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return "writes are accepted only from the annotation page itself (Sec-Fetch-Site)"
        origin = headers.get("origin")
        if origin is None:
            return None  # not a browser (curl, scripts): Host is checked separately
        host = headers.get("host", "")
        own = {f"{scope.get('scheme', 'http')}://{host}".lower()}
        if origin.lower() not in own:
            return "writes are accepted only from the annotation page itself (Origin)"
        return None
