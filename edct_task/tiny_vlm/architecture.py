"""The tiny Qwen3-VL: its config, its tokenizer (trained on the calibration world's text), its processor.

Everything is a real transformers class (``Qwen3VLForConditionalGeneration``, ``Qwen2Tokenizer``,
``Qwen2VLImageProcessor``, ``Qwen3VLProcessor``) so that ``from_pretrained``, lmms-eval's
``qwen3_vl`` and vLLM load the saved folder like any Qwen3-VL checkpoint. Sizes:

- text: 2 layers, hidden 64, 4 query heads and 2 key/value heads of size 64 (vLLM's CPU attention
  rejects 16), multimodal rotary sections ``[16, 8, 8]``;
- vision: 2 blocks, hidden 48, patch 16, spatial merge 2 (Qwen3-VL's own patch geometry);
- images: Qwen3-VL's own pixel bounds (``MIN_PIXELS`` = 65,536): a 384×288 calibration picture
  keeps its size (both sides are multiples of 32) and becomes 12×9 = 108 visual tokens in
  transformers, lmms-eval's ``qwen3_vl`` chat model (it resizes with ``qwen_vl_utils`` whose
  floor is lower) and vLLM alike.
"""

from __future__ import annotations

import json
from typing import Any

from edct_task.calibration import world
from edct_task.engine.protocol import why_prompt
from model_adapters.lmms_eval_target import render_quoted

SPECIALS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
"""Qwen3-VL's special tokens, in its order."""
NON_SPECIAL_ADDED: tuple[str, ...] = ("<tool_call>", "</tool_call>", "<think>", "</think>")

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
"""The system prompt lmms-eval's ``qwen3_vl`` puts before every conversation."""

MIN_PIXELS = 256 * 256
"""The image processor's floor (Qwen3-VL's own ``shortest_edge``)."""
MAX_PIXELS = 1605632
"""The image processor's ceiling (lmms-eval ``qwen3_vl``'s default ``max_pixels``)."""

VOCAB_SIZE = 640
"""Size of the trained byte-level BPE vocabulary (before the special tokens)."""

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for content in message['content'] %}"
    "{%- if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif content['type'] == 'video' or 'video' in content %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif 'text' in content %}{{- content['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Qwen3-VL's chat layout (``<|im_start|>role\\n…<|im_end|>``, vision pads in place), no thinking."""


def corpus() -> list[str]:
    """Every text the calibration world's conversations contain (the tokenizer's training text)."""
    texts = [DEFAULT_SYSTEM_PROMPT, world.DRIVING_SYSTEM_PROMPT, why_prompt()]
    texts += [q for qs in world.QUESTIONS.values() for q in qs]
    texts += list(world.ANSWER_TEXT.values())
    texts += ["I cannot tell from this image.", "1. I could not make out the relevant objects in the image."]
    for family in world.FAMILIES:
        for config in world.configs(family):
            cues = world.cited_order(family, config)
            texts.append("\n".join(f"{i}. {world.sentence(c)}" for i, c in enumerate(cues, 1)))
            keys = world.FAMILY_CUES[family]
            thought = [world.Cue(*key, value) for key, value in zip(keys, config, strict=True)]
            answer = world.ANSWER_TEXT[world.rule(family, config)]
            texts.append(" ".join(world.sentence(c) for c in thought) + answer)
    from edct_task.core.requests import Message

    question = world.QUESTIONS["spatial"][0]
    conversation = (Message("user", question), Message("assistant", "Away."), Message("user", why_prompt()))
    texts.append(render_quoted(conversation, tag="[image 0123456789ab]"))
    texts.append("0123456789abcdef [image ]")
    texts += ["system\n", "user\n", "assistant\n"] * 3
    return texts * 4


def build_tokenizer() -> Any:
    """A ``Qwen2Tokenizer`` over a byte-level BPE trained (deterministically) on ``corpus()``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer)
    merges = [
        tuple(m) if isinstance(m, list) else tuple(m.split(" "))
        for m in json.loads(bpe.to_str())["model"]["merges"]
    ]
    tok = Qwen2Tokenizer(
        vocab=bpe.get_vocab(),
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok.add_special_tokens({"additional_special_tokens": list(SPECIALS[1:])})
    tok.add_tokens(list(NON_SPECIAL_ADDED))
    tok.chat_template = CHAT_TEMPLATE
    tok.model_max_length = 32768
    return tok


def build_processor(tok: Any) -> Any:
    """The real Qwen3-VL processor around ``tok``, with Qwen3-VL's image geometry (patch 16, merge 2)."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        image_mean=[0.5] * 3,
        image_std=[0.5] * 3,
        size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
    )
    video_processor = Qwen3VLVideoProcessor(
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        image_mean=[0.5] * 3,
        image_std=[0.5] * 3,
        size={"shortest_edge": 4096, "longest_edge": 25165824},
        fps=2,
        min_frames=4,
        max_frames=768,
    )
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def build_model(tok: Any, *, seed: int) -> Any:
    """A freshly initialised (seeded) ``Qwen3VLForConditionalGeneration`` for ``tok``'s vocabulary."""
    import torch
    from transformers import GenerationConfig, Qwen3VLConfig, Qwen3VLForConditionalGeneration

    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    head_dim = 64
    config = Qwen3VLConfig(
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 64,
            "intermediate_size": 192,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": True,
            "initializer_range": 0.02,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10_000.0,
                "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8],
                "mrope_interleaved": True,
            },
        },
        vision_config={
            "depth": 2,
            "hidden_size": 48,
            "intermediate_size": 96,
            "num_heads": 2,
            "in_channels": 3,
            "hidden_act": "gelu_pytorch_tanh",
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 64,
            "num_position_embeddings": 256,
            "deepstack_visual_indexes": [1],
            "initializer_range": 0.02,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"],
        pad_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        do_sample=False,
    )
    return model
