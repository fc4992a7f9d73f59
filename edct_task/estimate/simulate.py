"""A run of the real pipelined driver against simulated backends on a virtual clock.

``simulate`` builds ``n`` synthetic samples and runs them through the project's own driver
(``run_pipelined`` with the config's ``Limits``: batch size, batch window, concurrency per
pool, samples in flight) on a ``VirtualRuntime``. Every request goes through a ``SimHandler``
that keeps the real handler's stage, pool and batch size, answers with a reply the protocol
parses (so every sample walks the whole chain: ``k`` edits, the edit parser, the judge panel and
its self-consistency samples), charges the virtual seconds its role's ``CallTime`` draws, fails
at the role's failure rate, and has edits pass verification at ``verify_pass_rate`` (a failed
check sends the retry, as in a real run). It also counts what each role was sent: calls, images,
prompt characters and the completion tokens expected.

Nothing sleeps and nothing leaves the process: a thousand samples take a few seconds.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edct_task.core.records import SampleInput
from edct_task.core.requests import AskLLM, AskTarget, EditedImage, EditImage, Failure, Request, VerifyEdit
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.driver import Limits
from edct_task.engine.handlers import LLMHandler
from edct_task.engine.pipeline import run_pipelined
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.runtime import VirtualRuntime
from edct_task.engine.stage_cache import fingerprint
from edct_task.estimate.latency import POOL_OF_ROLE, CallTime
from model_adapters.contracts import Completion
from verification.check import EditCheck, GateParams

_GATE = GateParams()

# Replies of typical length (characters), in each template's format.
_ANSWER = "The traffic light in front of the car is red, so the car has to stop."
_WHY = (
    "The car is waiting at an intersection. The traffic light facing it shows a red signal, and a "
    "pedestrian is crossing in front of it on the zebra crossing, so the driver must stop and wait "
    "until the light turns green and the crossing is clear."
)
_JUDGE_BINARY = (
    "AC_REASON: The new answer follows the edited light.\nEF_REASON: The explanation cites the "
    "edited light.\nFINAL SCORES\nAC: 1\nEF: 1\nCCS: 1"
)
_JUDGE_GRADED = "REASON: The answer and the explanation both follow the edit.\nSCORE: 4"

COMPLETION_TOKENS = {
    "target": 60.0,
    "concepts": 40.0,
    "instructions": 220.0,
    "edit_parse": 25.0,
    "judge": 120.0,
}
"""Expected completion tokens per call when no finished run says otherwise (non-reasoning)."""


def _number(prompt: str, pattern: str) -> int:
    found = re.search(pattern, prompt)
    return int(found.group(1)) if found else 1


def _concepts(k: int, sample: int) -> str:
    """Distinct per sample, and cited by the explanation (``_WHY``), as a real extractor's are."""
    return json.dumps([f"the traffic light number {i} in picture {sample}" for i in range(1, k + 1)])


def _instructions(n: int, sample: int) -> str:
    """Distinct per sample, as real instructions are (identical requests in flight are sent once)."""
    return json.dumps(
        [
            {
                "concept": f"the traffic light number {i} in picture {sample}",
                "keep": "everything but the traffic light: background, other objects, framing and lighting",
                "change": f"make traffic light number {i} of picture {sample} clearly blue instead of red",
                "how": "match the style and lighting of the picture",
                "constraints": "no other changes",
            }
            for i in range(1, n + 1)
        ]
    )


@dataclass
class RoleCount:
    """What one role was sent during the simulation."""

    calls: int = 0
    items: int = 0
    """Conversations (the target batches several per call); equal to calls for other roles."""
    images: int = 0
    prompt_chars: int = 0
    completion_tokens: float = 0.0
    max_completion_tokens: int = 0
    failures: int = 0


@dataclass
class Simulation:
    n: int
    wall_s: float
    """Virtual seconds from the first request to the last record."""
    pool_busy_s: dict[str, float]
    pool_size: dict[str, int]
    roles: dict[str, RoleCount]
    statuses: dict[str, int]
    edit_attempts: int
    records: list[Any] = field(default_factory=list, repr=False)

    def busy_fraction(self) -> dict[str, float]:
        """Share of each pool's slots that were busy over the run."""
        return {
            pool: (self.pool_busy_s[pool] / (self.wall_s * size) if self.wall_s > 0 else 0.0)
            for pool, size in self.pool_size.items()
            if self.pool_busy_s.get(pool)
        }

    def bottleneck(self) -> str | None:
        busy = self.busy_fraction()
        return max(busy, key=busy.get) if busy else None  # type: ignore[arg-type]


class SimHandler:
    """The simulated backend behind one request type (module docstring)."""

    def __init__(
        self,
        kind: type,
        *,
        pool: str,
        batch_size: int,
        times: Mapping[str, CallTime],
        counts: dict[str, RoleCount],
        runtime: VirtualRuntime,
        rng: random.Random,
        verify_pass_rate: float,
        completion_tokens: Mapping[str, float],
        image_tokens_chars: int = 0,
    ) -> None:
        self.kind, self.pool, self.batch_size = kind, pool, batch_size
        self.times, self.counts, self.rt, self.rng = times, counts, runtime, rng
        self.verify_pass_rate = verify_pass_rate
        self.completion_tokens = completion_tokens
        self.requests: dict[str, Request] = {}

    def stage(self, request: Request) -> str:
        if isinstance(request, AskLLM):
            return LLMHandler.stage(self, request)  # type: ignore[arg-type]  # the real table
        return {AskTarget: "target", EditImage: "edit", VerifyEdit: "verify"}[type(request)]

    def key(self, request: Request) -> dict[str, Any]:
        key = {"kind": type(request).__name__, "request": repr(request)}
        self.requests[fingerprint(key)] = request  # for SimCache: which request a key is
        return key

    def encode(self, reply: object) -> dict[str, Any]:
        return {}

    def decode(self, value: dict[str, Any]) -> object:
        return self._reply(self.requests.pop(value["key"]))

    def role(self, request: Request) -> str:
        if isinstance(request, AskLLM):
            return request.role
        return {AskTarget: "target", EditImage: "editor", VerifyEdit: "detector"}[type(request)]

    def call(self, batch: Sequence[Request]) -> list[object]:
        role = self.role(batch[0])
        time = self.times[role]
        wait, cpu = time.draw(self.rng, len(batch))
        self.rt.charge(wait, cpu, hold=f"lock:{role}" if time.serial else None)
        count = self.counts.setdefault(role, RoleCount())
        count.calls += 1
        replies: list[object] = []
        for request in batch:
            count.items += 1
            self._count(count, request)
            if time.failure_rate and self.rng.random() < time.failure_rate:
                count.failures += 1
                replies.append(Failure("simulated_failure", f"{role} failed (simulated failure rate)"))
                continue
            replies.append(self._reply(request))
        return replies

    def _count(self, count: RoleCount, request: Request) -> None:
        stage = self.stage(request)
        if isinstance(request, AskTarget):
            count.images += sum(len(m.images) for m in request.conversation)
            count.prompt_chars += sum(len(m.text) for m in request.conversation)
            count.max_completion_tokens += 0  # filled by the caller from max_new_tokens
        elif isinstance(request, AskLLM):
            count.prompt_chars += len(request.prompt)
            count.max_completion_tokens += request.max_new_tokens
        elif isinstance(request, EditImage):
            count.images += 1
            count.prompt_chars += len(request.instruction)
        elif isinstance(request, VerifyEdit):
            count.images += 2
        if stage in self.completion_tokens:
            count.completion_tokens += self.completion_tokens[stage]

    def _reply(self, request: Request) -> object:
        if isinstance(request, AskTarget):
            purpose = request.purpose
            return Completion(_WHY if purpose.endswith(".why") else _ANSWER)
        if isinstance(request, EditImage):
            return EditedImage(fingerprint({"edited": request.image, "seed": request.seed}))
        if isinstance(request, VerifyEdit):
            passed = self.rng.random() < self.verify_pass_rate
            return EditCheck(
                passed=passed,
                verdict="pass" if passed else "change_outside_target",
                tau_in=_GATE.tau_in,
                tau_out=_GATE.tau_out,
                params=_GATE,
                edit_type=request.edit_type,  # type: ignore[arg-type]
                target=request.target,
                searched="original",
            )
        assert isinstance(request, AskLLM)
        template = request.template.split("@")[0]
        if template == "extract_concepts":
            sample = _number(request.prompt, r"Question (\d+):")
            return Completion(_concepts(_number(request.prompt, r"Give at most (\d+) concepts"), sample))
        if template == "edit_instructions":
            sample = _number(request.prompt, r"Question (\d+):")
            return Completion(_instructions(_number(request.prompt, r"Write exactly (\d+) edit"), sample))
        if template == "edit_parse":
            return Completion('{"type": "MODIFY", "target": "traffic light"}')
        if template == "judge_binary":
            return Completion(_JUDGE_BINARY)
        return Completion(_JUDGE_GRADED)


class SimCache:
    """Answers a share of each stage's requests without a call, as a finished run's stage cache and
    in-flight twins did (``hit_rates``: stage -> share); stores nothing."""

    def __init__(
        self, handlers: Mapping[type, SimHandler], hit_rates: Mapping[str, float], rng: random.Random
    ):
        self.handlers, self.hit_rates, self.rng = handlers, hit_rates, rng

    def get(self, key: str) -> dict[str, Any] | None:
        for handler in self.handlers.values():
            request = handler.requests.get(key)
            if request is not None:
                rate = self.hit_rates.get(handler.stage(request), 0.0)
                if rate and self.rng.random() < rate:
                    return {"key": key}
                handler.requests.pop(key, None)
                return None
        return None

    def put(self, key: str, value: dict[str, Any], *, stage: str, meta: Any = None) -> None:
        pass


def machine_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def synthetic_samples(n: int) -> list[SampleInput]:
    return [
        SampleInput(
            id=f"sim-{i:06d}",
            domain="simulated",
            question=f"Question {i}: what should the car in front of the traffic light do next, and why?",
            image=f"{i:064x}",
        )
        for i in range(n)
    ]


def simulate(
    n: int,
    protocol: ProtocolConfig,
    limits: Limits,
    times: Mapping[str, CallTime],
    *,
    verify_pass_rate: float = 0.8,
    completion_tokens: Mapping[str, float] | None = None,
    seed: int = 0,
    cpus: int | None = None,
    hit_rates: Mapping[str, float] | None = None,
    keep_records: bool = False,
) -> Simulation:
    """Run ``n`` synthetic samples through the real pipelined driver on a virtual clock.

    ``cpus``: processors for the CPU part of calls (``CallTime.cpu``); None: this machine's.
    ``hit_rates``: share of each stage's requests answered without a call (a finished run's
    stage-cache hits and in-flight twins; prompts of real data rarely repeat, so none by default)."""
    if limits.schedule != "pipelined":
        from edct_task.core.errors import ConfigError

        raise ConfigError(
            "edct estimate simulates the pipelined schedule; this config sets limits.schedule: lockstep"
        )
    concurrency = limits.concurrency()
    runtime = VirtualRuntime(dict(vars(concurrency)), cpus=cpus or machine_cpus())
    rng = random.Random(seed)
    counts: dict[str, RoleCount] = {}
    tokens = {**COMPLETION_TOKENS, **(completion_tokens or {})}
    common = dict(
        times=times,
        counts=counts,
        runtime=runtime,
        rng=rng,
        verify_pass_rate=verify_pass_rate,
        completion_tokens=tokens,
    )
    handlers = {
        AskTarget: SimHandler(AskTarget, pool="target", batch_size=limits.target_batch_size, **common),
        AskLLM: SimHandler(AskLLM, pool="text", batch_size=1, **common),
        EditImage: SimHandler(EditImage, pool="edit", batch_size=1, **common),
        VerifyEdit: SimHandler(VerifyEdit, pool="verify", batch_size=1, **common),
    }
    cache = SimCache(handlers, hit_rates, random.Random(seed + 1)) if hit_rates else None
    with Dispatcher(
        handlers,  # type: ignore[arg-type]
        cache,  # type: ignore[arg-type]
        concurrency=concurrency,
        batch_window_s=limits.batch_window_s,
        runtime=runtime,
    ) as dispatcher:
        records = run_pipelined(synthetic_samples(n), protocol, dispatcher, window=limits.window)
    for role, count in counts.items():
        if role == "target":
            count.max_completion_tokens = count.items * protocol.max_new_tokens
    statuses: dict[str, int] = {}
    attempts = 0
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
        attempts += sum(len(s.attempts) for s in r.steps)
    assert set(POOL_OF_ROLE.values()) >= set(runtime.busy)
    return Simulation(
        n=n,
        wall_s=runtime.clock,
        pool_busy_s={**runtime.busy, "cpu": runtime.cpu_busy},
        pool_size={**vars(concurrency), "cpu": runtime.cpus or 1},
        roles=counts,
        statuses=statuses,
        edit_attempts=attempts,
        records=records if keep_records else [],
    )
