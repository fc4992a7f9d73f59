"""OpenAI-compatible chat completions: target VLMs and text LLMs on vLLM, SGLang, OpenRouter, OpenAI.

One ``ChatClient`` per role holds the endpoints, a thread-safe httpx connection pool per endpoint,
a concurrency bound, the retry policy and the usage meter. ``OpenAIVisionChat`` (target) answers a
batch of conversations concurrently; ``OpenAIText`` (extractor, judge, edit parser) answers one
prompt. Images go as base64 PNG data-URI ``image_url`` parts.

Thinking: a reply's reasoning (``reasoning_content`` from vLLM/SGLang/DeepSeek, ``reasoning``
from OpenRouter) is put in front of the answer as ``<think>…</think>`` so the reply keeps it and
the protocol's parsers strip it, exactly as for models that inline their thinking.

Options (``roles.<role>:`` in the run config)::

    model: Qwen/Qwen3-VL-8B-Instruct   # required
    base_url: http://node1:8000/v1     # or base_urls: [http://node1:8000/v1, http://node2:8000/v1]
    api_key_env: OPENROUTER_API_KEY    # optional; the key is read from this variable
    revision: null                     # recorded in the identity (e.g. the served HF revision)
    concurrency: 16                    # requests in flight for this role
    timeout_s: 600
    max_retries: 6
    backoff_base_s: 1.0
    backoff_max_s: 60.0
    max_tokens_field: max_tokens       # or max_completion_tokens (OpenAI reasoning models)
    max_tokens_cap: null               # clamp the engine's max tokens to the server's limit
    omit: []                           # decoding fields not to send, e.g. [temperature, top_p]
    extra_body: {}                     # merged into the request body, e.g.
                                       # {chat_template_kwargs: {enable_thinking: true}}
    headers: {}                        # extra non-secret headers (e.g. OpenRouter's X-Title)
    prices: {input_per_million: 0.2, output_per_million: 0.6}
    dead_after: 3                      # consecutive endpoint failures before leaving the rotation
    cooldown_s: 30                     # before a health check (GET <base>/<health_path>)
    health_path: models
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.endpoints import Endpoint, EndpointPool
from model_adapters.errors import BackendError, BadInput, OptionsError, PermanentBackendError
from model_adapters.images import data_uri
from model_adapters.retry import RetryPolicy
from model_adapters.transport import (
    MalformedReply,
    Scrubber,
    check_base_url,
    check_headers,
    check_options,
    endpoint_outcome,
    json_body,
    map_status,
    map_transport_error,
    secret_from_env,
)
from model_adapters.usage import Prices, UsageMeter

OPTIONS = frozenset(
    {
        "model",
        "base_url",
        "base_urls",
        "api_key_env",
        "revision",
        "concurrency",
        "timeout_s",
        "max_retries",
        "backoff_base_s",
        "backoff_max_s",
        "max_tokens_field",
        "max_tokens_cap",
        "omit",
        "extra_body",
        "headers",
        "prices",
        "dead_after",
        "cooldown_s",
        "health_path",
    }
)
_DECODING_FIELDS = ("temperature", "top_p", "seed")


@dataclass(frozen=True)
class ChatSettings:
    """What changes the output (part of the identity) — never URLs, keys or concurrency."""

    model: str
    revision: str | None = None
    max_tokens_field: str = "max_tokens"
    max_tokens_cap: int | None = None
    omit: tuple[str, ...] = ()
    extra_body: Mapping[str, Any] | None = None

    def identity(self, backend: str) -> dict[str, Any]:
        return {
            "backend": backend,
            "model": self.model,
            "revision": self.revision,
            "max_tokens_field": self.max_tokens_field,
            "max_tokens_cap": self.max_tokens_cap,
            "omit": list(self.omit),
            "extra_body": copy.deepcopy(dict(self.extra_body or {})),
        }


class ChatClient:
    """The wire: POST ``<base>/chat/completions`` with retries, balancing and accounting."""

    def __init__(
        self,
        settings: ChatSettings,
        base_urls: Sequence[str],
        *,
        api_key: str | None = None,
        key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        concurrency: int = 16,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        prices: Prices | None = None,
        dead_after: int = 3,
        cooldown_s: float = 30.0,
        health_path: str = "models",
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise OptionsError("concurrency must be >= 1")
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.usage = UsageMeter(prices)
        self.concurrency = concurrency
        self.key_env = key_env
        self.scrub = Scrubber([api_key])
        self._headers = {"Content-Type": "application/json", **dict(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._health_path = health_path.strip("/")
        self._slots = threading.BoundedSemaphore(concurrency)
        self.pool = EndpointPool(
            base_urls, dead_after=dead_after, cooldown_s=cooldown_s, health=self._healthy, clock=clock
        )
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self._clients = {
            id(e): httpx.Client(limits=limits, timeout=timeout, headers=self._headers, transport=transport)
            for e in self.pool.endpoints
        }
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # -- one request ------------------------------------------------------------------------------
    def chat(self, messages: list[dict[str, Any]], params: GenerationParams, *, images: int = 0) -> str:
        """The reply text (reasoning prefixed as ``<think>…</think>``); raises ``BackendError``."""
        return reply_text(self.send(self.request_body(messages, params), images=images))

    def send(self, body: Mapping[str, Any], *, images: int = 0) -> dict[str, Any]:
        """POST one request body with retries; the decoded reply (it has at least one choice)."""
        payload = json.dumps(body).encode("utf-8")

        def on_retry(exc: BackendError, _wait: float) -> None:
            self.usage.record_retry(exc.kind)

        try:
            data = self.retry.call(lambda: self._attempt(payload), on_retry=on_retry)
        except BackendError as exc:
            self.usage.record_failure(exc.kind)
            raise
        self.usage.record_success(data.get("usage"), images=images)
        return data

    def request_body(self, messages: list[dict[str, Any]], params: GenerationParams) -> dict[str, Any]:
        s = self.settings
        max_tokens = (
            params.max_new_tokens
            if s.max_tokens_cap is None
            else min(params.max_new_tokens, s.max_tokens_cap)
        )
        body: dict[str, Any] = {"model": s.model, "messages": messages, s.max_tokens_field: max_tokens}
        decoding = {"temperature": params.temperature, "top_p": params.top_p, "seed": params.seed}
        body.update({k: v for k, v in decoding.items() if k not in s.omit})
        for key, value in (s.extra_body or {}).items():
            body[key] = copy.deepcopy(value)
        return body

    def _attempt(self, payload: bytes) -> dict[str, Any]:
        what = f"chat completion ({self.settings.model})"
        self.usage.record_attempt()
        with self._slots:
            endpoint = self.pool.acquire()
            error: BackendError | None = None
            try:
                try:
                    response = self._clients[id(endpoint)].post(
                        f"{endpoint.url}/chat/completions", content=payload
                    )
                except httpx.HTTPError as exc:
                    raise map_transport_error(exc, what, self.scrub) from None
                if response.status_code >= 400:
                    raise map_status(response, what, self.scrub, key_env=self.key_env)
                data = json_body(response, what)
                if not isinstance(data, dict):
                    raise MalformedReply(f"{what}: reply is not a JSON object")
                if "error" in data and not data.get("choices"):  # some routers answer 200 with an error
                    raise map_status(
                        httpx.Response(_error_status(data), json=data), what, self.scrub, key_env=self.key_env
                    )
                choices = data.get("choices")
                if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                    raise MalformedReply(f"{what}: reply has no choices")
                return data
            except BackendError as exc:
                error = exc
                raise
            finally:
                self.pool.release(endpoint, endpoint_outcome(error))

    def _healthy(self, endpoint: Endpoint) -> bool:
        url = f"{endpoint.url}/{self._health_path}" if self._health_path else endpoint.url
        try:
            return self._clients[id(endpoint)].get(url, timeout=10.0).status_code < 400
        except httpx.HTTPError:
            return False

    # -- batches --------------------------------------------------------------------------------
    def map(self, fn: Callable[[Any], str], items: Sequence[Any]) -> list[str | Exception]:
        """``fn`` over ``items`` with up to ``concurrency`` in flight; errors returned in place."""
        if len(items) <= 1:
            return [_capture(fn, item) for item in items]
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="edct-http")
        return list(self._executor.map(lambda item: _capture(fn, item), items))

    def stats(self) -> dict[str, Any]:
        return {**self.usage.as_dict(), "endpoints": self.pool.stats()}

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        for client in self._clients.values():
            client.close()


def reply_text(data: Mapping[str, Any]) -> str:
    """The first choice's text, with its reasoning (if any) in front as ``<think>…</think>``."""
    message = data["choices"][0].get("message") or {}
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        content = message.get("refusal") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip() and "<think>" not in content:
        content = f"<think>{reasoning}</think>\n{content}"
    return str(content)


def _capture(fn: Callable[[Any], str], item: Any) -> str | Exception:
    try:
        return fn(item)
    except BackendError as exc:
        return exc
    except Exception as exc:  # a bug or an unexpected library error: still one item's failure
        return PermanentBackendError(f"{type(exc).__name__}: {exc}")


def _error_status(data: Mapping[str, Any]) -> int:
    err = data.get("error")
    code = err.get("code") if isinstance(err, Mapping) else None
    return code if isinstance(code, int) and 400 <= code < 600 else 502


def conversation_messages(conversation: Sequence[ChatMessage]) -> tuple[list[dict[str, Any]], int]:
    """OpenAI ``messages`` for a conversation, and the number of images in it."""
    messages: list[dict[str, Any]] = []
    n_images = 0
    for m in conversation:
        if m.images:
            if m.role != "user":
                raise PermanentBackendError(f"images are only sent in user messages, not {m.role}")
            parts: list[dict[str, Any]] = [
                {"type": "image_url", "image_url": {"url": data_uri(img)}} for img in m.images
            ]
            parts.append({"type": "text", "text": m.text})
            messages.append({"role": m.role, "content": parts})
            n_images += len(m.images)
        else:
            messages.append({"role": m.role, "content": m.text})
    return messages, n_images


class _ChatBackend:
    backend = "openai-chat"

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.name = f"{self.backend}:{client.settings.model}"

    def identity(self) -> dict[str, Any]:
        return self.client.settings.identity(self.backend)

    def usage(self) -> dict[str, Any]:
        """Tokens, cost, retries and per-endpoint counts of this role so far (JSON-ready)."""
        return {"backend": self.backend, "model": self.client.settings.model, **self.client.stats()}

    def close(self) -> None:
        self.client.close()


class OpenAIVisionChat(_ChatBackend):
    """A target VLM behind an OpenAI-compatible server (VisionChatModel)."""

    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]:
        def one(conversation: Sequence[ChatMessage]) -> Completion:
            messages, n_images = conversation_messages(conversation)
            return Completion(self.client.chat(messages, params, images=n_images))

        return self.client.map(one, list(conversations))


class OpenAIText(_ChatBackend):
    """A text LLM behind an OpenAI-compatible server (TextModel)."""

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        if not prompt.strip():
            raise BadInput("empty prompt")
        return Completion(self.client.chat([{"role": "user", "content": prompt}], params))


def client_from_options(
    options: Mapping[str, Any],
    backend: str = "openai-chat",
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ChatClient:
    """Validate the role's options and build its client."""
    check_options(options, OPTIONS, backend)
    model = options.get("model")
    if not isinstance(model, str) or not model:
        raise OptionsError(f"backend {backend!r} needs model: <model id as the server names it>")
    if ("base_url" in options) == ("base_urls" in options):
        raise OptionsError(f"backend {backend!r}: give exactly one of base_url or base_urls")
    urls = options["base_urls"] if "base_urls" in options else [options["base_url"]]
    if not isinstance(urls, list) or not urls:
        raise OptionsError("base_urls must be a non-empty list of URLs")
    urls = [check_base_url(u, backend) for u in urls]
    field = options.get("max_tokens_field", "max_tokens")
    if field not in ("max_tokens", "max_completion_tokens"):
        raise OptionsError("max_tokens_field must be max_tokens or max_completion_tokens")
    omit = tuple(options.get("omit") or ())
    if any(o not in _DECODING_FIELDS for o in omit):
        raise OptionsError(f"omit may list only {', '.join(_DECODING_FIELDS)}")
    extra = options.get("extra_body") or {}
    if not isinstance(extra, Mapping) or {"model", "messages"} & set(extra):
        raise OptionsError("extra_body must be a mapping and may not set model or messages")
    cap = options.get("max_tokens_cap")
    settings = ChatSettings(
        model=model,
        revision=options.get("revision"),
        max_tokens_field=field,
        max_tokens_cap=None if cap is None else int(cap),
        omit=omit,
        extra_body=dict(extra),
    )
    key_env = options.get("api_key_env")
    retry = RetryPolicy(
        max_retries=int(options.get("max_retries", 6)),
        base_delay=float(options.get("backoff_base_s", 1.0)),
        max_delay=float(options.get("backoff_max_s", 60.0)),
        sleep=sleep,
        rng=rng or random.Random(),
    )
    return ChatClient(
        settings,
        urls,
        api_key=secret_from_env(options, backend),
        key_env=key_env,
        headers=check_headers(options.get("headers"), backend),
        concurrency=int(options.get("concurrency", 16)),
        timeout_s=float(options.get("timeout_s", 600.0)),
        retry=retry,
        prices=Prices.from_options(options.get("prices")),
        dead_after=int(options.get("dead_after", 3)),
        cooldown_s=float(options.get("cooldown_s", 30.0)),
        health_path=str(options.get("health_path", "models")),
        clock=clock,
    )
