"""The architecture holds in the imports, transitively (import-linter's contracts in pyproject.toml),
and the core imports no heavy library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HEAVY = ("cv2", "torch", "httpx", "httpx2", "openai", "PIL", "transformers", "vllm", "datasets", "sqlite3")


def test_every_import_contract_is_kept() -> None:
    """Layers (tools > composition > engine > core), leaves that import nothing of edct_task, and
    no cycle between the packages of edct_task: lint-imports' own checks, on the real graph."""
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "Contracts: 5 kept, 0 broken." in out.stdout


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    "modules",
    [
        ("edct_task.core.records", "edct_task.core.requests", "edct_task.core.errors"),
        ("edct_task.core.canonical",),
        ("edct_task.engine.protocol", "edct_task.engine.drive"),
        ("verification", "model_adapters.contracts"),
    ],
)
def test_the_core_and_the_protocol_load_no_heavy_library(modules: tuple[str, ...]) -> None:
    code = (
        "import json, sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == []


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The check can fail: the same contracts on a copy where the core imports the engine."""
    import shutil

    for name in ("edct_task", "verification", "model_adapters"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "edct_task" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom edct_task.engine import protocol  # noqa\n")
    out = _lint_imports(tmp_path)
    assert out.returncode == 1
    assert "edct_task.core is not allowed to import edct_task.engine" in out.stdout


def test_every_part_of_edct_task_is_in_a_layer() -> None:
    """A new package or module cannot escape the contract by not being named in it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    named = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    parts = {
        f"edct_task.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "edct_task").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert parts - named == set()
