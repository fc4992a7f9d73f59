"""The layers visible in the tree hold in the imports: verification/ is a leaf, model_adapters/
knows nothing of the protocol, and the protocol performs no I/O."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        names |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        out[str(path.relative_to(ROOT))] = {n.split(".")[0] for n in names if n}
    return out


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("verification", {"edct_task", "model_adapters", "httpx", "httpx2", "openai"}),
        ("model_adapters", {"edct_task"}),
    ],
)
def test_leaf_packages_import_no_upper_layer(package: str, forbidden: set[str]) -> None:
    offending = {f: sorted(names & forbidden) for f, names in _imports(package).items() if names & forbidden}
    assert offending == {}


def test_model_adapters_use_verification_only_through_its_detection_contract() -> None:
    allowed = {"verification.detection"}
    for path in sorted((ROOT / "model_adapters").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used = {
            n.module
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("verification")
        }
        assert used <= allowed, (path.name, used)


def test_the_protocol_performs_no_io() -> None:
    names = set()
    for module in ("protocol", "requests", "records", "drive"):
        tree = ast.parse((ROOT / "edct_task" / "engine" / f"{module}.py").read_text(encoding="utf-8"))
        names |= {
            n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
        }
        names |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not names & {"httpx", "httpx2", "openai", "torch", "vllm", "transformers", "sqlite3", "cv2", "PIL"}
