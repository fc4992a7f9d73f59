"""What one ``edct attention`` pass holds in memory, estimated from a model's shape.

The pass keeps the weights, the activations of one forward over ``T`` prompt tokens, and — because
the hooks read one text layer at a time — one layer's eager attention at a time: the scores in
the model's dtype, their float32 softmax and its cast back (``heads × T² × (2·dtype + 4)`` bytes),
freed before the next layer runs. ``output_attentions=True`` instead keeps every text layer's
weights to the end of the pass: ``layers × heads × T² × dtype`` bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["QWEN3_VL_8B", "ModelShape", "estimate", "image_tokens"]


@dataclass(frozen=True)
class ModelShape:
    parameters: int
    text_layers: int
    heads: int
    hidden: int
    dtype_bytes: int = 2
    patch: int = 16
    merge: int = 2


QWEN3_VL_8B = ModelShape(parameters=8_767_123_696, text_layers=36, heads=32, hidden=4096)
"""Qwen/Qwen3-VL-8B-Instruct in bf16: 36 text layers, 32 query heads, hidden 4096 (its published config);
the parameter count is that config instantiated on the meta device (576 M of it the vision tower)."""


def image_tokens(width: int, height: int, shape: ModelShape) -> int:
    """Image content tokens after the processor's resize to multiples of ``patch·merge``."""
    unit = shape.patch * shape.merge
    return max(1, round(height / unit)) * max(1, round(width / unit))


def estimate(shape: ModelShape, tokens: int) -> dict[str, Any]:
    """Bytes of the parts of one attention pass over ``tokens`` prompt tokens (see the module notes)."""
    weights = shape.parameters * shape.dtype_bytes
    one_layer = shape.heads * tokens * tokens * (2 * shape.dtype_bytes + 4)
    all_layers = shape.text_layers * shape.heads * tokens * tokens * shape.dtype_bytes
    # hidden states, q/k/v/o and MLP intermediates of one layer: a generous 16 × T × hidden values
    activations = 16 * tokens * shape.hidden * shape.dtype_bytes
    return {
        "shape": asdict(shape),
        "tokens": tokens,
        "weights_bytes": weights,
        "one_layer_eager_bytes": one_layer,
        "activations_bytes": activations,
        "hooked_peak_bytes": weights + one_layer + activations,
        "output_attentions_kept_bytes": all_layers,
        "output_attentions_peak_bytes": weights + all_layers + one_layer + activations,
    }


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


if __name__ == "__main__":  # python -m edct_task.attention.memory: the table in the README
    for w, h in ((384, 288), (1600, 900), (1920, 1080)):
        t = image_tokens(w, h, QWEN3_VL_8B) + 60
        e = estimate(QWEN3_VL_8B, t)
        print(
            f"{w}x{h}: T={t} weights {gib(e['weights_bytes'])}, "
            f"one eager layer {gib(e['one_layer_eager_bytes'])}, "
            f"hooked peak {gib(e['hooked_peak_bytes'])}; output_attentions keeps "
            f"{gib(e['output_attentions_kept_bytes'])} (peak {gib(e['output_attentions_peak_bytes'])})"
        )
