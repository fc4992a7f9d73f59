"""``edct estimate`` counts the known-answer controls' calls (issue 44): per judge, controls ×
judges × samples × (2 graded, else 1); the extractor one per concepts control; the edit parser
one per edit-parse control when it is an LLM."""

from __future__ import annotations

from edct_task.config import calibration_config
from edct_task.estimate.plan import control_calls, estimate
from edct_task.estimate.report import render


def _config(judges=1, **protocol):
    base = calibration_config(n=4).model_dump(mode="json")
    base["protocol"].update(protocol)
    if judges > 1:  # a panel: protocol.judges follows from roles.judge
        base["roles"]["judge"] = [base["roles"]["judge"]] * judges
    return type(calibration_config())(**base)


def test_control_calls_per_role():
    cfg = _config(controls=5, judges=1, judge_samples=1, graded=True, llm_edit_parser=True)
    calls = {role: c for role, (c, _, _) in control_calls(cfg).items()}
    assert calls == {"judge": 5 * 1 * 1 * 2, "extractor": 5, "edit_parser": 5}
    cfg = _config(
        controls=4, judges=3, judge_samples=2, judge_temperature=0.7, graded=False, llm_edit_parser=False
    )
    calls = {role: c for role, (c, _, _) in control_calls(cfg).items()}
    assert calls == {"judge": 4 * 3 * 2 * 1, "extractor": 4}
    assert control_calls(_config(controls=0)) == {}


def test_estimate_adds_the_controls_to_each_role():
    on = estimate(_config(controls=6, llm_edit_parser=True), 3, what_if=False)
    off = estimate(_config(controls=0, llm_edit_parser=True), 3, what_if=False)
    by_on = {r.role: r for r in on.roles}
    by_off = {r.role: r for r in off.roles}
    graded = 2 if _config().protocol.graded else 1
    assert by_on["judge"].controls == 6 * graded
    assert by_on["judge"].calls - by_off["judge"].calls == 6 * graded
    assert by_on["extractor"].calls - by_off["extractor"].calls == 6
    assert by_on["judge"].prompt_tokens > by_off["judge"].prompt_tokens
    assert by_on["target"].calls == by_off["target"].calls and by_on["target"].controls == 0
    (line,) = [x for x in render(on, "x").splitlines() if "known-answer controls:" in x]
    assert f"judge {6 * graded}" in line and "extractor 6" in line
