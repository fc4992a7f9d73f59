"""Backend factories by kind and name, merged into ``edct_task.roles.REGISTRY``.

Each factory takes the role's options mapping from the run config and imports its optional
dependencies inside itself. Kinds: ``target`` (VisionChatModel), ``text`` (TextModel),
``editor`` (ImageEditor). Invalid options raise ``model_adapters.errors.OptionsError`` (a
``ValueError``) with a message naming the option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Factory = Callable[[Mapping[str, Any]], Any]


def _openai_chat_target(options: Mapping[str, Any]) -> Any:
    from model_adapters.openai_chat import OpenAIVisionChat, client_from_options

    return OpenAIVisionChat(client_from_options(options))


def _openai_chat_text(options: Mapping[str, Any]) -> Any:
    from model_adapters.openai_chat import OpenAIText, client_from_options

    return OpenAIText(client_from_options(options))


def _bfl_editor(options: Mapping[str, Any]) -> Any:
    from model_adapters.bfl_editor import from_options

    return from_options(options)


def _openai_images_editor(options: Mapping[str, Any]) -> Any:
    from model_adapters.openai_images import from_options

    return from_options(options)


def _openrouter_image_editor(options: Mapping[str, Any]) -> Any:
    from model_adapters.openrouter_images import from_options

    return from_options(options)


def _diffusers_editor(options: Mapping[str, Any]) -> Any:
    from model_adapters.diffusers_editor import from_options

    return from_options(options)


FACTORIES: dict[str, dict[str, Factory]] = {
    "target": {"openai-chat": _openai_chat_target},
    "text": {"openai-chat": _openai_chat_text},
    "editor": {
        "bfl": _bfl_editor,
        "openai-images": _openai_images_editor,
        "openrouter-image": _openrouter_image_editor,
        "diffusers": _diffusers_editor,
    },
}
