"""Seeded fault injection for soak tests: a judge that fails on a fixed share of prompts.

Run as a script, it registers the text backend ``flaky-judge`` (options: ``rate``, ``seed``):
the calibration rules, except that a prompt whose seeded hash falls under ``rate`` always fails
with a rate-limit error — the same prompts in every process, so a killed and resumed run meets the
same faults.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from edct_task import roles
from edct_task.calibration import RuleBasedLLM
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


if __name__ == "__main__":
    from edct_task.cli.main import main

    roles.REGISTRY["text"]["flaky-judge"] = lambda o: FlakyJudge(
        float(o.get("rate", 0.1)), int(o.get("seed", 0))
    )

    sys.exit(main(sys.argv[1:]))
