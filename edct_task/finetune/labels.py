"""Gold answers of counterfactual pairs, and when an answer counts as correct.

The assistant turns of an export are the *target model's* answers, not gold labels. ``edct
finetune`` needs gold answers for the original and for the counterfactual of every pair:

- **calibration pairs**: the calibration world knows them — every calibration image carries its
  scene graph, and the scene's rule gives the answer (:meth:`Scene.answer`), written as the
  world's reference models write it (``world.ANSWER_TEXT``: "Stop.", "Table tennis.");
- **real data**: a label file (JSONL, one line per pair: ``{"id": "<pair id>", "original": "...",
  "counterfactual": "..."}``), as the paper annotated its 48 DriveLM items. A label file wins over
  the calibration world when both know a pair.

A pair without both labels is left out of fine-tuning and counted (``unlabelled``).

Correctness (:func:`is_correct`): for calibration questions, the label the answer states
(``world.parse_answer``) equals the gold label; otherwise the normalised answer (lower case,
punctuation and articles dropped, number words as digits) equals the normalised gold answer or
starts with it as whole words ("2 axles" is right for "2").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from edct_task.attention.pairs import Pair
from edct_task.bench_data.format import BenchDataError
from edct_task.calibration import world
from edct_task.calibration.scenes import scene_of

__all__ = ["Gold", "gold_labels", "is_correct", "normalise", "read_label_file"]

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_NUMBERS = {w: str(i) for i, w in enumerate(_NUMBER_WORDS)}


@dataclass(frozen=True)
class Gold:
    """The gold answers of one pair and where they come from."""

    original: str
    counterfactual: str
    source: str
    """"calibration-world" or "label-file"."""


def read_label_file(path: Path) -> dict[str, Gold]:
    """Pair id → gold answers, from a JSONL label file.

    Raises
    ------
    BenchDataError
        When the file is missing or a line is not ``{"id", "original", "counterfactual"}``.
    """
    path = Path(path)
    if not path.is_file():
        raise BenchDataError(f"{path}: label file not found")
    out: dict[str, Gold] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            gold = Gold(str(row["original"]).strip(), str(row["counterfactual"]).strip(), "label-file")
            key = str(row["id"])
        except (ValueError, KeyError, TypeError):
            raise BenchDataError(
                f'{path}, line {number}: expected {{"id": …, "original": …, "counterfactual": …}}'
            ) from None
        if not gold.original or not gold.counterfactual:
            raise BenchDataError(f"{path}, line {number}: empty gold answer")
        out[key] = gold
    return out


def _world_answer(path: Path) -> str | None:
    with Image.open(path) as img:
        scene = scene_of(img)
    return None if scene is None else world.ANSWER_TEXT[scene.answer()]


def gold_labels(pairs: list[Pair], label_file: Path | None = None) -> tuple[dict[str, Gold], list[str]]:
    """Gold answers per pair id, and the ids of the pairs nobody labels."""
    from_file = read_label_file(label_file) if label_file is not None else {}
    gold: dict[str, Gold] = {}
    missing = []
    for pair in pairs:
        if pair.id in from_file:
            gold[pair.id] = from_file[pair.id]
            continue
        original, counterfactual = _world_answer(pair.original_image), _world_answer(pair.edited_image)
        if original is None or counterfactual is None:
            missing.append(pair.id)
            continue
        gold[pair.id] = Gold(original, counterfactual, "calibration-world")
    return gold, missing


def normalise(text: str) -> str:
    """Lower case, punctuation and articles dropped, number words as digits, single spaces."""
    words = re.sub(r"[^\w\s]", " ", text.lower()).split()
    return " ".join(_NUMBERS.get(w, w) for w in words if w not in ("a", "an", "the"))


def is_correct(answer: str, gold: str, question: str) -> bool:
    """Whether ``answer`` gives the ``gold`` answer to ``question`` (see the module notes)."""
    family = world.family_of_question(question)
    if family is not None:
        label = world.parse_answer(family, answer)
        if label is not None or world.parse_answer(family, gold) is not None:
            return label is not None and label == world.parse_answer(family, gold)
    a, g = normalise(answer), normalise(gold)
    return bool(g) and (a == g or a.startswith(g + " "))
