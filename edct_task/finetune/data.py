"""Fine-tuning items from labelled pairs: the held-out split and TRL's prompt–completion rows.

An *item* is one image with its question and gold answer: each pair gives an original item and a
counterfactual item. The split is by *sample* (seeded): all chain steps of a sample, and so its
original image, fall on one side, so no held-out image is ever trained on.

Rows for TRL's ``SFTTrainer`` are conversational prompt–completion examples with the image in an
``images`` column: ``prompt`` = (system?, user question), ``completion`` = (assistant gold
answer). TRL's vision collator puts the image placeholder into the first user turn, renders the
chat template, runs the processor, and masks the prompt out of the labels (loss on the answer
only). Message contents are plain strings so a ``datasets`` table cannot merge text and image
blocks into one schema (a text block with an ``image: None`` key renders as an image in Qwen's
chat template).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image

from edct_task.attention.pairs import Pair
from edct_task.finetune.labels import Gold

__all__ = ["AnswerOnlyLabels", "Item", "items_of", "split_pairs", "trl_row"]

Side = Literal["original", "counterfactual"]


@dataclass(frozen=True)
class Item:
    """One image, its question and gold answer."""

    key: str
    """``<sample id>/original`` or ``<pair id>/counterfactual``."""
    side: Side
    pair: Pair
    gold: str

    def image(self) -> Image.Image:
        path = self.pair.original_image if self.side == "original" else self.pair.edited_image
        with Image.open(path) as img:
            return img.convert("RGB")


def split_pairs(pairs: list[Pair], held_out: float, seed: int) -> tuple[list[Pair], list[Pair]]:
    """(train, held-out) by sample, seeded; at least one sample on each side when there are two."""
    if not 0.0 < held_out < 1.0:
        raise ValueError(f"held_out must lie in (0, 1); got {held_out}")
    samples = sorted({p.sample_id for p in pairs})
    random.Random(seed).shuffle(samples)
    n = min(len(samples) - 1, max(1, round(held_out * len(samples)))) if len(samples) > 1 else 0
    test = set(samples[:n])
    return [p for p in pairs if p.sample_id not in test], [p for p in pairs if p.sample_id in test]


def items_of(pairs: list[Pair], gold: dict[str, Gold], side: Side) -> list[Item]:
    """The items of one side; originals once per sample (chain steps share the original image)."""
    out: list[Item] = []
    seen: set[str] = set()
    for p in pairs:
        if p.id not in gold:
            continue
        key = f"{p.sample_id}/original" if side == "original" else f"{p.id}/counterfactual"
        if key in seen:
            continue
        seen.add(key)
        out.append(
            Item(key, side, p, gold[p.id].original if side == "original" else gold[p.id].counterfactual)
        )
    return out


def trl_row(item: Item) -> dict[str, Any]:
    """A conversational prompt–completion example with its image (see the module notes)."""
    prompt = []
    if item.pair.system_prompt:
        prompt.append({"role": "system", "content": item.pair.system_prompt})
    prompt.append({"role": "user", "content": item.pair.question})
    return {
        "images": [item.image()],
        "prompt": prompt,
        "completion": [{"role": "assistant", "content": item.gold}],
    }


class AnswerOnlyLabels:
    """A collator wrapper: labels stop at the end-of-turn token that closes the answer.

    TRL renders the completion with the chat template, which writes a newline after
    ``<|im_end|>``; a chat model never predicts it (generation stops at ``<|im_end|>``), so it would
    add several nats to every item's loss and hide what the paper measures (the loss of the
    answer). Labels after the first end-of-turn token of each row become -100, in training and in
    the before/after losses alike.
    """

    def __init__(self, collator: Any, end_token_id: int) -> None:
        self.collator = collator
        self.end_token_id = int(end_token_id)

    def __call__(self, examples: list[dict[str, Any]]) -> Any:
        import torch

        batch = self.collator(examples)
        labels = batch["labels"]
        is_end = (labels == self.end_token_id).int()
        after_end = (torch.cumsum(is_end, dim=1) - is_end) > 0
        batch["labels"] = labels.masked_fill(after_end, -100)
        return batch
