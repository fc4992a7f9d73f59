"""Image editing through chat completions with image output: Gemini image models on OpenRouter.

The request is an ordinary chat completion — the image as a data-URI part, the instruction as
text — with ``modalities`` per model kind (openrouter.ai/docs image generation: "Models that
output both text and images (e.g., Gemini): use ["image","text"] · Models that only output images
(e.g., Sourceful, Flux): use ["image"]"): ``["image"]`` for the image-only families
(``black-forest-labs/``, ``sourceful/``), ``["image", "text"]`` otherwise, or the ``modalities``
option; the identity records it; the edited image comes back in
``choices[0].message.images[0].image_url.url`` as a data URI. A reply without an image is a
refusal (``EditRefused`` with the model's text or finish reason, e.g. ``IMAGE_SAFETY``). It rides
on the chat client, so endpoints, retries and token/cost accounting (OpenRouter reports
``usage.cost``) are the chat backend's.

Options: those of ``openai-chat`` (``model``, ``base_url``, ``api_key_env``, ``prices``, …; default
``base_url`` https://openrouter.ai/api/v1 and ``api_key_env`` OPENROUTER_API_KEY) plus
``image_config`` (e.g. ``{aspect_ratio: "4:3"}``), ``modalities`` and ``max_tokens`` (default 8192).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openai.types.chat import ChatCompletion
from PIL import Image
from pydantic import Field

from model_adapters.contracts import GenerationParams
from model_adapters.errors import EditRefused, OptionsError
from model_adapters.images import data_uri, decode_data_uri
from model_adapters.openai_chat import ChatClient, ChatOptions, client_from_options
from model_adapters.remote_editor import EditorUsage, finish
from verification.backends import check_options


class OpenRouterImageOptions(ChatOptions):
    """``openrouter-image``: image editing through chat completions with image output (Gemini on
    OpenRouter); the chat options, with OpenRouter's defaults, and these."""

    base_url: str | None = Field("https://openrouter.ai/api/v1", description="The server (or base_urls).")
    api_key_env: str | None = Field(
        "OPENROUTER_API_KEY", description="The environment variable holding the key."
    )
    concurrency: int = Field(4, description="Edits in flight for this role.")
    image_config: dict[str, Any] | None = Field(
        None, description="OpenRouter's image_config, e.g. {aspect_ratio: '4:3'}."
    )
    max_tokens: int = Field(8192, description="The reply's token limit.")
    modalities: list[str] | None = Field(
        None, description='["image"] or ["image", "text"]; default by model family.'
    )


IMAGE_ONLY_FAMILIES = ("black-forest-labs/", "sourceful/")
"""OpenRouter model-id prefixes of models that output only images (``modalities: ["image"]``)."""


def modalities_for(model: str) -> list[str]:
    """The ``modalities`` a model's requests carry (the module docstring)."""
    return ["image"] if model.startswith(IMAGE_ONLY_FAMILIES) else ["image", "text"]


class OpenRouterImageEditor:
    """An ImageEditor on a chat-completions server with image output."""

    backend = "openrouter-image"

    def __init__(
        self,
        client: ChatClient,
        *,
        image_config: Mapping[str, Any] | None = None,
        max_tokens: int = 8192,
        modalities: list[str] | None = None,
    ) -> None:
        self.client = client
        self.model = client.settings.model
        self.modalities = list(modalities or modalities_for(self.model))
        self.name = f"openrouter-image:{self.model}"
        self.image_config = dict(image_config or {})
        self.max_tokens = max_tokens
        self.stats = EditorUsage()

    def identity(self) -> dict[str, Any]:
        return {
            **self.client.settings.identity(self.backend),
            "image_config": dict(self.image_config),
            "modalities": list(self.modalities),
        }

    def usage(self) -> dict[str, Any]:
        chat = self.client.usage.as_dict()
        return {
            "backend": self.backend,
            "model": self.model,
            **self.stats.as_dict(),
            "retries": chat["retries"],
            "input_tokens": chat["prompt_tokens"],
            "output_tokens": chat["completion_tokens"],
            "cost_usd": chat["cost_usd"],
            "endpoints": self.client.pool.stats(),
        }

    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": data_uri(image)}},
                    {"type": "text", "text": instruction},
                ],
            }
        ]
        extra: dict[str, Any] = {"modalities": list(self.modalities)}
        if self.image_config:
            extra["image_config"] = dict(self.image_config)
        params = GenerationParams(max_new_tokens=self.max_tokens, seed=seed)
        with self.stats.counting_failures():
            edited = self._image(self.client.create(messages, params, images=1, extra_body=extra))
        return finish(edited, image, self.stats)

    def _image(self, reply: ChatCompletion) -> Image.Image:
        choice = reply.choices[0]
        message = choice.message
        for item in (message.model_extra or {}).get("images") or ():
            url = (item.get("image_url") or {}).get("url") if isinstance(item, dict) else None
            if isinstance(url, str):
                return decode_data_uri(url, source=f"{self.name} image")
        reason = (
            message.refusal
            or (choice.model_extra or {}).get("native_finish_reason")
            or choice.finish_reason
            or "no image in the reply"
        )
        text = message.content if isinstance(message.content, str) else ""
        raise EditRefused(f"{self.name}: {reason}" + (f": {text[:200]}" if text else ""))

    def close(self) -> None:
        self.client.close()


def from_options(options: Mapping[str, Any], **client_kwargs: Any) -> OpenRouterImageEditor:
    """The editor the role's options describe (``client_kwargs``: see ``client_from_options``)."""
    check_options(OpenRouterImageOptions, options, "backend 'openrouter-image'")
    opts = dict(options)
    image_config = opts.pop("image_config", None)
    max_tokens = int(opts.pop("max_tokens", 8192))
    modalities = opts.pop("modalities", None)
    if modalities is not None and modalities not in (["image"], ["image", "text"]):
        raise OptionsError('openrouter-image: modalities must be ["image"] or ["image", "text"]')
    if image_config is not None and not isinstance(image_config, Mapping):
        raise OptionsError("openrouter-image: image_config must be a mapping, e.g. {aspect_ratio: '4:3'}")
    if "base_url" not in opts and "base_urls" not in opts:
        opts["base_url"] = "https://openrouter.ai/api/v1"
    opts.setdefault("api_key_env", "OPENROUTER_API_KEY")
    if opts["api_key_env"] is None:
        del opts["api_key_env"]
    opts.setdefault("concurrency", 4)
    client = client_from_options(opts, "openrouter-image", **client_kwargs)
    return OpenRouterImageEditor(
        client, image_config=image_config, max_tokens=max_tokens, modalities=modalities
    )
