"""The lmms-eval face keeps its process state in one module (``edct_task.lmms.state``), reads no
command line, and names no other lmms-eval task's modules: checked on the source, with a
self-check that the checks catch what the face used to do."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import edct_task.lmms

FACE = Path(edct_task.lmms.__file__).parent
STATE = "state.py"
MUTABLE = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def violations(source: str) -> list[str]:
    """What in one module's source is process state or a command-line read."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        if isinstance(node, ast.Attribute) and node.attr == "argv":
            found.append(f"line {node.lineno}: reads sys.argv")
        if isinstance(node, ast.Constant) and str(node.value).startswith("lmms_eval.tasks."):
            found.append(f"line {node.lineno}: names lmms-eval's task module {node.value}")
    for node in tree.body:  # module-level mutable containers: a memo, a registry, a flag's home
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        value = getattr(node, "value", None)
        mutable = isinstance(value, MUTABLE) or (
            isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("dict", "list", "set")
        )
        if targets and mutable:
            names = ", ".join(ast.unparse(t) for t in targets)
            found.append(f"line {node.lineno}: module-level mutable {names}")
    return found


def test_the_face_keeps_its_state_in_state_py_only():
    modules = sorted(p for p in FACE.glob("*.py") if p.name != STATE)
    assert len(modules) >= 9
    bad = {p.name: v for p in modules if (v := violations(p.read_text(encoding="utf-8")))}
    assert bad == {}


def test_the_check_catches_what_the_face_used_to_do():
    old = """
import argparse, sys
_ACTIVE = None
_BUILT: dict = {}
WARM = ("lmms_eval.evaluator", "lmms_eval.tasks.amber_g.utils")
def replaying(r):
    global _ACTIVE
    _ACTIVE = r
def lmms_cli():
    return argparse.ArgumentParser().parse_known_args(sys.argv[1:])
"""
    found = violations(old)
    assert any("global _ACTIVE" in v for v in found)
    assert any("_BUILT" in v for v in found)
    assert any("sys.argv" in v for v in found)
    assert any("amber_g" in v for v in found)
    # and the state module itself is where such things live
    assert violations((FACE / STATE).read_text(encoding="utf-8"))


def test_the_hooks_see_lmms_evals_own_call(monkeypatch, tmp_path):
    """What lmms-eval was asked to run comes from its ``simple_evaluate`` arguments (the real
    signature, positional or keyword, ``model_args`` as a string or a mapping), and only while that
    call runs: the run folder goes to its tracker's output path, the target is its model."""
    from types import SimpleNamespace

    import lmms_eval.evaluator

    from edct_task.lmms import plugin, state
    from edct_task.lmms.settings import loop_target, run_folder

    real = lmms_eval.evaluator.simple_evaluate
    seen = []

    def fake(*args, **kwargs):
        call = state.invocation()
        seen.append((call, run_folder(tmp_path / "work", call), loop_target(call)))

    fake.__signature__ = inspect.signature(real)  # lmms-eval's own parameters, not a copy of a wrapper

    monkeypatch.delenv("EDCT_OUTPUT_DIR", raising=False)
    monkeypatch.setattr(lmms_eval.evaluator, "simple_evaluate", fake)
    plugin.watch_evaluations()
    tracker = SimpleNamespace(output_path=str(tmp_path / "X"))
    lmms_eval.evaluator.simple_evaluate(
        "qwen3_vl",
        "pretrained=org/m,api_key=sk-secret",
        tasks=["edct_calibration"],
        device="cpu",
        evaluation_tracker=tracker,
    )
    lmms_eval.evaluator.simple_evaluate(model="edct_reference", model_args={"behavior": "prior"}, tasks="mme")
    (first, folder, target), (second, default, other) = seen
    assert first.tasks == ("edct_calibration",) and first.device == "cpu" and not first.command_line
    assert folder == (tmp_path / "X" / "edct").resolve() and default == tmp_path / "work" / "run"
    assert target["model"] == "qwen3_vl" and target["model_args"] == "pretrained=org/m"  # no secret
    assert other["model_args"] == "behavior=prior" and second.tasks == ("mme",)
    assert state.invocation() == state.NO_INVOCATION  # outside a call: nothing is assumed
