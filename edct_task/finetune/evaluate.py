"""Before/after numbers of ``edct finetune``: accuracy and per-item loss on originals and counterfactuals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from edct_task.attention.analyse import map_pair, summarise
from edct_task.attention.pairs import Pair
from edct_task.attention.probe import VLMProbe
from edct_task.finetune.data import Item, trl_row
from edct_task.finetune.labels import is_correct
from edct_task.scoring.statistics import bootstrap_ci, wilson_interval

__all__ = ["accuracy", "item_losses", "localization_summary", "side_numbers"]


def accuracy(probe: VLMProbe, items: Sequence[Item], *, max_new_tokens: int = 64) -> list[dict[str, Any]]:
    """The greedy answer of every item and whether it is correct."""
    out = []
    for item in items:
        answer = probe.answer(
            item.image(), item.pair.question, item.pair.system_prompt, max_new_tokens=max_new_tokens
        )
        out.append(
            {"key": item.key, "answer": answer, "correct": is_correct(answer, item.gold, item.pair.question)}
        )
    return out


def item_losses(
    model: Any, collator: Callable[[list[dict[str, Any]]], Any], items: Sequence[Item]
) -> list[float]:
    """Mean cross-entropy over each item's gold-answer tokens (the training loss of a batch of one)."""
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    losses = []
    try:
        with torch.inference_mode():
            for item in items:
                batch = {k: v.to(device) for k, v in collator([trl_row(item)]).items()}
                losses.append(float(model(**batch).loss))
    finally:
        model.train(was_training)
    return losses


def side_numbers(
    items: Sequence[Item], answers: Sequence[dict[str, Any]] | None, losses: Sequence[float] | None
) -> dict[str, Any]:
    """Accuracy (Wilson CI) and mean loss (bootstrap CI) per side; the counterfactual/original loss ratio."""
    out: dict[str, Any] = {}
    for side in ("original", "counterfactual"):
        idx = [i for i, it in enumerate(items) if it.side == side]
        entry: dict[str, Any] = {"items": len(idx)}
        if answers is not None:
            correct = sum(bool(answers[i]["correct"]) for i in idx)
            entry["accuracy"] = wilson_interval(correct, len(idx)).as_dict() if idx else None
        if losses is not None:
            entry["loss"] = bootstrap_ci(np.array([losses[i] for i in idx], dtype=np.float64)).as_dict()
        out[side] = entry
    if losses is not None:
        o, c = out["original"]["loss"]["estimate"], out["counterfactual"]["loss"]["estimate"]
        out["loss_ratio_counterfactual_to_original"] = None if not o or c is None else c / o
    return out


def localization_summary(
    probe: VLMProbe, pairs: Sequence[Pair], *, max_new_tokens: int = 64, seed: int = 0
) -> dict[str, Any]:
    """``edct attention``'s summary over ``pairs`` with the probe's current weights."""
    return summarise([map_pair(probe, p, max_new_tokens=max_new_tokens) for p in pairs], seed=seed)
