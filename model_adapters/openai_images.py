"""OpenAI ``images.edit``: ``POST <base>/images/edits`` (multipart) with a GPT image model.

The default model is ``gpt-image-2.5-sunburst``, the successor the installed openai SDK names for
the shut-down ``gpt-image-1`` (``openai/types/image_model.py``); a model the SDK lists as shut down
or retired (``gpt-image-1``, ``dall-e-2``, ``dall-e-3``) is refused when the options are read.
``input_fidelity`` is sent only to the models the SDK says take it (``gpt-image-1.5``: high/low;
``gpt-image-1-mini``: low; "for gpt-image-2, omit this parameter").

The image goes as a PNG file part, the instruction as ``prompt``. The reply carries the result as
``b64_json`` (GPT image models always return base64) or a ``url`` (downloaded at once, without the
key). The API has no
seed, so the seed is not sent (retries differ only by the model's own sampling; the identity says
so). A ``moderation_blocked`` / content-policy rejection raises ``EditRefused`` with the reason.

Options::

    model: gpt-image-2.5-sunburst # or gpt-image-1.5, gpt-image-2, gpt-image-2.6-flare, …
    api_key_env: OPENAI_API_KEY   # default OPENAI_API_KEY; null for a local server without a key
    base_url: https://api.openai.com/v1   # or base_urls: [http://node1:8091/v1, http://node2:8091/v1]
    dead_after: 3                 # with base_urls: consecutive endpoint failures before leaving the rotation
    cooldown_s: 30                # then a health check (GET <base>/<health_path>) brings it back
    health_path: models
    size: auto                    # or 1024x1024, 1536x1024, 1024x1536
    quality: high                 # low / medium / high / auto
    input_fidelity: high          # only gpt-image-1.5 (high/low) and gpt-image-1-mini (low)
    extra: {}                     # more form fields
    concurrency: 4
    timeout_s: 300
    max_retries: 6
    max_cost_usd: null            # the role's ceiling; needs price_per_call_usd (the API reports no cost)
    price_per_call_usd: null
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image
from pydantic import Field

from model_adapters.endpoints import EndpointPool
from model_adapters.errors import EditRefused, OptionsError, PermanentBackendError
from model_adapters.images import decode_image, png_bytes
from model_adapters.remote_editor import EditorHttpOptions, EditorUsage, HttpCaller, finish
from model_adapters.transport import MalformedReply, check_base_url, secret_from_env
from verification.backends import check_options


class OpenAIImagesOptions(EditorHttpOptions):
    """``openai-images``: OpenAI's images.edit (or a server speaking it)."""

    reports_cost: ClassVar[bool] = False

    model: str = Field("gpt-image-2.5-sunburst", description="A current GPT image model.")
    api_key_env: str | None = Field(
        "OPENAI_API_KEY", description="The environment variable holding the key; null for a local server."
    )
    base_url: str | None = Field("https://api.openai.com/v1", description="The API root (or base_urls).")
    base_urls: list[str] | None = Field(None, description="Several servers, one rotation.")
    dead_after: int = Field(
        3, description="With base_urls: consecutive failures before leaving the rotation."
    )
    cooldown_s: float = Field(30.0, description="With base_urls: seconds before a health check.")
    health_path: str = Field("models", description="With base_urls: GET <base>/<health_path>.")
    size: str | None = Field(None, description="auto, 1024x1024, 1536x1024 or 1024x1536.")
    quality: str | None = Field(None, description="low, medium, high or auto.")
    input_fidelity: str | None = Field(
        None, description="Only gpt-image-1.5 (high/low) and gpt-image-1-mini (low)."
    )
    extra: dict[str, Any] | None = Field(None, description="More form fields.")


_REFUSAL_MARKERS = ("moderation", "safety", "content_policy", "content policy")
DEFAULT_MODEL = "gpt-image-2.5-sunburst"
INPUT_FIDELITY = {"gpt-image-1.5": ("high", "low"), "gpt-image-1-mini": ("low",)}
"""The models that take ``input_fidelity`` and its values (the SDK's ``images.edit`` docstring)."""


def retired_image_models() -> frozenset[str]:
    """The image model ids the installed openai SDK lists as shut down or retired: the quoted ids
    on the "shut down"/"retired" lines of ``openai/types/image_model.py``'s "Deprecated values"."""
    try:
        import openai.types.image_model as image_model
    except ImportError:  # without the SDK there is no list to read
        return frozenset()
    text = Path(image_model.__file__).read_text(encoding="utf-8")
    part = text.split("Deprecated values", 1)[1] if "Deprecated values" in text else ""
    return frozenset(
        m
        for line in part.splitlines()
        if re.search(r"shut down|retired", line)
        for m in re.findall(r'"([a-z0-9.\-]+)"', line)
    )


class OpenAIImageEditor:
    """An ImageEditor on OpenAI's images API (or a server speaking it)."""

    backend = "openai-images"

    def __init__(
        self, model: str, api_key: str | None, *, base_url: str, form: Mapping[str, str], caller: HttpCaller
    ) -> None:
        self.model = model
        self.name = f"openai-images:{model}"
        self.base_url = base_url.rstrip("/")
        self.form = dict(form)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.caller = caller
        self.stats = EditorUsage.of(caller)

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model": self.model,
            "form": copy.deepcopy(self.form),
            "seeded": False,
        }

    def usage(self) -> dict[str, Any]:
        out = {"backend": self.backend, "model": self.model, **self.stats.as_dict()}
        endpoints = self.caller.endpoint_stats()
        return out if endpoints is None else {**out, "endpoints": endpoints}

    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        data = {"model": self.model, "prompt": instruction, "n": "1", **self.form}
        files = {"image": ("image.png", png_bytes(image), "image/png")}
        with self.stats.counting_failures():
            try:
                body = self.caller.request_json(
                    "POST",
                    f"{self.base_url}/images/edits",
                    "images.edit",
                    data=data,
                    files=files,
                    headers=self._headers,
                )
            except PermanentBackendError as exc:
                if any(m in str(exc).lower() for m in _REFUSAL_MARKERS):
                    raise EditRefused(f"{self.name}: {str(exc).split(': ', 1)[-1]}") from None
                raise
            edited = self._image(body)
        return finish(edited, image, self.stats)

    def _image(self, body: object) -> Image.Image:
        items = body.get("data") if isinstance(body, dict) else None
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            raise MalformedReply("images.edit: reply has no data")
        self.stats.add_tokens(body.get("usage"))
        item = items[0]
        if isinstance(item.get("b64_json"), str):
            try:
                raw = base64.b64decode(item["b64_json"])
            except (binascii.Error, ValueError):
                raise PermanentBackendError("images.edit: invalid base64 image") from None
            return decode_image(raw, source="images.edit result")
        if isinstance(item.get("url"), str):
            return decode_image(
                self.caller.request("GET", item["url"], "images.edit download").content,
                source="images.edit result",
            )
        raise MalformedReply("images.edit: result has neither b64_json nor url")

    def close(self) -> None:
        self.caller.close()


def from_options(
    options: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> OpenAIImageEditor:
    check_options(OpenAIImagesOptions, options, "backend 'openai-images'")
    model = options.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not model:
        raise OptionsError(f"openai-images: model must be a model id such as {DEFAULT_MODEL}")
    if model in retired_image_models():
        raise OptionsError(
            f"openai-images: {model} is shut down or retired (openai SDK, types/image_model.py); "
            f"use a current GPT image model such as {DEFAULT_MODEL}"
        )
    fidelity = options.get("input_fidelity")
    base_model = re.sub(r"-\d{4}-\d{2}-\d{2}$", "", model)
    if fidelity is not None and str(fidelity) not in INPUT_FIDELITY.get(base_model, ()):
        takes = "; ".join(f"{m}: {'/'.join(v)}" for m, v in INPUT_FIDELITY.items())
        raise OptionsError(
            f"openai-images: {model} does not take input_fidelity {fidelity!r} (only {takes}); remove it"
        )
    key = secret_from_env(options, "openai-images", default_env="OPENAI_API_KEY")
    extra = options.get("extra") or {}
    if not isinstance(extra, Mapping) or {"model", "prompt", "image", "n"} & set(extra):
        raise OptionsError("openai-images: extra must be a mapping and may not set model, prompt, image or n")
    form = {k: str(options[k]) for k in ("size", "quality", "input_fidelity") if options.get(k) is not None}
    form.update({str(k): str(v) for k, v in extra.items()})
    urls = _base_urls(options)
    caller = HttpCaller.from_options(options, key, timeout_s=300, sleep=sleep)
    if len(urls) > 1:
        caller.pool = EndpointPool(
            urls,
            dead_after=int(options.get("dead_after", 3)),
            cooldown_s=float(options.get("cooldown_s", 30.0)),
            health=caller.healthy,
            clock=clock,
        )
        caller.health_path = str(options.get("health_path", "models")).strip("/")
        caller.health_headers = {"Authorization": f"Bearer {key}"} if key else {}
    return OpenAIImageEditor(model, key, base_url=urls[0], form=form, caller=caller)


def _base_urls(options: Mapping[str, Any]) -> list[str]:
    """``base_url`` (default OpenAI's) or ``base_urls`` (several servers, one pool), checked."""
    if "base_url" in options and "base_urls" in options:
        raise OptionsError("openai-images: give one of base_url or base_urls")
    if "base_urls" not in options:
        for name in ("dead_after", "cooldown_s", "health_path"):
            if name in options:
                raise OptionsError(f"openai-images: {name} applies to base_urls (several servers)")
        return [check_base_url(options.get("base_url", "https://api.openai.com/v1"), "openai-images")]
    urls = options["base_urls"]
    if not isinstance(urls, list) or not urls:
        raise OptionsError("openai-images: base_urls must be a non-empty list of URLs")
    checked = [check_base_url(u, "openai-images") for u in urls]
    if len(set(checked)) != len(checked):
        raise OptionsError("openai-images: base_urls lists a server twice")
    try:
        if int(options.get("dead_after", 3)) < 1 or float(options.get("cooldown_s", 30.0)) < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise OptionsError("openai-images: dead_after must be >= 1 and cooldown_s >= 0") from None
    return checked
