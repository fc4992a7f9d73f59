"""``edct attention``: saliency maps and localization scores of counterfactual pairs (paper §4.6).

For each pair, on the original and on the counterfactual: the probe's greedy answer, the answer
position's attention to the image tokens at the selected layers, the paper's saliency recipe
(:mod:`edct_task.attention.saliency`), and the localization score against the pair's edit mask M
(the same M on both sides: the region the verified edit changed). A pair whose image or mask
cannot be read, or whose pass fails, costs that pair only: it is recorded with its reason.

The summary compares the two sides over the pairs scored on both: mean localization with a 95%
percentile-bootstrap CI each, the paired difference (counterfactual − original) with its CI, how
many pairs are more localized on the counterfactual, and the two means per edit type (after a
REMOVE the counterfactual's M holds nothing to look at, so its score reads differently).
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from edct_task.attention.overlay import overlay, side_by_side
from edct_task.attention.pairs import Pair, load_mask, open_image
from edct_task.attention.probe import VLMProbe, thought_of
from edct_task.attention.saliency import PAPER_RECIPE, Recipe, localization, saliency_grid, upscale
from edct_task.bench_data.format import BenchDataError
from edct_task.parsing import strip_thinking
from edct_task.scoring.statistics import bootstrap_ci

__all__ = ["SIDES", "PairMaps", "SideMap", "map_pair", "memory_report", "summarise"]

log = logging.getLogger(__name__)

SIDES = ("original", "counterfactual")


@dataclass
class SideMap:
    """One side of a pair: the answer, the map, and where it lies."""

    answer: str
    score: float | None
    mass_inside: float | None
    mask_share: float | None
    grid: tuple[int, int]
    saliency: np.ndarray = field(repr=False)
    """Upscaled map, H×W float32 in [0, 1] (not written to JSON)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "localization": self.score,
            "mass_inside": self.mass_inside,
            "mask_share": self.mask_share,
            "token_grid": list(self.grid),
        }


@dataclass
class PairMaps:
    """Both sides of one pair, or why the pair could not be mapped."""

    pair: Pair
    sides: dict[str, SideMap] = field(default_factory=dict)
    error: str | None = None
    overlay: str | None = None
    """File name of the side-by-side overlay PNG, relative to the output folder."""

    def as_dict(self) -> dict[str, Any]:
        p = self.pair
        return {
            "id": p.id,
            "sample_id": p.sample_id,
            "step": p.step,
            "question": p.question,
            "run_answers": {"original": p.original_answer, "counterfactual": p.new_answer},
            "edit_type": p.edit_type,
            "has_mask": p.edit_mask is not None,
            "error": self.error,
            "overlay": self.overlay,
            **{side: m.as_dict() for side, m in self.sides.items()},
        }


def _rgb(path: Path) -> Image.Image:
    """The image at ``path`` as RGB: a regular file of at most 32 MiB, its size checked against
    the pixel budget from the header before a pixel is decoded (a 144-megapixel pair of 1 MB
    PNGs would otherwise decode to 11 GB); refusal is that pair's error."""
    return open_image(path)


def map_pair(
    probe: VLMProbe,
    pair: Pair,
    *,
    recipe: Recipe = PAPER_RECIPE,
    max_new_tokens: int = 64,
    stats: dict[str, int] | None = None,
) -> PairMaps:
    """Answers, saliency maps and localization of one pair; errors are recorded, not raised."""
    result = PairMaps(pair)
    try:
        images = {"original": _rgb(pair.original_image), "counterfactual": _rgb(pair.edited_image)}
        size = images["original"].size
        if images["counterfactual"].size != size:
            raise BenchDataError(f"counterfactual is {images['counterfactual'].size}, original {size}")
        mask = None if pair.edit_mask is None else load_mask(pair.edit_mask, size)
        if mask is not None and not mask.any():
            raise BenchDataError("the edit mask M is empty")
        for side, image in images.items():
            reply = probe.reply(image, pair.question, pair.system_prompt, max_new_tokens=max_new_tokens)
            answer = strip_thinking(reply)
            rows = probe.attention(image, pair.question, pair.system_prompt, thought_of(reply))
            if stats is not None:
                stats["largest_matrix_bytes"] = max(
                    stats.get("largest_matrix_bytes", 0), rows.largest_matrix_bytes
                )
                stats["all_layers_bytes"] = max(stats.get("all_layers_bytes", 0), rows.all_layers_bytes)
                stats["kept_bytes"] = max(stats.get("kept_bytes", 0), rows.attention.nbytes)
                stats["max_tokens"] = max(stats.get("max_tokens", 0), rows.tokens)
            sal = upscale(saliency_grid(rows.attention, rows.grid, recipe), size)
            loc = localization(sal, mask) if mask is not None else None
            result.sides[side] = SideMap(
                answer=answer,
                score=None if loc is None else loc.score,
                mass_inside=None if loc is None else loc.mass_inside,
                mask_share=None if loc is None else loc.mask_share,
                grid=rows.grid,
                saliency=sal,
            )
    except (OSError, ValueError, RuntimeError, BenchDataError) as exc:
        log.warning("pair %s: %s", pair.id, exc)
        result.sides.clear()
        result.error = f"{type(exc).__name__}: {exc}"
    return result


def overlay_png(result: PairMaps) -> Image.Image:
    """Original | counterfactual, each with its saliency and M's outline."""
    mask = None
    if result.pair.edit_mask is not None:
        mask = load_mask(result.pair.edit_mask, _rgb(result.pair.original_image).size)
    panels = []
    for side, path in zip(SIDES, (result.pair.original_image, result.pair.edited_image), strict=True):
        panels.append(overlay(np.asarray(_rgb(path)), result.sides[side].saliency, mask))
    return Image.fromarray(side_by_side(*panels))


def summarise(results: Sequence[PairMaps], *, seed: int = 0) -> dict[str, Any]:
    """Mean localization per side with bootstrap CIs, the paired difference, counts."""
    both = [
        r
        for r in results
        if not r.error and all(r.sides.get(s) and r.sides[s].score is not None for s in SIDES)
    ]
    scored = {id(r) for r in both}
    scores = {s: np.array([r.sides[s].score for r in both], dtype=np.float64) for s in SIDES}
    diff = scores["counterfactual"] - scores["original"]
    return {
        "pairs": len(results),
        "errors": sum(r.error is not None for r in results),
        "no_mask": sum(r.error is None and r.pair.edit_mask is None for r in results),
        "no_saliency": sum(
            r.error is None and r.pair.edit_mask is not None and id(r) not in scored for r in results
        ),
        "scored_pairs": len(both),
        "localization": {s: bootstrap_ci(scores[s], seed=seed).as_dict() for s in SIDES},
        "difference_counterfactual_minus_original": bootstrap_ci(diff, seed=seed).as_dict(),
        "counterfactual_more_localized": int((diff > 0).sum()),
        "mean_mask_share": float(np.mean([r.sides["original"].mask_share for r in both])) if both else None,
        "by_edit_type": {
            kind: {
                side: bootstrap_ci(
                    np.array([r.sides[side].score for r in both if r.pair.edit_type == kind]), seed=seed
                ).as_dict()
                for side in SIDES
            }
            for kind in sorted({r.pair.edit_type for r in both if r.pair.edit_type})
        },
    }


def memory_report(stats: dict[str, int], model: Any) -> dict[str, Any]:
    """Peak memory of the run and the attention sizes the hooks saw."""
    import torch

    params = sum(p.numel() * p.element_size() for p in model.parameters())
    out: dict[str, Any] = {
        "parameter_bytes": int(params),
        "largest_attention_matrix_bytes": stats.get("largest_matrix_bytes", 0),
        "output_attentions_would_keep_bytes": stats.get("all_layers_bytes", 0),
        "kept_per_map_bytes": stats.get("kept_bytes", 0),
        "max_prompt_tokens": stats.get("max_tokens", 0),
    }
    if torch.cuda.is_available():
        out["peak_cuda_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    # ru_maxrss is KiB on Linux: the whole process's high-water mark (Python, torch, the model).
    out["peak_process_rss_bytes"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    return out


def run_pairs(
    probe: VLMProbe,
    pairs: Sequence[Pair],
    *,
    recipe: Recipe = PAPER_RECIPE,
    max_new_tokens: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[PairMaps], dict[str, int]]:
    """Map every pair (in order); the probe's attention-size statistics beside the results."""
    stats: dict[str, int] = {}
    results = []
    for i, pair in enumerate(pairs):
        results.append(map_pair(probe, pair, recipe=recipe, max_new_tokens=max_new_tokens, stats=stats))
        if progress:
            progress(i + 1, len(pairs))
    return results, stats
