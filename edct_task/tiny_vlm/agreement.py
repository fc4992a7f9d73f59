"""How closely a checkpoint follows the faithful reference on held-out calibration scenes.

The held-out scenes are the ``edct_calibration`` task's own documents (``generate_samples(n,
seed=0)``): training draws its scenes from another stream (``examples``), so none of these was seen.
Each scene is asked the real multi-turn conversation through transformers (greedy), as the
runtimes ask it: the first reply's thinking is stripped (``parsing.strip_thinking``) and the
history carries the answer alone. The first turn's answer label (``world.parse_answer``) and the
explanation's cited cues (``world.parse_cues``) are compared with the reference's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from edct_task.calibration import world
from edct_task.calibration.samples import generate_samples
from edct_task.engine.protocol import why_prompt
from edct_task.parsing import strip_thinking
from edct_task.tiny_vlm.examples import teacher_replies


class HFChat:
    """A checkpoint folder through transformers: greedy replies to chat conversations, batched."""

    def __init__(self, folder: Path, *, threads: int | None = None) -> None:
        import torch
        from transformers import AutoProcessor, Qwen3VLForConditionalGeneration

        if threads:
            torch.set_num_threads(threads)
        self.processor = AutoProcessor.from_pretrained(str(folder))
        self.model = Qwen3VLForConditionalGeneration.from_pretrained(str(folder)).eval()

    def reply(self, conversations: Sequence[list[dict[str, Any]]], max_new_tokens: int = 48) -> list[str]:
        import torch

        texts = [
            self.processor.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
            for c in conversations
        ]
        images = [
            p["image"]
            for c in conversations
            for m in c
            if isinstance(m["content"], list)
            for p in m["content"]
            if p.get("type") == "image"
        ]
        inputs = self.processor(
            text=texts, images=images or None, padding=True, padding_side="left", return_tensors="pt"
        )
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        new = out[:, inputs["input_ids"].shape[1] :]
        return self.processor.batch_decode(new, skip_special_tokens=True)


@dataclass(frozen=True)
class Agreement:
    """Agreement with the faithful reference over ``n`` held-out scenes."""

    n: int
    answers: int
    """First turns whose answer label equals the reference's."""
    explanations: int
    """Explanations citing exactly the reference's cues, in its order."""
    examples: tuple[tuple[str, str, str, str], ...]
    """(sample id, reference answer, model answer, model explanation) of the first disagreements."""

    @property
    def answer_rate(self) -> float:
        return self.answers / self.n if self.n else 0.0

    @property
    def explanation_rate(self) -> float:
        return self.explanations / self.n if self.n else 0.0


def _opening(image: Image.Image, question: str, system: str | None) -> list[dict[str, Any]]:
    sys = [{"role": "system", "content": system}] if system else []
    return [
        *sys,
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": question}]},
    ]


def measure(folder: Path, *, n: int = 60, batch: int = 12, threads: int | None = None) -> Agreement:
    """Agreement of the checkpoint in ``folder`` with the faithful reference on ``n`` held-out scenes."""
    chat = HFChat(folder, threads=threads)
    samples = generate_samples(n, seed=0)
    answers = explanations = 0
    misses: list[tuple[str, str, str, str]] = []
    for start in range(0, n, batch):
        chunk = samples[start : start + batch]
        openings = [_opening(s.image, s.question, s.system_prompt) for s in chunk]
        first = [strip_thinking(a) for a in chat.reply(openings)]
        follow = [
            [*o, {"role": "assistant", "content": a}, {"role": "user", "content": why_prompt()}]
            for o, a in zip(openings, first, strict=True)
        ]
        whys = chat.reply(follow)
        for s, a, why in zip(chunk, first, whys, strict=True):
            ref_answer, ref_why = teacher_replies(s.image, s.question, s.system_prompt)
            ok_a = world.parse_answer(s.domain, a) == world.parse_answer(s.domain, ref_answer)
            ok_e = world.parse_cues(why) == world.parse_cues(ref_why)
            answers += ok_a
            explanations += ok_e
            if not (ok_a and ok_e) and len(misses) < 5:
                misses.append((s.id, ref_answer, a, why))
    return Agreement(n=n, answers=answers, explanations=explanations, examples=tuple(misses))


@dataclass(frozen=True)
class Targets:
    """What a checkpoint of one behaviour must measure on ``n`` held-out scenes (``measure``)."""

    n: int = 60
    answers_min: int | None = None
    explanations_min: int | None = None
    explanations_max: int | None = None

    def misses(self, got: Agreement) -> list[str]:
        """The targets ``got`` misses, each as a short phrase (empty: all met)."""
        if got.n != self.n:
            return [f"measured on {got.n} scenes, the targets are for {self.n}"]
        out = []
        if self.answers_min is not None and got.answers < self.answers_min:
            out.append(f"answers {got.answers}/{got.n} < {self.answers_min}")
        if self.explanations_min is not None and got.explanations < self.explanations_min:
            out.append(f"explanations {got.explanations}/{got.n} < {self.explanations_min}")
        if self.explanations_max is not None and got.explanations > self.explanations_max:
            out.append(f"explanations {got.explanations}/{got.n} > {self.explanations_max}")
        return out

    def describe(self) -> str:
        parts = []
        if self.answers_min is not None:
            parts.append(f"answers >= {self.answers_min}/{self.n}")
        if self.explanations_min is not None:
            parts.append(f"explanations >= {self.explanations_min}/{self.n}")
        if self.explanations_max is not None:
            parts.append(f"explanations <= {self.explanations_max}/{self.n}")
        return ", ".join(parts)


TARGETS: dict[str, Targets] = {
    "faithful": Targets(answers_min=45, explanations_min=42),
    "prior": Targets(explanations_max=12),
}
"""The recipe's targets per behaviour, one below the worst of three training seeds (faithful,
answers/explanations out of 60: seed 0 60/60, seed 1 60/59, seed 2 46/43; prior explanations 10,
8, 9: ``benchmarks/tiny_vlm_seeds.py``; docs, "The tiny VLM"), so that a rebuild whose near-tie
spatial answers round the other way is judged by what the recipe reliably gives, and the two
behaviours stay far apart (faithful explanations >= 42, prior <= 12)."""


def as_record(got: Agreement) -> dict[str, int]:
    """The counts ``edct tiny-vlm train`` writes into the checkpoint's training record."""
    return {"n": got.n, "answers": got.answers, "explanations": got.explanations}
