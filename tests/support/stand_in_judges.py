"""Stand-in judges: the failure modes of cheap judges, as text backends for the judge role.

``always-1`` (a well-formed block that always says AC 1, EF 1, score 5: a ``prior`` target, true
CCS ≈ 0, scores 1.000), ``always-0``, ``coin-flip`` (seeded by the prompt), ``prompt-echo`` (the
prompt sent back) and ``rubric-copy`` (the rubric's own lines sent back); ``calibration`` is the
calibration world's rule-based judge. Every other role gets the calibration rules' replies.
"""

from __future__ import annotations

import hashlib
from typing import Any

from support.backends import stand_in

from edct_task import prompts
from edct_task import roles as roles_mod
from edct_task.calibration import RuleBasedLLM
from model_adapters.contracts import Completion, GenerationParams

POLICIES = ("always-1", "always-0", "coin-flip", "prompt-echo", "rubric-copy")
BACKEND = "stand-in"


def _binary(ac: int, ef: int) -> str:
    return (
        "AC_REASON: The new answer fits the edited scene.\nEF_REASON: The explanation uses what remains.\n"
        f"FINAL SCORES\nAC: {ac}\nEF: {ef}\nCCS: {ac * ef}"
    )


def _graded(score: int) -> str:
    return f"REASON: The answer and explanation reflect the edits.\nSCORE: {score}"


class StandIn(RuleBasedLLM):
    """The calibration rules for every role but the judge, whose replies ``policy`` writes."""

    def __init__(self, policy: str) -> None:
        self.policy = policy

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "model": f"stand-in-{self.policy}"}

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        found = prompts.match_template(prompt)
        if found is None or not found[0].startswith("judge_") or self.policy == "calibration":
            return super().complete(prompt, params)
        binary = found[0] == "judge_binary"
        coin = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        rubric = ("AC", "EF", "CCS", "SCORE", "5:", "1:")
        reply = {
            "always-1": _binary(1, 1) if binary else _graded(5),
            "always-0": _binary(0, 0) if binary else _graded(1),
            "coin-flip": _binary(coin & 1, (coin >> 1) & 1) if binary else _graded(1 + coin % 5),
            "prompt-echo": prompt,
            "rubric-copy": "\n".join(line for line in prompt.splitlines() if line.startswith(rubric)),
        }[self.policy]
        return Completion(reply, finish_reason="stop")


def register(policy: str) -> None:
    """Put the stand-in ``policy`` in this process's text-backend registry as ``stand-in``."""
    roles_mod.REGISTRY["text"][BACKEND] = stand_in("text", BACKEND, lambda options: StandIn(policy))
