"""The text ``edct estimate`` prints (``--json`` prints ``Estimate.as_dict()`` instead)."""

from __future__ import annotations

from edct_task.estimate.plan import Estimate, hours

POOL_ROLES = {
    "target": "target",
    "text": "extractor/judge/edit parser",
    "edit": "editor",
    "verify": "verification",
    "cpu": "CPU of this machine",
}


def _money(value: float | None) -> str:
    return "unknown (no prices:)" if value is None else f"${value:,.2f}"


def render(e: Estimate, name: str) -> str:
    lines = [f"edct estimate: {name}, {e.n} items (no model contacted)", ""]
    head = f"{'role':<22} {'backend':<22} {'calls':>7} {'images':>7} {'prompt tok':>11} {'compl. tok':>11} "
    lines.append(head + f"{'cost':>10}  latency model")
    for r in e.roles:
        calls = f"{r.calls}" if r.calls == r.conversations else f"{r.calls}/{r.conversations}"
        cost = "-" if r.cost_usd is None else f"${r.cost_usd:,.2f}"
        role = r.role + (f" ({r.members} judges)" if r.members > 1 else "")
        lines.append(
            f"{role:<22} {r.backend[:22]:<22} {calls:>7} {r.images:>7} {r.prompt_tokens:>11,} "
            f"{r.completion_tokens:>11,} {cost:>10}  {r.latency}"
        )
    lines.append("  (target calls: batches/conversations; tokens: characters ÷ 4 plus the image tokens)")
    checked = [f"{r.role} {r.controls}" for r in e.roles if r.controls]
    if checked:
        lines.append(f"  (of these, known-answer controls: {', '.join(checked)} calls; protocol.controls)")
    most = [r.max_cost_usd for r in e.roles if r.max_cost_usd is not None]
    lines += [
        "",
        f"cost: {_money(e.cost_usd)}"
        + (f" (at most ${sum(most):,.2f} if every reply used max_new_tokens)" if most else ""),
        f"outcome: {', '.join(f'{k} {v}' for k, v in sorted(e.statuses.items()))} "
        f"(verification pass rate {e.verify_pass_rate:.0%} per attempt)",
        "",
        f"wall time: {hours(e.wall_s)} (the pipelined driver on a virtual clock; process start and "
        "model loading not included)",
        "busy: "
        + ", ".join(
            f"{POOL_ROLES.get(p, p)} {v:.0%}" for p, v in sorted(e.busy.items(), key=lambda kv: -kv[1])
        ),
        f"bottleneck: {POOL_ROLES.get(e.bottleneck or '', e.bottleneck)}",
    ]
    if e.what_if:
        lines += ["", "what if:"]
        for w in e.what_if:
            change = (w.wall_s - e.wall_s) / e.wall_s if e.wall_s else 0.0
            lines.append(
                f"  {w.label:<26} {hours(w.wall_s):>14} ({change:+.0%}), bottleneck "
                f"{POOL_ROLES.get(w.bottleneck or '', w.bottleneck)}"
            )
    return "\n".join(lines)
