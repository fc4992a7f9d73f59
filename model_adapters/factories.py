"""Backend factories of this package by kind and name; ``edct_task.roles`` merges ``FACTORIES``.

Each factory takes the role's options mapping from the run config and imports its optional
dependencies inside itself. Kinds: ``target`` (VisionChatModel), ``text`` (TextModel),
``editor`` (ImageEditor), ``detector`` (Moondream's HTTP API, through ``verification``'s
``detector_factory``). Invalid options raise ``model_adapters.errors.OptionsError`` (a
``ValueError``) with a message naming the option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verification.factories import detector_factory

Factory = Callable[[Mapping[str, Any]], Any]


def _openai_chat_target(options: Mapping[str, Any]) -> Any:
    from model_adapters.openai_chat import OpenAIVisionChat, client_from_options

    return OpenAIVisionChat(client_from_options(options))


def _lmms_eval_target(options: Mapping[str, Any]) -> Any:
    from model_adapters.lmms_eval_target import from_options

    return from_options(options)


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


def _moondream_detector(options: Mapping[str, Any]) -> Any:
    from model_adapters.moondream_detector import moondream_from_options

    return moondream_from_options(options)


MOONDREAM_OPTIONS = frozenset(
    {
        "base_url",
        "api_key_env",
        "timeout_s",
        "max_retries",
        "backoff_base_s",
        "backoff_max_s",
        "concurrency",
        "max_boxes",
        "max_side",
        "jpeg_quality",
    }
)
"""Options of the ``moondream`` detector (checked before anything is built)."""

FACTORIES: dict[str, dict[str, Factory]] = {
    "target": {"openai-chat": _openai_chat_target, "lmms-eval": _lmms_eval_target},
    "text": {"openai-chat": _openai_chat_text},
    "editor": {
        "bfl": _bfl_editor,
        "openai-images": _openai_images_editor,
        "openrouter-image": _openrouter_image_editor,
        "diffusers": _diffusers_editor,
    },
    "detector": {"moondream": detector_factory("moondream", MOONDREAM_OPTIONS, _moondream_detector)},
}
