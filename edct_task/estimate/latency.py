"""How long each role's calls take, and how often they fail: the inputs of a wall-time estimate.

A ``CallTime`` is one role's latency model: a call takes ``seconds`` (drawn from a log-normal
with that mean and standard deviation ``sd``, or resampled from ``observed`` per-call seconds of a
finished run), plus ``per_item`` seconds per conversation of a batch; a batch of ``n``
conversations is served ``parallel`` at a time (an OpenAI-compatible target with
``concurrency: 32`` answers 64 conversations in two waves). ``retry_rate`` is the share of calls
that need one more attempt on the wire (their latency again plus ``retry_wait_s``);
``failure_rate`` the share that fail after the adapter's retries (the sample pays: an edit
attempt is lost, a sample is excluded or unscored).

Where the numbers come from, first match wins (``latency_models``): ``--latency ROLE=S`` on the
command line; a finished run (``from_run``: per-call statistics in its ``results.json``
``calls`` block — means, or the distribution when the folder holds the run's call log
(``call_log: RUN/calls.jsonl``) — and its verification pass rate and failure counts); the ``latency_s`` option
of a calibration backend in the config; else the backend's own ``latency`` (its
``BackendRecord``), assumptions stated in the README (a remote VLM a few seconds, a reasoning
judge ~10 s, an image editor ~20 s). For the target a run records seconds per conversation,
not per batch (batch sizes are not logged), so a per-batch ``latency_s`` in the config is
preferred to it. A run's per-call seconds already include the adapters' retries on the wire (a
call is timed from the driver), so no retry rate is added to them unless ``--retry-rate`` asks
for it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edct_task.core.errors import ConfigError
from edct_task.roles import record_of
from verification.backends import BackendRecord

ROLES = ("target", "extractor", "judge", "edit_parser", "editor", "detector")
STAGE_ROLE = {
    "target": "target",
    "concepts": "extractor",
    "instructions": "extractor",
    "edit_parse": "edit_parser",
    "judge": "judge",
    "edit": "editor",
    "verify": "detector",
}
POOL_OF_ROLE = {
    "target": "target",
    "extractor": "text",
    "judge": "text",
    "edit_parser": "text",
    "editor": "edit",
    "detector": "verify",
}


@dataclass(frozen=True)
class CallTime:
    """One role's latency and failure model (module docstring)."""

    seconds: float
    sd: float = 0.0
    per_item: float = 0.0
    cpu: float = 0.0
    """CPU seconds in this process per call (per conversation for the target): verification, an
    in-process model; they queue for the machine's processors."""
    parallel: int | None = None
    retry_rate: float = 0.0
    retry_wait_s: float = 1.0
    failure_rate: float = 0.0
    observed: tuple[float, ...] = ()
    serial: bool = False
    """One in-process model behind a lock (a diffusers editor, a local detector; the record's
    ``serial``): one call at a time, whatever the pool's concurrency."""
    source: str = "default"

    def draw(self, rng: random.Random, items: int = 1) -> tuple[float, float]:
        """(waiting seconds, CPU seconds) of one call serving ``items`` conversations, retries
        included."""
        waves = 1 if not self.parallel else math.ceil(items / self.parallel)
        one = sum(self._once(rng) for _ in range(waves)) + self.per_item * items
        total = one
        if self.retry_rate and rng.random() < self.retry_rate:
            total += self.retry_wait_s + one
        return total, self.cpu * items

    def _once(self, rng: random.Random) -> float:
        if self.observed:
            return rng.choice(self.observed)
        if self.sd <= 0 or self.seconds <= 0:
            return self.seconds
        # log-normal with the given mean and standard deviation
        s2 = math.log1p((self.sd / self.seconds) ** 2)
        return rng.lognormvariate(math.log(self.seconds) - s2 / 2, math.sqrt(s2))


def _kind(role: str) -> str:
    return "text" if role in ("extractor", "judge", "edit_parser") else role


def _default(role: str, backend: str) -> tuple[CallTime, BackendRecord]:
    """The backend's own assumption (``BackendRecord.latency``), and its record."""
    record = record_of(_kind(role), backend)
    if record is None:
        raise ConfigError(f"roles.{role}: unknown backend {backend!r}; `edct backends` lists them")
    t = record.latency
    return (
        CallTime(t.seconds, sd=t.sd, per_item=t.per_item, cpu=t.cpu, source=f"default ({t.note})"),
        record,
    )


@dataclass(frozen=True)
class RunStats:
    """What a finished run says about its calls (``from_run``)."""

    per_stage: dict[str, CallTime]
    verify_pass_rate: float | None
    completion_tokens: dict[str, float]
    """Mean completion (+ reasoning) tokens per request, by role, where the run counted them."""
    source: str
    hit_rates: dict[str, float] = field(default_factory=dict)
    """Share of each stage's requests the run answered without a call (stage cache, twins)."""
    cpu_stretch: float = 1.0
    """Wall seconds per CPU second of the run's CPU-bound stage (verification): how much the
    machine's load (other processes, this run's own threads) stretched CPU work."""


def from_run(folder: Path) -> RunStats:
    """Per-stage call statistics of a finished run folder, read through ``run.outputs.load_run``
    (an ``edct run`` folder, or an lmms-eval output folder: the run folder its logs name); a folder
    or file that is not one is one ``ConfigError`` line."""
    from edct_task.run.outputs import RunReadError, call_seconds, load_run

    try:
        loaded = load_run(folder)
        observed_calls = call_seconds(loaded.path)
    except RunReadError as exc:
        raise ConfigError(f"--latencies-from {exc}") from None
    where = loaded.results_file or loaded.path
    block = loaded.calls
    if not isinstance(block, Mapping) or not isinstance(block.get("calls"), Mapping) or not block["calls"]:
        raise ConfigError(f"--latencies-from {where}: it records no backend calls")
    calls = _numbers(block, "calls", where)
    seconds, failures = _numbers(block, "seconds", where), _numbers(block, "failures", where)
    cpu_seconds = _numbers(block, "cpu_seconds", where)
    local_cpu = _numbers(block, "local_cpu_seconds", where)  # spent after the backend answered
    per_stage: dict[str, CallTime] = {}
    for stage, n in calls.items():
        if not n:
            continue
        fails = int(failures.get(stage, 0))
        in_slot = cpu_seconds.get(stage, 0.0) - local_cpu.get(stage, 0.0)
        wall, cpu = seconds.get(stage, 0.0) / n, max(0.0, in_slot) / n
        per_stage[stage] = CallTime(
            max(0.0, wall - cpu),
            cpu=cpu,
            failure_rate=fails / (n + fails) if stage != "verify" else 0.0,
            source=f"{loaded.path.name}: mean of {int(n)} calls",
        )
    usage = loaded.usage.get("roles", {}) if isinstance(loaded.usage, Mapping) else {}
    tokens = {
        role: (_number(u.get("completion_tokens")) + _number(u.get("reasoning_tokens")))
        / _number(u["requests"])
        for role, u in (usage.items() if isinstance(usage, Mapping) else ())
        if isinstance(u, Mapping) and _number(u.get("requests")) > 0
    }
    hits = _numbers(block, "cache_hits", where)
    hit_rates = {
        stage: h / (h + calls.get(stage, 0) + failures.get(stage, 0))
        for stage, h in hits.items()
        if h and stage != "target"
    }
    if hits.get("target"):  # a fresh run never repeats a target conversation: this one resumed,
        hit_rates = {}  # and its hits say what was cached, not how often the data repeats
    for stage, observed in observed_calls.items():  # per-call seconds: the distribution
        model = per_stage.get(stage)
        if model is not None and stage != "target" and len(observed) >= 5:
            waits = tuple(max(0.0, x - model.cpu) for x in observed)
            per_stage[stage] = replace(
                model, observed=waits, source=f"{model.source}, {len(waits)} call times"
            )
    stretch = 1.0
    if cpu_seconds.get("verify", 0.0) > 0:
        stretch = max(1.0, seconds.get("verify", 0.0) / cpu_seconds["verify"])
    return RunStats(per_stage, _pass_rate(loaded.records), tokens, str(where), hit_rates, stretch)


def _number(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and value >= 0 else 0.0


def _numbers(block: Mapping[str, Any], key: str, where: Any) -> dict[str, float]:
    """``block[key]``: stage → a finite non-negative number, or one ``ConfigError`` line."""
    value = block.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"--latencies-from {where}: calls.{key} is not an object of numbers")
    out = {}
    for stage, n in value.items():
        ok = isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and 0 <= n < 1e15
        if not ok:
            raise ConfigError(
                f"--latencies-from {where}: calls.{key}.{str(stage)[:40]} is {str(n)[:40]!r}, "
                "not a non-negative number"
            )
        out[str(stage)] = float(n)
    return out


def _pass_rate(records: Any) -> float | None:
    """Share of verified edit attempts that passed, from the run's sample records."""
    checks = [a.check for r in records for step in r.steps for a in step.attempts if a.check is not None]
    return sum(c.passed for c in checks) / len(checks) if checks else None


def _measured(role: str, run: RunStats | None) -> CallTime | None:
    """A role's model from a finished run: the mean over its stages' calls (the target: per
    conversation, since the run does not record its batches' sizes)."""
    if run is None:
        return None
    stages = [s for s, r in STAGE_ROLE.items() if r == role and s in run.per_stage]
    if not stages:
        return None
    first = run.per_stage[stages[0]]
    mean = sum(run.per_stage[s].seconds for s in stages) / len(stages)
    cpu = sum(run.per_stage[s].cpu for s in stages) / len(stages)
    if role == "target":
        return replace(first, seconds=0.0, per_item=mean, cpu=cpu, observed=())
    observed = tuple(x for s in stages for x in run.per_stage[s].observed)
    return replace(first, seconds=mean, cpu=cpu, observed=observed)


def parse_assignments(items: list[str], flag: str) -> dict[str, float]:
    """``ROLE=NUMBER`` pairs of a repeated option."""
    out: dict[str, float] = {}
    for item in items:
        role, _, value = item.partition("=")
        role = role.strip()
        if role not in ROLES and role != "text":
            raise ConfigError(f"{flag} {item!r}: the role must be one of {', '.join(ROLES)} (or text)")
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{flag} {item!r}: expected ROLE=NUMBER") from None
        if number < 0:
            raise ConfigError(f"{flag} {item!r}: must not be negative")
        for r in ("extractor", "judge", "edit_parser") if role == "text" else (role,):
            out[r] = number
    return out


def latency_models(
    roles: Mapping[str, tuple[str, Mapping[str, Any]]],
    *,
    run: RunStats | None = None,
    latency: Mapping[str, float] | None = None,
    failure: Mapping[str, float] | None = None,
    retry: Mapping[str, float] | None = None,
) -> dict[str, CallTime]:
    """Each role's ``CallTime`` (first match wins, see the module docstring).

    ``roles``: role -> (backend name, options) of the config (a panel: its first member)."""
    out: dict[str, CallTime] = {}
    for role, (backend, options) in roles.items():
        if role not in ROLES:
            continue
        model, record = _default(role, backend)
        configured = options.get("latency_s")
        measured = _measured(role, run)
        if role == "target" and configured is not None and measured is not None and run is not None:
            # a batch's latency beats a per-conversation mean; the in-process model's CPU per
            # conversation is stretched as the run's load stretched CPU work
            model = CallTime(
                float(configured),
                per_item=measured.cpu * run.cpu_stretch,
                source=f"config latency_s (per batch) + run's CPU x{run.cpu_stretch:.1f}",
            )
        elif role == "target" and configured is not None:
            model = CallTime(float(configured), cpu=model.cpu, source="config latency_s (per batch)")
        elif measured is not None:
            model = measured
        elif configured is not None:  # the calibration backends sleep, then compute
            model = replace(model, seconds=float(configured), sd=0.0, source="config latency_s")
        if latency and role in latency:
            model = CallTime(latency[role], source="--latency")
        concurrency = record.options_model().model_fields.get("concurrency")
        if role == "target" and model.parallel is None and concurrency is not None:  # a served target
            model = replace(model, parallel=int(options.get("concurrency", concurrency.default)))
        if record.serial:
            model = replace(model, serial=True)
        if failure and role in failure:
            model = replace(model, failure_rate=failure[role])
        if retry and role in retry:
            model = replace(model, retry_rate=retry[role])
        out[role] = model
    return out
