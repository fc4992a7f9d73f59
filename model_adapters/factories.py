"""The backends of this package, one ``BackendRecord`` each; ``edct_task.roles`` collects ``RECORDS``.

Each record names its factory and its options model (next to the backend's code) as
``"module:name"``, imported when a config names the backend (so this table costs no import of an
HTTP client or of torch), and its traits (``verification.backends``). Invalid options raise
``model_adapters.errors.OptionsError`` (a ``ValueError``) with a message naming the option.
"""

from __future__ import annotations

from verification.backends import BackendRecord, Latency

_HOSTED_EDIT = Latency(20.0, sd=6.0, note="hosted image editor, 20 s per edit")

RECORDS = (
    BackendRecord(
        "target",
        "openai-chat",
        "model_adapters.openai_chat:vision_chat_from_options",
        "model_adapters.openai_chat:ChatOptions",
        Latency(3.0, sd=1.0, note="remote VLM, 3 s per request"),
        paid=True,
    ),
    BackendRecord(
        "target",
        "lmms-eval",
        "model_adapters.lmms_eval_target:from_options",
        "model_adapters.lmms_eval_target:LmmsEvalOptions",
        Latency(0.5, per_item=0.05, note="local VLM, 0.5 s + 0.05 s per conversation"),
        local_weights=True,
    ),
    BackendRecord(
        "text",
        "openai-chat",
        "model_adapters.openai_chat:text_from_options",
        "model_adapters.openai_chat:ChatOptions",
        Latency(10.0, sd=4.0, note="reasoning LLM, 10 s per call"),
        paid=True,
    ),
    BackendRecord(
        "editor",
        "bfl",
        "model_adapters.bfl_editor:from_options",
        "model_adapters.bfl_editor:BFLOptions",
        _HOSTED_EDIT,
        paid=True,
    ),
    BackendRecord(
        "editor",
        "openai-images",
        "model_adapters.openai_images:from_options",
        "model_adapters.openai_images:OpenAIImagesOptions",
        _HOSTED_EDIT,
        paid=True,
    ),
    BackendRecord(
        "editor",
        "openrouter-image",
        "model_adapters.openrouter_images:from_options",
        "model_adapters.openrouter_images:OpenRouterImageOptions",
        _HOSTED_EDIT,
        paid=True,
    ),
    BackendRecord(
        "editor",
        "diffusers",
        "model_adapters.diffusers_editor:from_options",
        "model_adapters.diffusers_editor:DiffusersOptions",
        Latency(40.0, sd=5.0, note="local diffusion editor, 40 s per edit"),
        local_weights=True,
        serial=True,
    ),
    BackendRecord(
        "detector",
        "moondream",
        "model_adapters.moondream_detector:from_options",
        "model_adapters.moondream_detector:MoondreamOptions",
        Latency(2.0, sd=0.5, note="detector + segmenter, 2 s per edit"),
        paid=True,
    ),
)
"""This package's backends."""
