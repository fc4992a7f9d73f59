"""``edct attention EXPORT --model DIR --output OUT``: read the pairs, load the model, map, write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.attention.analyse import memory_report, run_pairs, summarise
from edct_task.attention.pairs import read_pairs
from edct_task.attention.probe import VLMProbe, text_layers
from edct_task.attention.report import write_attention_folder
from edct_task.attention.saliency import PAPER_RECIPE, Recipe
from edct_task.bench_data.format import BenchDataError

__all__ = ["AttentionRequest", "run_attention"]


@dataclass(frozen=True)
class AttentionRequest:
    source: Path
    """An ``export-counterfactuals`` folder or a run folder."""
    model: Path
    out: Path
    layers: str | None = None
    max_pairs: int | None = None
    device: str | None = None
    dtype: str = "auto"
    adapter: Path | None = None
    max_new_tokens: int = 64
    recipe: Recipe = PAPER_RECIPE
    overwrite: bool = False
    seed: int = 0


def run_attention(request: AttentionRequest, *, probe: VLMProbe | None = None) -> dict[str, Any]:
    """Everything ``edct attention`` does; returns the ``attention.json`` document.

    Inputs are checked before the model is loaded (a bad folder costs no model load).
    """
    if Path(request.out).exists() and not request.overwrite:
        raise BenchDataError(f"{request.out}: already exists (pass --overwrite to replace it)")
    pairs, kind = read_pairs(request.source)
    if request.max_pairs is not None:
        pairs = pairs[: request.max_pairs]
    if probe is None:
        probe = VLMProbe.load(
            request.model,
            layers=request.layers,
            device=request.device,
            dtype=request.dtype,
            adapter=request.adapter,
        )
    results, stats = run_pairs(probe, pairs, recipe=request.recipe, max_new_tokens=request.max_new_tokens)
    document = {
        "model": str(request.model),
        "adapter": None if request.adapter is None else str(request.adapter),
        "source": str(Path(request.source).absolute()),
        "source_kind": kind,
        "layers": list(probe.layers),
        "text_layers": len(text_layers(probe.model)),
        "query": "the prompt's last position (the one that emits the answer's first token)",
        "recipe": request.recipe.as_dict(),
        "memory": memory_report(stats, probe.model),
        "summary": summarise(results, seed=request.seed),
    }
    return write_attention_folder(request.out, results, document, overwrite=request.overwrite)
