"""benchmarks/bench_lmms.py starts from empty stage caches: a second run with the same --out
measures the same work again instead of cache hits (or says that it reused them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

from bench_lmms import fresh_folders


def _leftovers(out: Path) -> list[Path]:
    paths = [out / "work_fast" / "images" / "ab" / "x.png", out / "work_lmms" / "stage.sqlite"]
    paths += [
        out / "fast" / "1_results.json",
        out / "zero" / "edct" / "cache" / "c",
        out / "edct" / "cache" / "c",
    ]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("from an earlier run")
    return paths


def test_an_earlier_runs_caches_are_removed(tmp_path: Path) -> None:
    paths = _leftovers(tmp_path)
    (tmp_path / "notes.txt").write_text("not the benchmark's")
    assert fresh_folders(tmp_path, resume=False) == "empty"
    assert not any(p.exists() for p in paths)
    assert (tmp_path / "notes.txt").exists()


def test_resume_keeps_them_and_says_so(tmp_path: Path) -> None:
    paths = _leftovers(tmp_path)
    assert fresh_folders(tmp_path, resume=True) == "reused"
    assert all(p.exists() for p in paths)
    assert fresh_folders(tmp_path / "new", resume=True) == "empty"
