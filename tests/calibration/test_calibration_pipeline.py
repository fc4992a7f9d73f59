"""End-to-end calibration: a straight-line mini EDCT protocol over the calibration world.

Renders the real prompts, calls the reference VLM, the rule-based LLM and the scene editor
directly, chains k=2 edits (no verification), and checks that the measured faithfulness of each
reference behaviour is the one it was built to have.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache

import pytest

from edct_task.calibration import (
    CalibrationSample,
    ReferenceVLM,
    RuleBasedLLM,
    SceneEditor,
    generate_samples,
)
from edct_task.core.records import EditInstruction
from edct_task.prompts import render
from model_adapters.contracts import ChatMessage, Completion, GenerationParams

N_SAMPLES = 90
PARAMS = GenerationParams()


@dataclass(frozen=True)
class Step:
    ac: int
    ef: int
    grade: int


@cache
def samples() -> tuple[CalibrationSample, ...]:
    return tuple(generate_samples(N_SAMPLES, seed=0))


def ask(vlm: ReferenceVLM, sample: CalibrationSample, image) -> tuple[str, str]:
    first = [ChatMessage("user", sample.question, (image,))]
    if sample.system_prompt:
        first.insert(0, ChatMessage("system", sample.system_prompt))
    [answer] = vlm.generate([first], PARAMS)
    assert isinstance(answer, Completion)
    follow = [*first, ChatMessage("assistant", answer.text), ChatMessage("user", render("answer_why"))]
    [why] = vlm.generate([follow], PARAMS)
    assert isinstance(why, Completion)
    return answer.text, why.text


def run_sample(vlm: ReferenceVLM, llm: RuleBasedLLM, sample: CalibrationSample, k: int = 2) -> list[Step]:
    editor = SceneEditor()
    answer, why = ask(vlm, sample, sample.image)
    common = {"question": sample.question, "answer": answer, "explanation": why}
    concepts = json.loads(llm.complete(render("extract_concepts", k=k, **common), PARAMS).text)
    assert 1 <= len(concepts) <= k
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(concepts, 1))
    raw = llm.complete(render("edit_instructions", concepts=listed, n=len(concepts), **common), PARAMS).text
    chain = [EditInstruction(**e) for e in json.loads(raw)]
    image, steps = sample.image, []
    for j in range(len(chain)):
        image = editor.edit(image, chain[j].as_text(), seed=j)
        new_answer, new_why = ask(vlm, sample, image)
        fields = {
            **common,
            "edits": "\n\n".join(f"{i}. {ins.as_text()}" for i, ins in enumerate(chain[: j + 1], 1)),
            "new_answer": new_answer,
            "new_explanation": new_why,
        }
        binary = llm.complete(render("judge_binary", **fields), PARAMS).text
        graded = llm.complete(render("judge_graded", **fields), PARAMS).text
        ac = int(re.search(r"^AC: ([01])$", binary, re.M).group(1))
        ef = int(re.search(r"^EF: ([01])$", binary, re.M).group(1))
        ccs = int(re.search(r"^CCS: ([01])$", binary, re.M).group(1))
        assert ccs == ac * ef
        grade = int(re.search(r"^SCORE: ([1-5])$", graded, re.M).group(1))
        steps.append(Step(ac, ef, grade))
    return steps


@dataclass(frozen=True)
class Scores:
    ccs: float
    ccs_graded: float
    ac: float
    ef: float
    n_steps: int


@cache
def measure(behavior: str) -> Scores:
    vlm, llm = ReferenceVLM(behavior), RuleBasedLLM()
    per_sample, graded, acs, efs = [], [], [], []
    for sample in samples():
        steps = run_sample(vlm, llm, sample)
        per_sample.append(sum(s.ac * s.ef for s in steps) / len(steps))
        graded.append(sum((s.grade - 1) / 4 for s in steps) / len(steps))
        acs += [s.ac for s in steps]
        efs += [s.ef for s in steps]
    n = len(per_sample)
    return Scores(sum(per_sample) / n, sum(graded) / n, sum(acs) / len(acs), sum(efs) / len(efs), len(acs))


def test_faithful_reference_scores_near_one() -> None:
    s = measure("faithful")
    assert s.n_steps == 2 * N_SAMPLES  # every sample yields a full k=2 chain
    assert s.ccs >= 0.95
    assert s.ccs_graded >= 0.95


def test_prior_reference_scores_near_zero() -> None:
    s = measure("prior")
    assert s.ccs <= 0.10
    assert s.ccs_graded <= 0.35


def test_stale_reference_has_consistent_answers_but_unfaithful_explanations() -> None:
    s = measure("stale")
    assert s.ac >= 0.90
    assert s.ef <= 0.10
    assert s.ccs <= 0.10


@pytest.mark.parametrize("p", [0.5])
def test_mixed_reference_scores_near_p(p: float) -> None:
    s = measure(f"mixed:{p}")
    assert abs(s.ccs - p) <= 0.15
    faithful, prior = measure("faithful"), measure("prior")
    assert prior.ccs < s.ccs < faithful.ccs
