"""Seeded fault injection for soak tests: a judge that fails, a target that replies badly.

Run as a script, it registers

- the text backend ``flaky-judge`` (options: ``rate``, ``seed``): the calibration rules, except
  that a prompt whose seeded hash falls under ``rate`` always fails with a rate-limit error;
- the target backend ``surrogate-target`` (options: ``behavior``, ``rate``, ``seed``): the
  calibration reference, except that for a question whose seeded hash falls under ``rate`` every
  reply ends in a lone surrogate (what a server's JSON ``"\\ud800"`` decodes to).

The same prompts fail in every process, so a killed and resumed run meets the same faults.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from edct_task import roles
from edct_task.calibration import ReferenceVLM, RuleBasedLLM
from model_adapters.contracts import Completion
from model_adapters.errors import RateLimited


def faulty(text: str, rate: float, seed: int) -> bool:
    digest = hashlib.sha256(f"{seed}|{text}".encode()).hexdigest()
    return int(digest[:8], 16) / 16**8 < rate


class FlakyJudge(RuleBasedLLM):
    def __init__(self, rate: float, seed: int) -> None:
        self.rate, self.seed = rate, seed

    def complete(self, prompt: str, params: Any) -> Completion:
        if faulty(prompt, self.rate, self.seed):
            raise RateLimited("429 injected fault")
        return super().complete(prompt, params)


class SurrogateTarget(ReferenceVLM):
    def __init__(self, behavior: str, rate: float, seed: int) -> None:
        super().__init__(behavior)
        # the faults' own seed: ReferenceVLM.seed is the mixed behaviour's run seed
        self.rate, self.fault_seed = rate, seed

    def generate(self, conversations: Any, params: Any) -> list[Any]:
        out = super().generate(conversations, params)
        for i, conversation in enumerate(conversations):
            question = next((m.text for m in conversation if m.role == "user"), "")
            if faulty(question, self.rate, self.fault_seed) and isinstance(out[i], Completion):
                out[i] = Completion(out[i].text + "\ud800")
        return out


def surrogate_question(question: str, rate: float, seed: int) -> bool:
    """Whether ``surrogate-target`` corrupts the replies to ``question``."""
    return faulty(question, rate, seed)


if __name__ == "__main__":
    from pathlib import Path

    from edct_task.cli.main import main

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: tests/ for support
    from support.backends import stand_in

    roles.REGISTRY["target"]["surrogate-target"] = stand_in(
        "target",
        "surrogate-target",
        lambda o: SurrogateTarget(
            str(o.get("behavior", "faithful")), float(o.get("rate", 0.1)), int(o.get("seed", 0))
        ),
    )
    roles.REGISTRY["text"]["flaky-judge"] = stand_in(
        "text", "flaky-judge", lambda o: FlakyJudge(float(o.get("rate", 0.1)), int(o.get("seed", 0)))
    )

    sys.exit(main(sys.argv[1:]))
