"""Train the tiny Qwen3-VL on the calibration world and save the checkpoint folder.

A plain seeded PyTorch loop (AdamW, linear warm-up, cosine decay) over freshly generated
examples (``examples.example``): the loss is the next-token cross-entropy on the assistant turns
only (the answer and the explanation, each with its ``<|im_end|>``). Written by hand rather than
with TRL's ``SFTTrainer`` because the whole loop is a dozen lines, the examples are generated on
the fly in several conversation shapes, and determinism on CPU needs the thread count and the
algorithms pinned, which the loop states in one place.

Images go in at their own size (the grid every chat runtime uses, see ``architecture``).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edct_task.tiny_vlm import architecture
from edct_task.tiny_vlm.examples import Example, example

TRAINING_INFO = "edct_training.json"
"""The file in a checkpoint folder that records how it was trained (and what it measured)."""


@dataclass(frozen=True)
class TrainSettings:
    """Everything that decides the trained weights."""

    behavior: str = "faithful"
    seed: int = 0
    steps: int = 120
    batch_size: int = 16
    lr: float = 5e-3
    warmup: int = 10
    weight_decay: float = 0.01
    threads: int = 1
    """torch CPU threads (pinned: results are bitwise reproducible for a fixed count)."""


RECIPE_STEPS: dict[str, int] = {"faithful": 400, "prior": 120}
"""Optimiser steps per behaviour. The prior checkpoint only learns text (its pictures say nothing
about the answer), which it has learned by step 120; reading the pixels takes the faithful one
longer: its loss leaves the text-only floor (≈ 0.16) after step ~90 and keeps falling."""


def recipe(behavior: str, *, seed: int = 0) -> TrainSettings:
    """The settings ``edct tiny-vlm path`` trains ``behavior`` with."""
    return TrainSettings(behavior=behavior, seed=seed, steps=RECIPE_STEPS[behavior])


def encode(processor: Any, batch: Sequence[Example]) -> dict[str, Any]:
    """Model inputs for a batch (right-padded) with ``labels`` on the assistant tokens only."""
    import torch

    tok = processor.tokenizer
    texts = [processor.apply_chat_template(ex.messages, tokenize=False) for ex in batch]
    images = [ex.image.convert("RGB") for ex in batch]
    inputs = processor(text=texts, images=images, padding=True, return_tensors="pt")
    ids = inputs["input_ids"]
    labels = torch.full_like(ids, -100)
    start, end = tok.convert_tokens_to_ids("<|im_start|>"), tok.convert_tokens_to_ids("<|im_end|>")
    head = tok("assistant\n", add_special_tokens=False)["input_ids"]
    for row in range(ids.shape[0]):
        seq = ids[row].tolist()
        for i, t in enumerate(seq):
            if t == start and seq[i + 1 : i + 1 + len(head)] == head:
                j = i + 1 + len(head)
                k = seq.index(end, j)
                labels[row, j : k + 1] = ids[row, j : k + 1]
    if bool((labels == -100).all(dim=1).any()):
        raise RuntimeError("an example has no assistant tokens: the chat template and the labels disagree")
    inputs["labels"] = labels
    return dict(inputs)


def _lr_at(step: int, s: TrainSettings) -> float:
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def train(out: Path, settings: TrainSettings, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train a checkpoint and save it (model, tokenizer, processor, ``edct_training.json``) to ``out``."""
    import torch

    torch.set_num_threads(settings.threads)
    torch.use_deterministic_algorithms(True)
    tok = architecture.build_tokenizer()
    processor = architecture.build_processor(tok)
    model = architecture.build_model(tok, seed=settings.seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    optim = torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": other, "weight_decay": 0.0}],
        lr=settings.lr,
        betas=(0.9, 0.98),
    )
    wall, cpu = time.perf_counter(), time.process_time()
    losses: list[float] = []
    index = 0
    for step in range(settings.steps):
        batch = [
            example(index + i, behavior=settings.behavior, seed=settings.seed)
            for i in range(settings.batch_size)
        ]
        index += settings.batch_size
        inputs = encode(processor, batch)
        for group in optim.param_groups:
            group["lr"] = _lr_at(step, settings)
        loss = model(**inputs).loss
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        losses.append(float(loss.detach()))
        if step % 10 == 0 or step == settings.steps - 1:
            recent = losses[-10:]
            log(
                f"step {step + 1}/{settings.steps}  loss {sum(recent) / len(recent):.4f}  "
                f"cpu {time.process_time() - cpu:.0f} s  wall {time.perf_counter() - wall:.0f} s"
            )
    model.eval()
    info = {
        "settings": asdict(settings),
        "examples_seen": index,
        "final_loss": sum(losses[-25:]) / len(losses[-25:]),
        "train_wall_s": round(time.perf_counter() - wall, 1),
        "train_cpu_s": round(time.process_time() - cpu, 1),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    save(out, model, processor, info)
    return info


def save(out: Path, model: Any, processor: Any, info: dict[str, Any]) -> None:
    """Write the checkpoint folder; ``info`` gains the weights' SHA-256 and the folder's size."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    processor.tokenizer.save_pretrained(out)
    weights = out / "model.safetensors"
    info["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    info["size_bytes"] = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    (out / TRAINING_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
