"""What the HTTP image editors share: one retried, mapped, bounded HTTP call, and editor accounting.

``HttpCaller.request`` sends one request with the retry policy (429 with Retry-After, 5xx,
timeouts and dropped connections are retried) and maps failures into ``model_adapters.errors``.
A *paid* request (``paid=True``: a submit the provider bills on acceptance) is retried only where
the provider certainly did not take it — a 429, or a connection that was never made (connect
error or connect/pool timeout). A 5xx or a read timeout after the request was sent may mean the
job was created and billed, so it is never re-sent: ``SubmitUncertain`` says so (BFL's official
client, ``src/bfl/_transport.py``, follows the same rule).
``EditorUsage`` counts edits, refusals, resizes and the cost the provider reports.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
from PIL import Image
from pydantic import Field

from model_adapters.cost_ceiling import PaidOptions
from model_adapters.endpoints import Endpoint, EndpointPool
from model_adapters.errors import (
    BackendError,
    EditRefused,
    OptionsError,
    PermanentBackendError,
    RateLimited,
)
from model_adapters.images import match_size
from model_adapters.retry import RetryPolicy
from model_adapters.transport import Scrubber, json_body, map_status, map_transport_error

_UNCERTAIN = "the provider may have accepted (and billed) it, so it is not sent again"


class EditorHttpOptions(PaidOptions):
    """What every HTTP image editor takes: the wire and its retries (and the cost ceiling)."""

    api_key_env: str | None = Field(None, description="The environment variable holding the key.")
    base_url: str | None = Field(None, description="The provider's API root.")
    concurrency: int | None = Field(None, description="Edits in flight for this role (default per provider).")
    timeout_s: float | None = Field(None, description="Seconds per HTTP request (default per provider).")
    max_retries: int = Field(6, description="Retries of a failed request (429, 5xx, timeouts).")
    backoff_base_s: float = Field(1.0, description="First retry wait; doubles up to backoff_max_s.")
    backoff_max_s: float = Field(60.0, description="Longest retry wait.")


class SubmitUncertain(PermanentBackendError):
    """A paid submit got no usable answer after it was sent (5xx, read timeout, dropped reply):
    the provider may have accepted and billed it, so it is not re-sent."""

    kind = "submit_uncertain"


_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""httpx errors raised before a request reached the server (a paid request may be retried)."""


class HttpCaller:
    """One retried, mapped, bounded HTTP call. With ``pool`` (several base URLs, ``EndpointPool``)
    every attempt whose URL lies under the first base URL goes to the endpoint the pool picks —
    the same rotation, dead-endpoint removal, cool-down and health check as ``openai-chat``
    (``GET <base>/<health_path>``, with ``health_headers``); other URLs (a result download from a
    CDN) go where they point."""

    def __init__(
        self,
        *,
        concurrency: int = 4,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        secrets: tuple[str | None, ...] = (),
        key_env: str | None = None,
        transport: httpx.BaseTransport | None = None,
        pool: EndpointPool | None = None,
        health_path: str = "models",
        health_headers: Mapping[str, str] | None = None,
    ) -> None:
        if concurrency < 1:
            raise OptionsError("concurrency must be >= 1")
        self.pool = pool
        self.health_path = health_path.strip("/")
        self.health_headers = dict(health_headers or {})
        if pool is not None:
            pool.health = self.healthy
        self.retry = retry or RetryPolicy()
        self.scrub = Scrubber(secrets)
        self.key_env = key_env
        self._slots = threading.BoundedSemaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
        self.client = httpx.Client(
            limits=limits,
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            transport=transport,
            follow_redirects=False,
        )
        self.on_retry: Callable[[BackendError, float], None] | None = None

    @classmethod
    def from_options(
        cls,
        options: Mapping[str, Any],
        key: str | None,
        *,
        timeout_s: float,
        sleep: Callable[[float], None] = time.sleep,
        concurrency: int = 4,
    ) -> HttpCaller:
        """The caller a remote editor's options describe (``concurrency`` and ``timeout_s`` unless set)."""
        return cls(
            concurrency=int(options.get("concurrency", concurrency)),
            timeout_s=float(options.get("timeout_s", timeout_s)),
            retry=retry_policy(options, sleep),
            secrets=(key,),
            key_env=options.get("api_key_env"),
        )

    def request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        """A 2xx response, after retries; raises ``BackendError``."""

        return self.retry.call(lambda: self._once(method, url, what, **kwargs), on_retry=self.on_retry)

    def request_json(self, method: str, url: str, what: str, *, paid: bool = False, **kwargs: Any) -> Any:
        """Like ``request`` but decodes the JSON reply inside the retried attempt (a malformed
        reply is retried like a 5xx). ``paid``: see the module docstring (never re-sent once it
        may have been accepted)."""

        def attempt() -> Any:
            response = self._once(method, url, what, paid=paid, **kwargs)
            if not paid:
                return json_body(response, what)
            try:
                return json_body(response, what)
            except BackendError as exc:
                raise SubmitUncertain(f"{exc}; {_UNCERTAIN}") from None

        return self.retry.call(attempt, on_retry=self.on_retry)

    def _once(self, method: str, url: str, what: str, *, paid: bool = False, **kwargs: Any) -> httpx.Response:
        with self._slots:
            endpoint = None
            primary = self.pool.endpoints[0].url if self.pool is not None else None
            if self.pool is not None and primary is not None and url.startswith(primary):
                endpoint = self.pool.acquire()  # TransientBackendError when every endpoint is out
                url = endpoint.url + url[len(primary) :]
            failure: str | None = None
            try:
                try:
                    response = self.client.request(method, url, **kwargs)
                except httpx.HTTPError as exc:
                    error = map_transport_error(exc, what, self.scrub)
                    failure = error.kind
                    if paid and not isinstance(exc, _NEVER_SENT):
                        raise SubmitUncertain(f"{error}; {_UNCERTAIN}") from None
                    raise error from None
                if response.status_code >= 400:
                    error = map_status(response, what, self.scrub, key_env=self.key_env)
                    failure = error.kind
                    if paid and error.retryable and not isinstance(error, RateLimited):
                        raise SubmitUncertain(f"{error}; {_UNCERTAIN}")
                    raise error
                return response
            finally:
                if endpoint is not None:
                    self.pool.release(endpoint, failure)  # type: ignore[union-attr]

    def healthy(self, endpoint: Endpoint) -> bool:
        """``GET <base>/<health_path>`` (with the key) answers below 400 within 10 s."""
        url = f"{endpoint.url}/{self.health_path}" if self.health_path else endpoint.url
        try:
            response = self.client.get(url, headers=self.health_headers, timeout=10.0)
        except httpx.HTTPError:
            return False
        return response.status_code < 400

    def endpoint_stats(self) -> list[dict[str, Any]] | None:
        """Per-endpoint requests, errors, liveness and removals (None without a pool)."""
        return None if self.pool is None else self.pool.stats()

    def close(self) -> None:
        self.client.close()


class EditorUsage:
    @classmethod
    def of(cls, caller: HttpCaller) -> EditorUsage:
        """Usage counters of an editor whose HTTP calls go through ``caller`` (its retries counted)."""
        usage = cls()
        caller.on_retry = lambda _exc, _wait: usage.add("retries")
        return usage

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = {
            "edits": 0,
            "refused": 0,
            "failures": 0,
            "retries": 0,
            "resubmits": 0,
            "resized": 0,
            "polls": 0,
        }
        self.cost: float | None = None
        self.tokens = {"input_tokens": 0, "output_tokens": 0}

    def add(self, field: str, n: int = 1) -> None:
        with self._lock:
            self.counts[field] = self.counts.get(field, 0) + n  # "lookups" only when one happened

    @contextlib.contextmanager
    def counting_failures(self) -> Iterator[None]:
        """Count a refusal or another backend error raised inside the block, and re-raise it."""
        try:
            yield
        except EditRefused:
            self.add("refused")
            raise
        except BackendError:
            self.add("failures")
            raise

    def add_cost(self, usd: object) -> None:
        if isinstance(usd, (int, float)) and not isinstance(usd, bool):
            with self._lock:
                self.cost = (self.cost or 0.0) + float(usd)

    def add_tokens(self, usage: object) -> None:
        if isinstance(usage, Mapping):
            with self._lock:
                for k in self.tokens:
                    v = usage.get(k)
                    if isinstance(v, int):
                        self.tokens[k] += v

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                **self.counts,
                **self.tokens,
                "cost_usd": None if self.cost is None else round(self.cost, 6),
            }


def retry_policy(
    options: Mapping[str, Any], sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None
) -> RetryPolicy:
    return RetryPolicy(
        max_retries=int(options.get("max_retries", 6)),
        base_delay=float(options.get("backoff_base_s", 1.0)),
        max_delay=float(options.get("backoff_max_s", 60.0)),
        sleep=sleep,
        rng=rng or random.Random(),
    )


def finish(edited: Image.Image, original: Image.Image, usage: EditorUsage) -> Image.Image:
    """The editor output at the original's size (the resize is recorded in ``info`` and counted)."""
    out = match_size(edited, original)
    if out is not edited:
        usage.add("resized")
    usage.add("edits")
    return out
