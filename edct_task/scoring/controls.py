"""How well each text role answered the run's known-answer controls, and whether the run can be
trusted (``docs/concepts/judge-reliability.md``).

Per role and judge: the controls' count, how many were answered right, the accuracy with its 95%
Wilson interval, and the same by kind (``ac=1 ef=0``, ``level 4``, ``concepts``, ``REMOVE`` …).
A role is **below the bar** when its whole interval lies below the configured bar
(``protocol.control_bar``): the controls then show, at 95% confidence, that it answers fewer
than that share right. A run with such a role is *unreliable*: ``edct run`` says so in one line
per role and exits with ``EXIT_UNRELIABLE``; reports, audit pages, the leaderboard and ``edct
compare`` mark or refuse it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edct_task.core.records import ControlRecord
from edct_task.scoring.statistics import wilson_interval

EXIT_UNRELIABLE = 4
"""``edct run``'s exit code when a role is below the controls' bar."""

ROLE_LABELS = {
    "judge_binary": "binary judge",
    "judge_graded": "graded judge",
    "extractor": "extractor",
    "edit_parser": "edit parser",
}


def _tally(records: list[ControlRecord]) -> dict[str, Any]:
    n = len(records)
    correct = sum(r.correct for r in records)
    ci = wilson_interval(correct, n)
    return {
        "n": n,
        "correct": correct,
        "accuracy": None if n == 0 else round(correct / n, 4),
        "ci": None if n == 0 else [round(ci.low, 4), round(ci.high, 4)],
    }


def summarise_controls(records: Iterable[ControlRecord], *, bar: float, requested: int) -> dict[str, Any]:
    """The ``controls`` block of ``results.json``: per role → judge → tally, by kind; the roles below
    ``bar``; ``requested`` is the configured number of controls per role (0: off)."""
    grouped: dict[str, dict[str, list[ControlRecord]]] = {}
    unanswered: dict[str, dict[str, int]] = {}
    calls = 0
    for r in records:
        calls += 1
        grouped.setdefault(r.role, {}).setdefault(r.judge, [])
        if r.unanswered:  # the call failed: no evidence either way (counted, left out)
            per_role = unanswered.setdefault(r.role, {})
            per_role[r.judge] = per_role.get(r.judge, 0) + 1
            continue
        grouped[r.role][r.judge].append(r)
    roles: dict[str, Any] = {}
    below: list[str] = []
    for role in sorted(grouped, key=lambda x: list(ROLE_LABELS).index(x) if x in ROLE_LABELS else 99):
        roles[role] = {}
        for judge, rows in sorted(grouped[role].items()):
            tally = _tally(rows)
            kinds: dict[str, list[ControlRecord]] = {}
            for r in rows:
                kinds.setdefault(r.kind, []).append(r)
            tally["by_kind"] = {k: _tally(v) for k, v in sorted(kinds.items())}
            tally["unanswered"] = unanswered.get(role, {}).get(judge, 0)
            tally["below_bar"] = bool(tally["ci"] is not None and tally["ci"][1] < bar)
            roles[role][judge] = tally
            if tally["below_bar"]:
                below.append(unreliable_line(role, judge, tally, bar))
    return {
        "requested": requested,
        "bar": bar,
        "calls": calls,
        "roles": roles,
        "unreliable": below,
    }


def unreliable_line(role: str, judge: str, tally: dict[str, Any], bar: float) -> str:
    """One line naming a role below the bar and its accuracy."""
    who = ROLE_LABELS.get(role, role) + ("" if judge in ("judge", role) else f" ({judge})")
    low, high = tally["ci"]
    return (
        f"{who}: {tally['correct']}/{tally['n']} known-answer controls right "
        f"({tally['accuracy']:.0%}, 95% CI [{low:.2f}, {high:.2f}]), below the bar {bar:.2f}"
    )


def unreliable_reasons(controls: dict[str, Any] | None) -> list[str]:
    """The lines of a results' ``controls`` block that make the run unreliable (none: reliable, or
    a run without controls)."""
    if not controls:
        return []
    return list(controls.get("unreliable") or [])


def controls_line(controls: dict[str, Any] | None) -> str:
    """The console line of a run's controls: each role's accuracy, or that they were off."""
    if not controls or not controls.get("requested"):
        return "controls: off (protocol.controls: 0): no check of the text roles in this run"
    parts = []
    for role, judges in controls["roles"].items():
        for judge, t in judges.items():
            who = ROLE_LABELS.get(role, role) + ("" if judge in ("judge", role) else f" {judge}")
            flag = " BELOW THE BAR" if t["below_bar"] else ""
            lost = f" ({t['unanswered']} unanswered)" if t.get("unanswered") else ""
            parts.append(f"{who} {t['correct']}/{t['n']}{lost}{flag}")
    return f"controls ({controls['calls']} calls, bar {controls['bar']:.2f}): " + ", ".join(parts)


def controls_rows(controls: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per role and judge of a ``controls`` block, for tables: ``role`` (its label),
    ``judge``, ``n``, ``correct``, ``accuracy``, ``ci`` ([low, high] or None), ``below_bar``."""
    rows: list[dict[str, Any]] = []
    if not controls:
        return rows
    for role, judges in (controls.get("roles") or {}).items():
        for judge, t in (judges or {}).items():
            rows.append(
                {
                    "role": ROLE_LABELS.get(role, role),
                    "judge": judge,
                    "n": t.get("n"),
                    "correct": t.get("correct"),
                    "accuracy": t.get("accuracy"),
                    "ci": t.get("ci"),
                    "below_bar": bool(t.get("below_bar")),
                }
            )
    return rows


def controls_status(controls: dict[str, Any] | None) -> str:
    """``not run`` (a run made before controls: no block, or a block without calls), ``off``
    (``protocol.controls: 0``), ``passed`` or ``below the bar``."""
    if controls is None:
        return "not run"
    if unreliable_reasons(controls):
        return "below the bar"
    if not controls.get("requested"):
        return "off"
    return "passed" if controls.get("calls") else "not run"
