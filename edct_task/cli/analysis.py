"""``edct attention`` and ``edct finetune``: the paper's §4.6 on exported counterfactual pairs."""

from __future__ import annotations

import argparse
from pathlib import Path

from edct_task.cli.options import add_output

COMMANDS = ("attention", "finetune")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source", type=Path, metavar="EXPORT", help="an export-counterfactuals folder, or a run folder"
    )
    p.add_argument("--model", type=Path, required=True, help="a transformers VLM folder (Qwen3-VL style)")
    add_output(p, "output folder (written atomically)", required=True)
    p.add_argument(
        "--layers",
        help="text layers to read: indices (7-12, 7,9,12) or a relative band (0.19-0.33); "
        "default: the paper's 7-12 of 36, scaled to the model's depth",
    )
    p.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--dtype", default="auto", help="weights dtype (auto, bfloat16, float32)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=64,
        help="length cap of the greedy replies (a thinking model's reasoning included)",
    )
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

    ft = sub.add_parser(
        "finetune",
        help="LoRA (Q-LoRA on CUDA) fine-tuning on counterfactual pairs with gold answers, "
        "with accuracy, loss and attention localization before, during and after",
        description="Gold answers come from the calibration world or --labels (JSONL: id, original, "
        "counterfactual). Pairs are split by sample into train and held-out; TRL's SFTTrainer trains LoRA "
        "adapters (peft) on the language model; before training: accuracy and loss on originals and "
        "counterfactuals; after each epoch: held-out accuracy and localization. Writes OUT/adapter, "
        "OUT/report/ (figure.png, summary.md) and OUT/finetune.json.",
    )
    _common(ft)
    ft.add_argument(
        "--labels", type=Path, help="gold answers per pair id (JSONL); calibration pairs need none"
    )
    ft.add_argument("--held-out", type=float, default=0.25, help="share of samples held out (default 0.25)")
    ft.add_argument("--epochs", type=int, default=3, help="training epochs (3)")
    ft.add_argument("--learning-rate", type=float, default=2e-4, help="learning rate (2e-4)")
    ft.add_argument("--lora-r", type=int, default=16, help="LoRA rank (16)")
    ft.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (32)")
    ft.add_argument("--batch-size", type=int, default=1, help="items per device batch (1)")
    ft.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps (1)")
    ft.add_argument(
        "--train-on",
        choices=("both", "counterfactual"),
        default="both",
        help="train on originals and counterfactuals (default) or on counterfactuals only",
    )
    ft.add_argument(
        "--no-quantize",
        action="store_true",
        help="plain LoRA even on CUDA (default there: Q-LoRA, 4-bit NF4)",
    )
    ft.add_argument("--max-pairs", type=int, help="only the first N pairs")


def run(args: argparse.Namespace) -> int:
    if args.command == "attention":
        from edct_task.attention.tool import AttentionRequest, run_attention

        doc = run_attention(
            AttentionRequest(
                source=args.source,
                model=args.model,
                out=args.output,
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
        mem = doc["memory"]
        print(f"wrote {args.output}/attention.json, summary.md, index.html, overlays/")
        peak = mem.get("peak_cuda_allocated_bytes", mem["peak_process_rss_bytes"])
        print(
            f"{s['scored_pairs']}/{s['pairs']} pairs scored (errors {s['errors']}, no mask {s['no_mask']}); "
            f"localization original {_est(loc['original'])}, counterfactual {_est(loc['counterfactual'])}; "
            f"peak memory {peak / 2**30:.2f} GiB"
        )
        return 0
    from edct_task.finetune.train import FinetuneRequest, run_finetune

    doc = run_finetune(
        FinetuneRequest(
            source=args.source,
            model=args.model,
            out=args.output,
            labels=args.labels,
            held_out=args.held_out,
            epochs=args.epochs,
            learning_rate=args.learning_rate,
            lora_r=args.lora_r,
            lora_alpha=args.lora_alpha,
            batch_size=args.batch_size,
            grad_accum=args.grad_accum,
            train_on=args.train_on,
            quantize="never" if args.no_quantize else "auto",
            layers=args.layers,
            device=args.device,
            max_pairs=args.max_pairs,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            overwrite=args.overwrite,
        ),
        progress=lambda msg: print(msg, flush=True),
    )
    print(f"wrote {args.output}/finetune.json, adapter/, report/")
    b, a = doc["before"]["all"], doc["after"]["held_out"]
    ratio = b["loss_ratio_counterfactual_to_original"]
    print(
        f"before: accuracy original {_est(b['original']['accuracy'])}, counterfactual "
        f"{_est(b['counterfactual']['accuracy'])}; initial loss ratio "
        + ("–" if ratio is None else f"{ratio:.2f}")
    )
    print(
        f"after (held-out): accuracy original {_est(a['original']['accuracy'])}, counterfactual "
        f"{_est(a['counterfactual']['accuracy'])} ({doc['mode']}, {doc['device']})"
    )
    return 0


def _est(ci: dict) -> str:
    if ci["estimate"] is None:
        return "–"
    return f"{ci['estimate']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"
