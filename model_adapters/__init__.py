"""Backends behind small contracts: target VLMs, text LLMs and image editors.

This package is a leaf: it knows images, text and its backends, nothing of the EDCT protocol.
"""

from model_adapters.contracts import (
    ChatMessage,
    GenerationParams,
    ImageEditor,
    TextModel,
    VisionChatModel,
)
from model_adapters.errors import (
    BackendError,
    BadInput,
    EditRefused,
    OptionsError,
    PermanentBackendError,
    RateLimited,
    Timeout,
    TransientBackendError,
)

__all__ = [
    "BackendError",
    "BadInput",
    "ChatMessage",
    "EditRefused",
    "GenerationParams",
    "ImageEditor",
    "OptionsError",
    "PermanentBackendError",
    "RateLimited",
    "TextModel",
    "Timeout",
    "TransientBackendError",
    "VisionChatModel",
]
