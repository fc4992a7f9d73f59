"""``--model edct/<behaviour>``: the calibration world's reference VLMs as an Inspect model provider
(``faithful``, ``prior``, ``stale``, ``mixed:<p>[:seed=<s>]``), as ``edct_reference`` is for
lmms-eval: the Inspect task runs with no weights and no keys. The model reads the conversation
Inspect sends (images decoded from their data URIs) and answers from the pixels.

``edct/rules`` is the calibration world's rule-based text model (the ``calibration-rules`` backend)
for Inspect's model roles: ``--model-role judge=edct/rules`` (``role_model``) answers the
judge's requests of the last user turn, offline.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from model_adapters.contracts import ChatMessage, GenerationParams

RULES = "rules"
"""``edct/rules``: the calibration rules as a text model (the model roles' offline stand-in)."""


def reference_api() -> type:
    from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput

    class ReferenceModelAPI(ModelAPI):
        def __init__(
            self,
            model_name: str,
            base_url: str | None = None,
            api_key: str | None = None,
            config: GenerateConfig = GenerateConfig(),  # noqa: B008 (Inspect's signature)
            **model_args: Any,
        ) -> None:
            super().__init__(model_name, base_url, api_key, [], config)
            from edct_task.calibration import ReferenceVLM, RuleBasedLLM

            self.text = RuleBasedLLM() if model_name == RULES else None
            self.vlm = None if self.text else ReferenceVLM(model_name)

        async def generate(self, input: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
            if self.text is not None:
                completion = self.text.complete(input[-1].text, GenerationParams())
                return ModelOutput.from_content(model=self.model_name, content=completion.text)
            assert self.vlm is not None
            (reply,) = self.vlm.generate([chat_of(input)], GenerationParams())
            if isinstance(reply, Exception):
                raise reply
            return ModelOutput.from_content(model=self.model_name, content=reply.text)

    return ReferenceModelAPI


def chat_of(messages: list[Any]) -> list[ChatMessage]:
    """Inspect's chat messages as the reference model's conversation (images decoded)."""
    from inspect_ai.model import ContentImage

    out = []
    for m in messages:
        content = m.content if isinstance(m.content, list) else []
        images = tuple(image_of(c.image) for c in content if isinstance(c, ContentImage))
        out.append(ChatMessage(m.role, m.text, images))
    return out


def image_of(uri: str) -> Any:
    from PIL import Image

    _, _, data = uri.partition("base64,")
    return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
