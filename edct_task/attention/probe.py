"""The model side of ``edct attention``: a transformers VLM asked a question, with its attention read.

``VLMProbe`` wraps a Qwen3-VL-style ``AutoModelForImageTextToText`` and its processor:

- :meth:`VLMProbe.answer` — the greedy answer (the text the attention maps explain);
- :meth:`VLMProbe.attention` — one forward pass over the prompt with forward hooks on the
  selected text layers' self-attention modules only. Each hook copies out the one row it needs
  (the position that emits the answer's first token, against the image content tokens) and lets
  the layer's full attention matrix go. So at most one layer's matrix exists at a time and only
  ``layers × heads × image tokens`` numbers are kept — never ``output_attentions=True`` (which
  keeps every layer's full matrix). The text layers run with *eager* attention (SDPA returns no
  weights), the vision tower keeps SDPA (its eager matrices over thousands of patches would be
  the biggest tensors of the pass, for nothing).

Layer choice (:func:`resolve_layers`): the paper reads layers 7–12 of Qwen3-VL-8B's 36; other
depths get the same relative band by default, or explicit indices.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edct_task.core.errors import ConfigError
from edct_task.parsing import strip_thinking

__all__ = ["DEFAULT_BAND", "AttentionRows", "VLMProbe", "resolve_layers", "text_layers"]

DEFAULT_BAND = (7 / 36, 12 / 36)
"""Relative depth of the paper's layers 7–12 (of 36): ``round(lo·L) … round(hi·L)``."""


def resolve_layers(n_layers: int, spec: str | None = None) -> tuple[int, ...]:
    """The 0-based text-layer indices to read.

    ``spec``: None (the paper's band at this depth), ``"7-12"`` / ``"7,9,12"`` (indices), or
    ``"0.19-0.33"`` (a relative band: both ends in [0, 1] with a decimal point).

    Raises
    ------
    ConfigError
        When the spec is malformed or names a layer the model does not have.
    """
    if n_layers < 1:
        raise ConfigError(f"the model has {n_layers} text layers")
    if spec is None or re.fullmatch(r"\s*0?\.\d+\s*-\s*(0?\.\d+|1(\.0*)?)\s*", spec):
        lo, hi = DEFAULT_BAND if spec is None else (float(x) for x in spec.split("-"))
        if lo > hi:
            raise ConfigError(f"--layers {spec}: the band's start is above its end")
        first = min(n_layers - 1, round(lo * n_layers))
        return tuple(range(first, max(first, min(n_layers - 1, round(hi * n_layers))) + 1))
    layers: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise ConfigError(
                f"--layers {spec!r}: give indices (7-12 or 7,9,12) or a relative band (0.19-0.33)"
            )
        a, b = int(m[1]), int(m[2] or m[1])
        if a > b:
            raise ConfigError(f"--layers {spec!r}: range {a}-{b} runs backwards")
        layers.extend(range(a, b + 1))
    bad = [i for i in layers if i >= n_layers]
    if bad:
        raise ConfigError(f"--layers {spec!r}: the model has text layers 0-{n_layers - 1}, not {bad[0]}")
    return tuple(sorted(set(layers)))


def _unwrap(model: Any) -> Any:
    """The transformers model under a peft wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def text_layers(model: Any) -> Any:
    """The decoder layers of the language model of a Qwen-VL-style model (peft-wrapped or not)."""
    inner = _unwrap(model)
    for path in ("model.language_model.layers", "language_model.model.layers", "model.layers"):
        obj = inner
        try:
            for name in path.split("."):
                obj = getattr(obj, name)
        except AttributeError:
            continue
        return obj
    raise ConfigError(
        f"{type(inner).__name__}: no language-model decoder layers found to read attention from"
    )


@contextlib.contextmanager
def eager_text_attention(model: Any) -> Iterator[None]:
    """Text attention switched to eager (weights returned) for the block; restored after it."""
    inner = _unwrap(model)
    text_config = getattr(inner.config, "text_config", inner.config)
    before = text_config._attn_implementation
    if before == "eager":
        yield
        return
    inner.set_attn_implementation({"text_config": "eager"})
    try:
        yield
    finally:
        inner.set_attn_implementation({"text_config": before})


@dataclass
class AttentionRows:
    """What one attention pass keeps: the answer position's attention to the image tokens."""

    attention: np.ndarray
    """float32, shape (layers, heads, image tokens)."""
    grid: tuple[int, int]
    """Image-token grid (rows, cols), row-major."""
    layers: tuple[int, ...]
    tokens: int
    """Length of the prompt the pass ran on."""
    largest_matrix_bytes: int
    """Size of the biggest attention matrix one hooked layer produced (freed after the layer)."""
    all_layers_bytes: int = field(default=0)
    """What ``output_attentions=True`` would keep for this prompt: every text layer's matrix."""


class VLMProbe:
    """A VLM and its processor, asked about one image at a time (batch 1)."""

    def __init__(self, model: Any, processor: Any, *, layers: str | None = None) -> None:
        self.model = model
        self.processor = processor
        self.layers = resolve_layers(len(text_layers(model)), layers)
        inner = _unwrap(model)
        self.image_token_id = int(inner.config.image_token_id)
        self.merge = int(getattr(processor.image_processor, "merge_size", 1))

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        *,
        layers: str | None = None,
        device: str | None = None,
        dtype: str = "auto",
        adapter: str | Path | None = None,
    ) -> VLMProbe:
        """Load ``model_dir`` (text attention eager, vision SDPA), optionally with a LoRA adapter."""
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            processor = AutoProcessor.from_pretrained(str(model_dir))
            model = AutoModelForImageTextToText.from_pretrained(
                str(model_dir),
                dtype=dtype,
                attn_implementation={"text_config": "eager", "vision_config": "sdpa"},
                device_map=device,
            )
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--model {model_dir}: cannot load a vision-language model ({exc})") from None
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        model.eval()
        return cls(model, processor, layers=layers)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def inputs(self, image: Any, question: str, system_prompt: str = "", thought: str = "") -> Any:
        """The processor's tensors for (system?, user [image, question]) and the generation prompt,
        followed by ``thought`` (a thinking model's reasoning before its answer, ``thought_of``)."""
        messages: list[dict[str, Any]] = []
        if system_prompt:
            messages.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "image", "image": image}, {"type": "text", "text": question}],
            }
        )
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.processor(text=[text + thought], images=[image], return_tensors="pt").to(self.device)

    def reply(self, image: Any, question: str, system_prompt: str = "", *, max_new_tokens: int = 64) -> str:
        """The greedy reply to ``question`` about ``image``, a thinking model's reasoning included."""
        import torch

        batch = self.inputs(image, question, system_prompt)
        with torch.inference_mode():
            out = self.model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False)
        new = out[0, batch["input_ids"].shape[1] :]
        return self.processor.batch_decode([new], skip_special_tokens=True)[0].strip()

    def answer(self, image: Any, question: str, system_prompt: str = "", *, max_new_tokens: int = 64) -> str:
        """The greedy answer to ``question`` about ``image`` (a thinking model's reasoning stripped,
        ``parsing.strip_thinking``; empty when the reasoning did not end within ``max_new_tokens``)."""
        return strip_thinking(self.reply(image, question, system_prompt, max_new_tokens=max_new_tokens))

    def attention(
        self, image: Any, question: str, system_prompt: str = "", thought: str = ""
    ) -> AttentionRows:
        """The answer position's attention to the image tokens at the selected layers (one pass):
        the last prompt position, after ``thought`` for a thinking model (``thought_of``)."""
        import torch

        batch = self.inputs(image, question, system_prompt, thought)
        ids = batch["input_ids"][0]
        image_pos = (ids == self.image_token_id).nonzero().flatten()
        thw = batch["image_grid_thw"][0].tolist()
        grid = (int(thw[1]) // self.merge, int(thw[2]) // self.merge)
        if int(thw[0]) * grid[0] * grid[1] != len(image_pos) or int(thw[0]) != 1:
            raise ValueError(f"{len(image_pos)} image tokens do not form the processor's {thw} grid")
        query = len(ids) - 1  # the position whose output is the answer's first token
        rows: dict[int, np.ndarray] = {}
        largest = 0

        def hook(index: int) -> Any:
            def keep_row(_module: Any, _args: Any, output: Any) -> None:
                nonlocal largest
                weights = output[1]
                if weights is None:
                    raise RuntimeError("the attention module returned no weights (not eager attention)")
                largest = max(largest, weights.numel() * weights.element_size())
                rows[index] = weights[0, :, query, image_pos].float().cpu().numpy()

            return keep_row

        layers = text_layers(self.model)
        handles = [layers[i].self_attn.register_forward_hook(hook(i)) for i in self.layers]
        try:
            with torch.inference_mode(), eager_text_attention(self.model):
                self.model(**batch, use_cache=False, logits_to_keep=1)
        finally:
            for handle in handles:
                handle.remove()
        return AttentionRows(
            attention=np.stack([rows[i] for i in self.layers]),
            grid=grid,
            layers=self.layers,
            tokens=len(ids),
            largest_matrix_bytes=largest,
            all_layers_bytes=largest * len(layers),
        )


def thought_of(reply: str) -> str:
    """A thinking model's reasoning at the start of ``reply``: everything before the answer
    ``parsing.strip_thinking`` keeps (up to the last closing tag, ``</think>``, …), or "" when
    there is no reasoning or no answer. The answer's first token follows it, so the attention that
    produced the answer is read after it (``VLMProbe.attention``)."""
    answer = strip_thinking(reply)
    start = reply.rfind(answer) if answer else -1
    return reply[:start].rstrip() if start > 0 else ""
