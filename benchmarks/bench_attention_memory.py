"""Peak memory of one ``edct attention`` pass: hooked layers (ours) vs ``output_attentions=True``.

    python benchmarks/bench_attention_memory.py --model DIR [--image 1600x900] [--device cuda]
    python benchmarks/bench_attention_memory.py --shape qwen3-vl-8b --processor TINY_DIR --device cuda

``--model`` measures a saved model (the tiny Qwen3-VL of the tests, or a local Qwen3-VL-8B).
``--shape qwen3-vl-8b`` builds a model of Qwen3-VL-8B's published shape with random bf16 weights
directly on the device (nothing is downloaded; about 17.5 GB of GPU memory) and reuses the tiny
model's processor (same patch 16, merge 2 and special tokens), so the measured pass has the real
8B layer sizes and token counts. On CUDA the numbers are ``torch.cuda.max_memory_allocated`` per
pass; on CPU the process's peak RSS (``ru_maxrss``) after each pass, which only ever grows. Each
line also gives ``edct_task.attention.memory.estimate`` for the same shape and prompt length.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from edct_task.attention.memory import QWEN3_VL_8B, ModelShape, estimate, gib
from edct_task.attention.probe import VLMProbe


def build_8b_shape(processor_dir: Path, device: str):
    from transformers import AutoProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration

    processor = AutoProcessor.from_pretrained(str(processor_dir))
    tiny = json.loads((processor_dir / "config.json").read_text())
    config = Qwen3VLConfig(
        text_config=dict(
            vocab_size=151936,
            hidden_size=4096,
            intermediate_size=12288,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=False,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 5e6,
                "mrope_section": [24, 20, 20],
                "mrope_interleaved": True,
            },
        ),
        vision_config=dict(
            depth=27,
            hidden_size=1152,
            intermediate_size=4304,
            num_heads=16,
            out_hidden_size=4096,
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
            num_position_embeddings=2304,
            deepstack_visual_indexes=[8, 16, 24],
        ),
        image_token_id=tiny["image_token_id"],
        video_token_id=tiny["video_token_id"],
        vision_start_token_id=tiny["vision_start_token_id"],
        vision_end_token_id=tiny["vision_end_token_id"],
        tie_word_embeddings=False,
    )
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = Qwen3VLForConditionalGeneration(config).eval()
    torch.set_default_dtype(torch.float32)
    model.set_attn_implementation({"text_config": "eager", "vision_config": "sdpa"})
    return model, processor


def peak(device: str) -> int:
    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated())
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--shape", choices=("qwen3-vl-8b",))
    ap.add_argument("--processor", type=Path, help="with --shape: the tiny model folder (its processor)")
    ap.add_argument(
        "--image", default="1600x900", help="WxH of the test image (DriveLM front camera: 1600x900)"
    )
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    w, h = (int(x) for x in args.image.split("x"))
    if args.shape:
        model, processor = build_8b_shape(args.processor, args.device)
        probe, shape = VLMProbe(model, processor), QWEN3_VL_8B
    else:
        probe = VLMProbe.load(args.model, device=args.device)
        text = probe.model.config.text_config
        shape = ModelShape(
            parameters=sum(p.numel() for p in probe.model.parameters()),
            text_layers=text.num_hidden_layers,
            heads=text.num_attention_heads,
            hidden=text.hidden_size,
            dtype_bytes=next(probe.model.parameters()).element_size(),
        )
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8))
    question = "How many wheel axles does the white vehicle on the left have? Reply with just a number."
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    base = peak(args.device)
    rows = probe.attention(image, question)
    hooked = peak(args.device)
    batch = probe.inputs(image, question)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        out = probe.model(**batch, output_attentions=True, use_cache=False, logits_to_keep=1)
        kept = sum(a.numel() * a.element_size() for a in out.attentions)
        del out
    full = peak(args.device)
    est = estimate(shape, rows.tokens)
    print(
        f"{'8B-shape' if args.shape else args.model.name} on {args.device}, {w}x{h}, T={rows.tokens}: "
        f"before {gib(base)}; hooked pass peak {gib(hooked)} "
        f"(largest matrix {gib(rows.largest_matrix_bytes)}, kept {rows.attention.nbytes} B); "
        f"output_attentions peak {gib(full)} (kept {gib(kept)}); estimate hooked "
        f"{gib(est['hooked_peak_bytes'])}, output_attentions {gib(est['output_attentions_peak_bytes'])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
