"""Train the tiny Qwen3-VL on the calibration world and save the checkpoint folder.

A plain seeded PyTorch loop (AdamW, linear warm-up, cosine decay) over freshly generated
examples (``examples.example``): the loss is the next-token cross-entropy on each conversation's
last assistant turn only (a thinking block and answer, or an explanation, with its
``<|im_end|>``), plus, for ``faithful``, the auxiliary loss of training-only heads on the visual
tokens (``auxiliary``; the heads are not saved). Written by hand rather than with TRL's
``SFTTrainer`` because the whole loop is a few dozen lines, the examples are generated on the fly
in several conversation shapes, and determinism on CPU needs the thread count and the algorithms
pinned, which the loop states in one place.

Images go in at their own size (the grid every chat runtime uses, see ``architecture``).

The loop always runs in a fresh interpreter (``train`` starts it) whose numeric libraries are
pinned before torch is imported (``NUMERIC_ENV``): one thread, ATen's scalar kernels instead of
the CPU's widest vector unit, MKL's conditional numerical reproducibility, oneDNN capped to SSE4.1.
With the machine's own kernels the weights depend on the CPU (an AVX-512 machine and an AVX2 one
train different checkpoints from one seed); pinned, they depend only on the packages' versions.
It costs about 1.7 times the CPU time.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from edct_task.tiny_vlm import architecture, auxiliary
from edct_task.tiny_vlm.examples import Example, example

NUMERIC_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
"""The environment the training interpreter starts with: what the weights may not depend on."""

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
    vision_lr_mult: float = 1.0
    """The vision tower's learning rate, as a multiple of ``lr``."""
    aux_weights: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Weights of the auxiliary losses on the visual tokens (``auxiliary.loss``: per-token object
    and cue value, per-token column third, per-token scene cues); all 0: no auxiliary heads."""


RECIPES: dict[str, TrainSettings] = {
    "faithful": TrainSettings(
        steps=700, batch_size=8, lr=3e-3, vision_lr_mult=3.0, aux_weights=(1.0, 0.3, 1.0)
    ),
    "prior": TrainSettings(behavior="prior", steps=120),
}
"""The settings per behaviour. ``prior`` only learns text (its pictures say nothing about the
answer), which it has learned by step 120, and gets no auxiliary vision loss (it must not read
the pixels). ``faithful`` reads left and right only once the visual tokens carry them
(``auxiliary``): its spatial cues appear between steps 400 and 600, and the spatial answer's
mapping from the stated cues comes last and is not robust: at 600 steps two of three
initialisations had not learned it (53–54/60 first turns); at 700 seed 0 gives 60/60 (near-tie
margins), seed 1 53/60 (README)."""


def recipe(behavior: str, *, seed: int = 0) -> TrainSettings:
    """The settings ``edct tiny-vlm path`` trains ``behavior`` with."""
    return replace(RECIPES[behavior], behavior=behavior, seed=seed)


def encode(processor: Any, batch: Sequence[Example]) -> dict[str, Any]:
    """Model inputs for a batch (right-padded) with ``labels`` on the last assistant turn only."""
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
        turns = [i for i, t in enumerate(seq) if t == start and seq[i + 1 : i + 1 + len(head)] == head]
        if turns:
            j = turns[-1] + 1 + len(head)
            k = seq.index(end, j)
            labels[row, j : k + 1] = ids[row, j : k + 1]
    if bool((labels == -100).all(dim=1).any()):
        raise RuntimeError("an example has no assistant tokens: the chat template and the labels disagree")
    inputs["labels"] = labels
    return dict(inputs)


def _param_groups(model: Any, heads: Any, s: TrainSettings) -> list[dict[str, Any]]:
    """AdamW groups: matrices (but embeddings) decay; the vision tower's learning rate is scaled by
    ``vision_lr_mult``; the auxiliary heads (if any) neither decay nor are scaled."""
    groups: dict[tuple[bool, bool], list[Any]] = {(d, v): [] for d in (True, False) for v in (False, True)}
    for name, p in model.named_parameters():
        groups[(p.ndim >= 2 and "embed" not in name, "visual" in name)].append(p)
    out = [
        {
            "params": ps,
            "weight_decay": s.weight_decay if decays else 0.0,
            "lr_mult": s.vision_lr_mult if vis else 1.0,
        }
        for (decays, vis), ps in groups.items()
        if ps
    ]
    if heads is not None:
        out.append({"params": list(heads.parameters()), "weight_decay": 0.0, "lr_mult": 1.0})
    return out


def _lr_at(step: int, s: TrainSettings) -> float:
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def train(out: Path, settings: TrainSettings, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train a checkpoint and save it (model, tokenizer, processor, ``edct_training.json``) to ``out``.

    The loop runs in a child interpreter started with ``NUMERIC_ENV``; its progress lines go to
    ``log`` as they come. Returns the checkpoint's training record (``edct_training.json``)."""
    env = {**os.environ, **NUMERIC_ENV}
    cmd = [sys.executable, "-m", "edct_task.tiny_vlm.training", str(out), json.dumps(asdict(settings))]
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail = [*tail[-19:], line]
            log(line)
    if proc.returncode != 0:
        raise RuntimeError(f"training the tiny VLM failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return json.loads((out / TRAINING_INFO).read_text())


def _train_here(out: Path, settings: TrainSettings, *, log: Callable[[str], None]) -> dict[str, Any]:
    """The training loop itself, in this interpreter (``train`` runs it in a pinned child)."""
    missing = {k: v for k, v in NUMERIC_ENV.items() if os.environ.get(k) != v}
    if missing:
        raise RuntimeError(f"the training interpreter must start with {missing} (use train())")
    import torch

    torch.set_num_threads(settings.threads)
    torch.use_deterministic_algorithms(True)
    tok = architecture.build_tokenizer()
    processor = architecture.build_processor(tok)
    model = architecture.build_model(tok, seed=settings.seed)
    model.train()
    heads, captured = None, {}
    if any(settings.aux_weights):
        torch.manual_seed(settings.seed + 1)
        heads = auxiliary.build_heads(model.config.vision_config.out_hidden_size)
        merger = model.model.visual.merger
        hook = merger.register_forward_hook(lambda _m, _i, out: captured.update(merged=out))
    optim = torch.optim.AdamW(_param_groups(model, heads, settings), lr=settings.lr, betas=(0.9, 0.98))
    merge = model.config.vision_config.spatial_merge_size
    wall, cpu = time.perf_counter(), time.process_time()
    losses: list[float] = []
    aux_losses: list[float] = []
    index = 0
    for step in range(settings.steps):
        batch = [
            example(index + i, behavior=settings.behavior, seed=settings.seed)
            for i in range(settings.batch_size)
        ]
        index += settings.batch_size
        inputs = encode(processor, batch)
        for group in optim.param_groups:
            group["lr"] = _lr_at(step, settings) * group["lr_mult"]
        loss = model(**inputs).loss
        losses.append(float(loss.detach()))
        if heads is not None:
            grid, images = inputs["image_grid_thw"], [ex.image for ex in batch]
            weights = settings.aux_weights
            aux = auxiliary.loss(heads, captured["merged"], grid, images, merge=merge, weights=weights)
            aux_losses.append(float(aux.detach()))
            loss = loss + aux
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        if step % 10 == 0 or step == settings.steps - 1:
            recent, recent_aux = losses[-10:], aux_losses[-10:]
            shown = f"  auxiliary {sum(recent_aux) / len(recent_aux):.4f}" if recent_aux else ""
            log(
                f"step {step + 1}/{settings.steps}  loss {sum(recent) / len(recent):.4f}{shown}  "
                f"cpu {time.process_time() - cpu:.0f} s  wall {time.perf_counter() - wall:.0f} s"
            )
    if heads is not None:
        hook.remove()  # the heads and the hook are training-only: the checkpoint is a plain Qwen3-VL
    model.eval()
    info = {
        "settings": asdict(settings),
        "examples_seen": index,
        "final_loss": sum(losses[-25:]) / len(losses[-25:]),
        "final_auxiliary_loss": sum(aux_losses[-25:]) / len(aux_losses[-25:]) if aux_losses else None,
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
    info["numeric_env"] = dict(NUMERIC_ENV)
    write_info(out, info)


def write_info(folder: Path, info: dict[str, Any]) -> None:
    """Write a checkpoint folder's training record (``edct_training.json``)."""
    (folder / TRAINING_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def _settings_from_json(text: str) -> TrainSettings:
    raw = json.loads(text)
    raw["aux_weights"] = tuple(raw["aux_weights"])
    return TrainSettings(**raw)


if __name__ == "__main__":  # the child interpreter of train()
    _train_here(
        Path(sys.argv[1]),
        _settings_from_json(sys.argv[2]),
        log=lambda line: print(line, flush=True),
    )
