"""OpenAI-compatible chat completions on the official ``openai`` client: vLLM, SGLang, OpenRouter, OpenAI.

One ``ChatClient`` per role holds an ``openai.OpenAI`` client (its retries with exponential
backoff honouring ``Retry-After`` / ``retry-after-ms``, its timeouts, its typed errors), the
endpoints behind it (``endpoints.RoutingTransport``), a concurrency bound and the usage meter.
``OpenAIVisionChat`` (target) answers a batch of conversations concurrently; ``OpenAIText``
(extractor, judge, edit parser) answers one prompt. Both return typed ``Completion`` replies.
Images go as base64 PNG data-URI ``image_url`` parts.

Errors: ``openai_wire.backend_error`` is the one boundary where the client's exceptions become
``model_adapters.errors``; replies that are not OpenAI-shaped are retried like a 5xx
(``openai_wire.openai_shaped``).

Thinking: reasoning the server returns separately (``reasoning_content`` from vLLM/SGLang/DeepSeek,
``reasoning`` from OpenRouter) goes into ``Completion.reasoning``; ``Completion.text`` is the
message content as received (inline ``<think>`` blocks are the protocol parsers' to strip).

Options (``roles.<role>:`` in the run config)::

    model: Qwen/Qwen3-VL-8B-Instruct   # required
    base_url: http://node1:8000/v1     # or base_urls: [http://node1:8000/v1, http://node2:8000/v1]
    api_key_env: OPENROUTER_API_KEY    # optional; the key is read from this variable
    revision: null                     # recorded in the identity (e.g. the served HF revision)
    concurrency: 16                    # requests in flight for this role
    timeout_s: 600
    max_retries: 6
    max_tokens_field: auto             # auto | max_tokens | max_completion_tokens (see below)
    max_tokens_cap: null               # clamp the engine's max tokens to the server's limit
    omit: []                           # decoding fields not to send, e.g. [temperature, top_p]
    extra_body: {}                     # merged into the request body, e.g.
                                       # {chat_template_kwargs: {enable_thinking: true}}
    headers: {}                        # extra non-secret headers (e.g. OpenRouter's X-Title)
    prices: {input_per_million: 0.2, output_per_million: 0.6}
    dead_after: 3                      # consecutive endpoint failures before leaving the rotation
    cooldown_s: 30                     # before a health check (GET <base>/<health_path>)
    health_path: models
    structured: auto                   # auto | json_schema | off: the reply's JSON schema (see below)
    max_cost_usd: null                 # the run's ceiling on this role's cost (model_adapters.cost_ceiling)

The token limit's field: ``auto`` (the default) sends ``max_completion_tokens`` to OpenAI's
reasoning families named as OpenAI names them (``o1``, ``o3``, ``o4-mini``, ``gpt-5*``: the SDK says
``max_tokens`` "is now deprecated in favor of max_completion_tokens, and is not compatible with
o-series models") and ``max_tokens`` to every other model (vLLM, SGLang, OpenRouter ids such as
``openai/o3``, which the router translates). The identity records the field sent.

Structured replies: the engine attaches a JSON schema to every extractor, edit-parser and judge
request (``edct_task.reply_schemas``; reasons before scores). ``json_schema`` sends it as
``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``,
which OpenAI, OpenRouter and vLLM's structured outputs accept; a server that rejects it fails the
call. ``auto`` (the default) sends it too, but a server that rejects it (HTTP 400/422 naming
``response_format``, ``json_schema``, structured or guided output) has declared that it does not
support it: the request is resent as plain text and the role stays on text for the rest of the run
(logged once). ``off`` never sends it. The target role never gets a schema.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion
from pydantic import Field, model_validator

from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.cost_ceiling import PaidOptions
from model_adapters.endpoints import EndpointPool, RoutingTransport
from model_adapters.errors import (
    BackendError,
    BadInput,
    OptionsError,
    PermanentBackendError,
)
from model_adapters.images import data_uri
from model_adapters.openai_wire import (
    attempt_failure,
    backend_error,
    completion_of,
    extra_field,
    openai_shaped,
    token_usage,
)
from model_adapters.transport import (
    Scrubber,
    check_base_url,
    check_headers,
    secret_from_env,
)
from model_adapters.usage import Prices, UsageMeter
from verification.backends import check_options

log = logging.getLogger(__name__)
_SCHEMA_WORDS = ("response_format", "json_schema", "structured", "guided", "grammar", "schema")

STRUCTURED_MODES = ("auto", "json_schema", "off")
RETIRED = ("backoff_base_s", "backoff_max_s")
"""Options of the hand-written client; the openai client backs off by itself."""


class ChatOptions(PaidOptions):
    """``openai-chat``: an OpenAI-compatible chat-completions server (vLLM, SGLang, OpenRouter, OpenAI)."""

    model: str | None = Field(None, description="The model id as the server names it (required).")
    base_url: str | None = Field(None, description="The server, e.g. http://node1:8000/v1 (or base_urls).")
    base_urls: list[str] | None = Field(None, description="Several servers of one model, rotated.")
    api_key_env: str | None = Field(None, description="The environment variable holding the key.")
    revision: str | None = Field(None, description="Recorded in the identity (e.g. the served HF revision).")
    concurrency: int = Field(16, description="Requests in flight for this role.")
    timeout_s: float = Field(600.0, description="Seconds per request.")
    max_retries: int = Field(6, description="Retries of a failed request (the openai client's backoff).")
    max_tokens_field: str = Field("auto", description="auto, max_tokens or max_completion_tokens.")
    max_tokens_cap: int | None = Field(
        None, description="Clamp the engine's max tokens to the server's limit."
    )
    omit: list[str] | None = Field(
        None, description="Decoding fields not to send (temperature, top_p, seed)."
    )
    extra_body: dict[str, Any] | None = Field(None, description="Merged into the request body.")
    headers: dict[str, Any] | None = Field(None, description="Extra non-secret headers (e.g. X-Title).")
    prices: dict[str, float] | None = Field(
        None, description="{input_per_million, output_per_million} in USD, where the server reports no cost."
    )
    dead_after: int = Field(3, description="Consecutive endpoint failures before leaving the rotation.")
    cooldown_s: float = Field(30.0, description="Seconds before a health check brings an endpoint back.")
    health_path: str = Field("models", description="GET <base>/<health_path> is the health check.")
    structured: str = Field("auto", description="auto, json_schema or off: the reply's JSON schema.")

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, options: Any) -> Any:
        for name in RETIRED:
            if isinstance(options, Mapping) and name in options:
                raise ValueError(
                    f"remove {name}: the openai client backs off by itself "
                    "(0.5 s doubling to 8 s, or the server's Retry-After)"
                )
        return options


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
    structured: str = "auto"
    require_parameters: bool = False
    """OpenRouter: a request with a JSON schema also sends ``provider: {require_parameters: true}``,
    so the router picks only providers that honour ``response_format`` (openrouter.ai/docs
    structured outputs, provider routing)."""

    def identity(self, backend: str) -> dict[str, Any]:
        return {
            "backend": backend,
            "model": self.model,
            "revision": self.revision,
            "max_tokens_field": self.max_tokens_field,
            "max_tokens_cap": self.max_tokens_cap,
            "omit": list(self.omit),
            "extra_body": copy.deepcopy(dict(self.extra_body or {})),
            "structured": self.structured,
            **({"require_parameters": True} if self.require_parameters else {}),
        }

    def response_format(self, params: GenerationParams) -> dict[str, Any] | None:
        """The ``response_format`` of a request: the reply's JSON schema, unless ``structured: off``."""
        schema = params.reply_schema
        if schema is None or self.structured == "off":
            return None
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.name, "schema": json.loads(schema.schema), "strict": True},
        }

    def request_fields(self, params: GenerationParams) -> dict[str, Any]:
        """The decoding fields of a request, as ``chat.completions.create`` arguments."""
        limit = params.max_new_tokens
        if self.max_tokens_cap is not None:
            limit = min(limit, self.max_tokens_cap)
        fields = {
            self.max_tokens_field: limit,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
        }
        return {k: v for k, v in fields.items() if k not in self.omit}


class ChatClient:
    """One role's wire: ``POST <base>/chat/completions`` through the openai client."""

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
        max_retries: int = 6,
        prices: Prices | None = None,
        dead_after: int = 3,
        cooldown_s: float = 30.0,
        health_path: str = "models",
        clock: Callable[[], float] = time.monotonic,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise OptionsError("concurrency must be >= 1")
        if max_retries < 0:
            raise OptionsError("max_retries must be >= 0")
        self.settings = settings
        self.concurrency = concurrency
        self.key_env = key_env
        self.what = f"chat completion ({settings.model})"
        self.scrub = Scrubber([api_key, *(headers or {}).values()])
        self.usage = UsageMeter(prices)
        self.pool = EndpointPool(base_urls, dead_after=dead_after, cooldown_s=cooldown_s, clock=clock)
        inner = transport or httpx2.HTTPTransport(
            limits=httpx2.Limits(
                max_connections=concurrency + len(base_urls), max_keepalive_connections=concurrency
            )
        )
        routed = RoutingTransport(
            self.pool,
            inner,
            concurrency=concurrency,
            classify=attempt_failure,
            review=openai_shaped,
            on_attempt=self.usage.record_attempt,
            health_path=health_path,
            health_headers={**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})},
        )
        timeout = httpx2.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self.openai = openai.OpenAI(
            api_key=api_key or "no-key",  # never sent: see _request_headers
            base_url=self.pool.endpoints[0].url,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=_default_headers(api_key, headers or {}),
            http_client=httpx2.Client(transport=routed, timeout=timeout, follow_redirects=False),
        )
        self._request_headers = {} if api_key else {"Authorization": openai.Omit()}
        self.schema_rejected = False
        """``structured: auto`` and the server rejected a JSON schema: text from now on."""
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # -- one request ------------------------------------------------------------------------------
    def chat(
        self,
        messages: list[dict[str, Any]],
        params: GenerationParams,
        *,
        images: int = 0,
        structured: bool = False,
    ) -> Completion:
        """The first choice as a ``Completion``; raises ``BackendError``.

        ``structured``: send the params' reply schema as ``response_format`` (see the module
        docstring for ``structured: auto``).
        """
        response_format = self.settings.response_format(params) if structured else None
        if response_format is not None and self.schema_rejected:
            response_format = None
        return completion_of(self.create(messages, params, images=images, response_format=response_format))

    def create(
        self,
        messages: list[dict[str, Any]],
        params: GenerationParams,
        *,
        images: int = 0,
        extra_body: Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> ChatCompletion:
        """One chat completion (the client retries); the reply has at least one choice."""
        body = {**copy.deepcopy(dict(self.settings.extra_body or {})), **(extra_body or {})}
        fields = self.settings.request_fields(params)
        if response_format is not None:
            fields["response_format"] = response_format
            if self.settings.require_parameters:
                body["provider"] = {**dict(body.get("provider") or {}), "require_parameters": True}
        self.usage.record_request(images=images)
        try:
            reply = self.openai.chat.completions.create(
                model=self.settings.model,
                messages=messages,  # type: ignore[arg-type]  # plain dicts, as the API documents them
                extra_body=body or None,
                extra_headers=self._request_headers,
                **fields,
            )
        except Exception as exc:  # the client's errors, and anything unexpected: one boundary
            self.usage.record_failure()
            if response_format is not None and self.settings.structured == "auto" and _rejects_schema(exc):
                if not self.schema_rejected:
                    log.warning(
                        "%s rejected the reply's JSON schema (%s); structured: auto falls back to text",
                        self.what,
                        self.scrub(str(exc))[:200],
                    )
                self.schema_rejected = True
                return self.create(messages, params, images=images, extra_body=extra_body)
            raise backend_error(exc, self.what, self.scrub, key_env=self.key_env) from None
        self.usage.record_success(token_usage(reply.usage), reported_cost=extra_field(reply.usage, "cost"))
        return reply

    # -- batches --------------------------------------------------------------------------------
    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
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
        self.openai.close()


_COMPLETION_TOKENS_MODELS = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
"""OpenAI's reasoning families (named as OpenAI names them, without a router's ``vendor/``)."""


def _is_openrouter(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    return host == "openrouter.ai" or host.endswith(".openrouter.ai")


def max_tokens_field_for(model: str) -> str:
    """The token-limit field a model takes: ``max_completion_tokens`` for OpenAI's o-series and
    GPT-5 reasoning models, ``max_tokens`` for the rest (the module docstring)."""
    return "max_completion_tokens" if _COMPLETION_TOKENS_MODELS.match(model) else "max_tokens"


def _default_headers(api_key: str | None, headers: Mapping[str, str]) -> dict[str, Any]:
    """The configured headers, and nothing the openai client would take from the environment.

    The client adds ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` and the headers in
    ``OPENAI_CUSTOM_HEADERS``; a run sends only what its config names, so those are omitted.
    """
    ambient = os.environ.get("OPENAI_CUSTOM_HEADERS", "")
    names = {line.split(":", 1)[0].strip() for line in ambient.splitlines() if ":" in line}
    out: dict[str, Any] = {n: openai.Omit() for n in names | {"OpenAI-Organization", "OpenAI-Project"} if n}
    out.update(headers)
    out["Authorization"] = f"Bearer {api_key}" if api_key else openai.Omit()
    return out


def _rejects_schema(exc: Exception) -> bool:
    """A 400/422 that names the response format: the server does not do structured output."""
    if not isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
        return False
    text = str(exc).casefold()
    return any(word in text for word in _SCHEMA_WORDS)


def _capture(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except BackendError as exc:
        return exc
    except Exception as exc:  # a bug or an unexpected library error: still one item's failure
        return PermanentBackendError(f"{type(exc).__name__}: {exc}")


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
        """Requests, attempts, tokens, cost and per-endpoint counts of this role so far (JSON-ready)."""
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
            return self.client.chat(messages, params, images=n_images)

        return self.client.map(one, list(conversations))


class OpenAIText(_ChatBackend):
    """A text LLM behind an OpenAI-compatible server (TextModel)."""

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        if not prompt.strip():
            raise BadInput("empty prompt")
        return self.client.chat([{"role": "user", "content": prompt}], params, structured=True)


def client_from_options(
    options: Mapping[str, Any],
    backend: str = "openai-chat",
    *,
    clock: Callable[[], float] = time.monotonic,
    transport: httpx2.BaseTransport | None = None,
) -> ChatClient:
    """Validate the role's options and build its client (``transport``: tests inject one)."""
    check_options(ChatOptions, options, f"backend {backend!r}")
    model = options.get("model")
    if not isinstance(model, str) or not model:
        raise OptionsError(f"backend {backend!r} needs model: <model id as the server names it>")
    if ("base_url" in options) == ("base_urls" in options):
        raise OptionsError(f"backend {backend!r}: give exactly one of base_url or base_urls")
    urls = options["base_urls"] if "base_urls" in options else [options["base_url"]]
    if not isinstance(urls, list) or not urls:
        raise OptionsError("base_urls must be a non-empty list of URLs")
    urls = [check_base_url(u, backend) for u in urls]
    field = options.get("max_tokens_field", "auto")
    if field not in ("auto", "max_tokens", "max_completion_tokens"):
        raise OptionsError("max_tokens_field must be auto, max_tokens or max_completion_tokens")
    if field == "auto":
        field = max_tokens_field_for(model)
    omit = tuple(options.get("omit") or ())
    if any(o not in _DECODING_FIELDS for o in omit):
        raise OptionsError(f"omit may list only {', '.join(_DECODING_FIELDS)}")
    extra = options.get("extra_body") or {}
    if not isinstance(extra, Mapping) or {"model", "messages"} & set(extra):
        raise OptionsError("extra_body must be a mapping and may not set model or messages")
    structured = options.get("structured", "auto")
    if structured not in STRUCTURED_MODES:
        raise OptionsError(f"structured must be one of {', '.join(STRUCTURED_MODES)}, not {structured!r}")
    cap = options.get("max_tokens_cap")
    settings = ChatSettings(
        model=model,
        revision=options.get("revision"),
        max_tokens_field=field,
        max_tokens_cap=None if cap is None else int(cap),
        omit=omit,
        extra_body=dict(extra),
        structured=structured,
        require_parameters=any(_is_openrouter(u) for u in urls),
    )
    return ChatClient(
        settings,
        urls,
        api_key=secret_from_env(options, backend),
        key_env=options.get("api_key_env"),
        headers=check_headers(options.get("headers"), backend),
        concurrency=int(options.get("concurrency", 16)),
        timeout_s=float(options.get("timeout_s", 600.0)),
        max_retries=int(options.get("max_retries", 6)),
        prices=Prices.from_options(options.get("prices")),
        dead_after=int(options.get("dead_after", 3)),
        cooldown_s=float(options.get("cooldown_s", 30.0)),
        health_path=str(options.get("health_path", "models")),
        clock=clock,
        transport=transport,
    )


def vision_chat_from_options(options: Mapping[str, Any]) -> OpenAIVisionChat:
    """The ``openai-chat`` target the role's options describe."""
    return OpenAIVisionChat(client_from_options(options))


def text_from_options(options: Mapping[str, Any]) -> OpenAIText:
    """The ``openai-chat`` text model (extractor, judge, edit parser) the role's options describe."""
    return OpenAIText(client_from_options(options))
