"""``edct estimate``: what a run will send, cost and take, before any model is contacted.

``estimate`` reads a run configuration, simulates the run (``simulate.py``: the real pipelined
driver on a virtual clock, simulated backends with each role's ``CallTime``), and turns what the
simulated roles were sent into tokens and dollars: prompt tokens are the rendered prompts'
characters ÷ 4 (no tokenizer is loaded; English prose averages about four characters a token)
plus ``image_tokens`` per image a model reads; completion tokens are a typical reply length per
stage, or a finished run's mean per request (``--latencies-from``); cost uses each role's
``prices:`` option (USD per million tokens, the option ``openai-chat`` already takes), and is
unknown for a role without prices. The upper bound at ``max_new_tokens`` is printed beside it.

Known-answer controls (``protocol.controls`` per kind, ``edct_task.controls``) cost calls too:
``control_calls`` draws the run's controls as ``edct run`` does and renders their requests, so
each text role's row counts them (``controls``: per judge, controls × judges × samples × 2 when
graded else 1; the extractor, one per concepts control; the edit parser, one per edit-parse control
when it is an LLM) in its calls and prompt tokens. A dataset run draws from every EDCT-Bench domain
(the samples' domains are not read here), so its count is an upper bound.

What-if rows rerun the simulation with one limit changed (editor concurrency 4/8/16, twice the
text or target concurrency), so the table shows what a setting would buy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from edct_task.config import RunConfig
from edct_task.engine.driver import Limits
from edct_task.estimate.latency import POOL_OF_ROLE, CallTime, RunStats, latency_models
from edct_task.estimate.simulate import Simulation, simulate
from edct_task.roles import PanelSpec, RoleSpec

CHARS_PER_TOKEN = 4.0
IMAGE_TOKENS = 1000
"""Tokens a VLM spends on one image (Qwen3-VL: ~1,000 for a 1 MP picture); ``--image-tokens``."""


@dataclass(frozen=True)
class RoleEstimate:
    role: str
    backend: str
    members: int
    """Judges of a panel (1 otherwise)."""
    calls: int
    conversations: int
    images: int
    prompt_tokens: int
    completion_tokens: int
    max_completion_tokens: int
    cost_usd: float | None
    max_cost_usd: float | None
    latency: str
    """How this role's latency was modelled, and from where."""
    controls: int = 0
    """Of ``calls``: the known-answer controls' (``control_calls``)."""


@dataclass(frozen=True)
class WhatIf:
    label: str
    wall_s: float
    bottleneck: str | None


@dataclass
class Estimate:
    n: int
    wall_s: float
    busy: dict[str, float]
    bottleneck: str | None
    roles: list[RoleEstimate]
    statuses: dict[str, int]
    verify_pass_rate: float
    limits: Limits
    what_if: list[WhatIf] = field(default_factory=list)

    @property
    def cost_usd(self) -> float | None:
        known = [r.cost_usd for r in self.roles if r.cost_usd is not None]
        return sum(known) if known else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "wall_s": round(self.wall_s, 1),
            "busy_fraction": {k: round(v, 3) for k, v in self.busy.items()},
            "bottleneck": self.bottleneck,
            "statuses": self.statuses,
            "verify_pass_rate": self.verify_pass_rate,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 2),
            "roles": [vars(r) for r in self.roles],
            "what_if": [vars(w) for w in self.what_if],
            "limits": self.limits.model_dump(mode="json"),
        }


def role_backends(config: RunConfig) -> dict[str, tuple[str, dict[str, Any], int]]:
    """role -> (backend, options of its first member, members) from the config."""
    out: dict[str, tuple[str, dict[str, Any], int]] = {}
    for role, spec in config.role_specs().items():
        if isinstance(spec, PanelSpec):
            first: RoleSpec = spec.members[0]
            out[role] = (first.backend, dict(first.options), len(spec.members))
        else:
            out[role] = (spec.backend, dict(spec.options), 1)
    return out


def _prices(options: Mapping[str, Any]) -> tuple[float, float] | None:
    prices = options.get("prices")
    if not isinstance(prices, Mapping):
        return None
    return float(prices.get("input_per_million", 0.0)), float(prices.get("output_per_million", 0.0))


def what_if_limits(limits: Limits) -> list[tuple[str, Limits]]:
    rows = []
    for n in (4, 8, 16):
        if n != limits.editor_concurrency:
            rows.append((f"editor_concurrency {n}", limits.model_copy(update={"editor_concurrency": n})))
    text = limits.text_concurrency * 2
    rows.append((f"text_concurrency {text}", limits.model_copy(update={"text_concurrency": text})))
    target = limits.target_concurrency * 2
    rows.append((f"target_concurrency {target}", limits.model_copy(update={"target_concurrency": target})))
    return rows


def control_calls(config: RunConfig) -> dict[str, tuple[int, int, int]]:
    """Role → (calls, prompt characters, completion-token limit) of the run's known-answer
    controls, drawn and rendered as ``edct run`` draws and sends them."""
    from edct_task.bench_data import domains as bench_domains
    from edct_task.controls import control_domains, draw
    from edct_task.engine.controls import control_requests

    protocol = config.protocol
    if not protocol.controls:
        return {}
    calibration = config.data.source == "calibration"
    dataset = config.data.domains or list(bench_domains.names())  # which the data holds is not read
    domains = control_domains([] if calibration else dataset, calibration)
    out: dict[str, tuple[int, int, int]] = {}
    for item in draw(domains, protocol.controls, seed=protocol.seed, k=protocol.k):
        for request in control_requests(item, protocol):
            calls, chars, most = out.get(request.role, (0, 0, 0))
            out[request.role] = (calls + 1, chars + len(request.prompt), most + request.max_new_tokens)
    return out


def estimate(
    config: RunConfig,
    n: int,
    *,
    run: RunStats | None = None,
    latency: Mapping[str, float] | None = None,
    failure: Mapping[str, float] | None = None,
    retry: Mapping[str, float] | None = None,
    verify_pass_rate: float | None = None,
    image_tokens: int = IMAGE_TOKENS,
    what_if: bool = True,
    seed: int = 0,
    cpus: int | None = None,
) -> Estimate:
    """The whole estimate for ``n`` items of ``config`` (module docstring)."""
    backends = role_backends(config)
    times: dict[str, CallTime] = latency_models(
        {role: (b, opts) for role, (b, opts, _) in backends.items()},
        run=run,
        latency=latency,
        failure=failure,
        retry=retry,
    )
    for role in POOL_OF_ROLE:  # a role the config lacks is never asked (no edit parser: rule-based)
        times.setdefault(role, CallTime(0.0, source="not configured"))
    pass_rate = verify_pass_rate
    if pass_rate is None:
        pass_rate = run.verify_pass_rate if run is not None and run.verify_pass_rate is not None else 0.8
    tokens = {}
    if run is not None:
        stage_role = {"target": "target", "concepts": "extractor", "instructions": "extractor"}
        stage_role.update(edit_parse="edit_parser", judge="judge")
        tokens = {s: run.completion_tokens[r] for s, r in stage_role.items() if r in run.completion_tokens}

    def sim(limits: Limits) -> Simulation:
        return simulate(
            n,
            config.protocol,
            limits,
            times,
            verify_pass_rate=pass_rate,
            completion_tokens=tokens,
            seed=seed,
            cpus=cpus,
            hit_rates=run.hit_rates if run is not None else None,
        )

    main = sim(config.limits)
    controls = control_calls(config)
    roles = []
    for role in ("target", "extractor", "edit_parser", "judge", "editor", "detector"):
        count = main.roles.get(role)
        if count is None or role not in backends:
            continue
        backend, options, members = backends[role]
        image_in = image_tokens if role in ("target", "editor") else 0
        c_calls, c_chars, c_most = controls.get(role, (0, 0, 0))
        prompt = int((count.prompt_chars + c_chars) / CHARS_PER_TOKEN + count.images * image_in)
        per_call = count.completion_tokens / count.calls if count.calls else 0.0
        completion = int(
            count.completion_tokens
            + c_calls * per_call
            + (count.items * image_tokens if role == "editor" else 0)
        )
        most = (count.max_completion_tokens or completion) + c_most
        prices = _prices(options)
        cost = max_cost = None
        if prices is not None:
            cost = (prompt * prices[0] + completion * prices[1]) / 1e6
            max_cost = (prompt * prices[0] + most * prices[1]) / 1e6
        t = times[role]
        how = _describe(t, role)
        roles.append(
            RoleEstimate(
                role=role,
                backend=backend,
                members=members,
                calls=count.calls + c_calls,
                conversations=count.items + c_calls,
                images=count.images,
                prompt_tokens=prompt,
                completion_tokens=completion,
                max_completion_tokens=most,
                cost_usd=cost,
                max_cost_usd=max_cost,
                latency=how,
                controls=c_calls,
            )
        )
    rows = []
    if what_if:
        for label, limits in what_if_limits(config.limits):
            s = sim(limits)
            rows.append(WhatIf(label, s.wall_s, s.bottleneck()))
    return Estimate(
        n=n,
        wall_s=main.wall_s,
        busy=main.busy_fraction(),
        bottleneck=main.bottleneck(),
        roles=roles,
        statuses=main.statuses,
        verify_pass_rate=pass_rate,
        limits=config.limits,
        what_if=rows,
    )


def _describe(t: CallTime, role: str) -> str:
    if t.per_item and not t.seconds:
        base = f"{t.per_item:.3g} s per conversation"
    else:
        base = f"{t.seconds:.3g} s" + (f" ± {t.sd:.2g}" if t.sd else "")
        if t.per_item:
            base += f" + {t.per_item:.3g} s per conversation"
    if t.cpu:
        base += f" + {t.cpu * 1000:.3g} ms CPU" + (" per conversation" if role == "target" else "")
    if t.parallel:
        base += f", {t.parallel} at a time"
    if t.serial:
        base += ", one at a time (in-process, locked)"
    extras = []
    if t.retry_rate:
        extras.append(f"{t.retry_rate:.0%} retried")
    if t.failure_rate:
        extras.append(f"{t.failure_rate:.0%} fail")
    return base + (f" ({', '.join(extras)})" if extras else "") + f" [{t.source}]"


def hours(seconds: float) -> str:
    """``1 h 05 min`` / ``4 min 10 s`` / ``12.3 s``."""
    if seconds >= 3600:
        h = int(seconds // 3600)
        return f"{h} h {math.floor((seconds - 3600 * h) / 60):02d} min"
    if seconds >= 120:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{seconds:.1f} s"
