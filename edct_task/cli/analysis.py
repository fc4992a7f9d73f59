"""``edct attention`` and ``edct finetune``: the paper's §4.6 on exported counterfactual pairs."""

from __future__ import annotations

import argparse
from pathlib import Path

COMMANDS = ("attention", "finetune")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source", type=Path, metavar="EXPORT", help="an export-counterfactuals folder, or a run folder"
    )
    p.add_argument("--model", type=Path, required=True, help="a transformers VLM folder (Qwen3-VL style)")
    p.add_argument("--out", type=Path, required=True, help="output folder (written atomically)")
    p.add_argument(
        "--layers",
        help="text layers to read: indices (7-12, 7,9,12) or a relative band (0.19-0.33); "
        "default: the paper's 7-12 of 36, scaled to the model's depth",
    )
    p.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--dtype", default="auto", help="weights dtype (auto, bfloat16, float32)")
    p.add_argument("--max-new-tokens", type=int, default=16, help="length cap of the greedy answers")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap CIs (and of the split)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")


def add_parser(sub: argparse._SubParsersAction) -> None:
    att = sub.add_parser(
        "attention",
        help="attention saliency of the answer token on original and counterfactual images, "
        "with a localization score inside the edit mask",
        description="For each verified pair: the model's answer, the attention of the answer position to "
        "the image tokens at the selected text layers (eager, hooked one layer at a time), the paper's "
        "saliency recipe (layer-mean subtraction, head-variance weighting, squaring, 25th-percentile cut, "
        "bicubic upscale) and the share of saliency inside the edit's mask M against M's share of the image. "
        "Writes attention.json, summary.md, overlays/ and index.html.",
    )
    _common(att)
    att.add_argument("--adapter", type=Path, help="a LoRA adapter folder (edct finetune's OUT/adapter)")
    att.add_argument("--max-pairs", type=int, help="only the first N pairs")


def run(args: argparse.Namespace) -> int:
    if args.command == "attention":
        from edct_task.attention.tool import AttentionRequest, run_attention

        doc = run_attention(
            AttentionRequest(
                source=args.source,
                model=args.model,
                out=args.out,
                layers=args.layers,
                max_pairs=args.max_pairs,
                device=args.device,
                dtype=args.dtype,
                adapter=args.adapter,
                max_new_tokens=args.max_new_tokens,
                overwrite=args.overwrite,
                seed=args.seed,
            )
        )
        s = doc["summary"]
        loc = s["localization"]
        print(
            f"{s['scored_pairs']}/{s['pairs']} pairs scored (errors {s['errors']}, no mask {s['no_mask']}); "
            f"localization original {_est(loc['original'])}, counterfactual {_est(loc['counterfactual'])}"
        )
        print(f"wrote {args.out}/attention.json, summary.md, index.html, overlays/")
        return 0
    raise AssertionError(args.command)


def _est(ci: dict) -> str:
    if ci["estimate"] is None:
        return "–"
    return f"{ci['estimate']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"
