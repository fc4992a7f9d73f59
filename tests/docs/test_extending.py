"""docs/extending.md runs: its example package installed the way ``pip install`` exposes it,
every ``edct`` line of its ``bash`` blocks runs as written, and the new backend and domain show up
where the guide says."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from docs.test_commands import ROOT, kind_of, shell_lines, split_commands
from support.hang_guard import hang_limit
from support.installed import TOY, install

GUIDE = ROOT / "docs" / "extending.md"


def guide_commands() -> list[list[str]]:
    return [words for _, line in shell_lines(GUIDE) for words in split_commands(line)]


def test_the_guide_installs_its_package_and_includes_its_files() -> None:
    commands = guide_commands()
    assert ["pip", "install", "-e", "docs/examples/extending/edct-toy"] in commands
    text = GUIDE.read_text("utf-8")
    for included in re.findall(r'--8<-- "([^"]+)"', text):
        assert (ROOT / included).is_file(), included
    assert {p.relative_to(ROOT).as_posix() for p in TOY.rglob("*.py") if p.name != "__init__.py"} <= set(
        re.findall(r'--8<-- "([^"]+)"', text)
    )


@pytest.mark.slow
def test_the_guide_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = install(tmp_path / "site", monkeypatch)
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")]),
    )
    outputs: dict[str, str] = {}
    ran = 0
    for words in guide_commands():
        program, args = kind_of(words)
        if program != "edct":
            continue
        assignments = dict(w.split("=", 1) for w in words[: words.index("edct")])
        args = [str(ROOT / a) if a.startswith("docs/examples/") else a for a in args]
        done = subprocess.run(
            [sys.executable, "-m", "edct_task.cli.main", *args],
            cwd=tmp_path,
            env={**env, **assignments},
            capture_output=True,
            text=True,
            timeout=hang_limit(300),
        )
        line = shlex.join(words)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        outputs[line] = " ".join(done.stdout.split())
        ran += 1
    assert ran == 4
    # the backend: listed, and edct estimate assumes its latency
    (listed,) = [out for line, out in outputs.items() if line == "edct backends"]
    assert re.search(r"editor .*acme-edit", listed)
    (estimate,) = [out for line, out in outputs.items() if "estimate" in line]
    latency = r"7 s ± 1\.5 \[default \(Acme's hosted editor, ~7 s per edit\)\]"
    assert re.search(r"editor acme-edit \d+ [^\[]* " + latency, estimate)
    # the domain: its flags in the help, and the build
    (help_text,) = [out for line, out in outputs.items() if line == "edct build-bench --help"]
    assert "Shapes (domain shapes):" in help_text and "--shapes-table FILE" in help_text
    (built,) = [out for line, out in outputs.items() if "--shapes-table" in line]
    assert "shapes 4 selected of 4 eligible (5 read; removed: shapes.known_shape=1)" in built
    manifest = json.loads((tmp_path / "shapes-bench" / "edct_manifest.json").read_text())
    assert manifest["counts"] == {"shapes": 4}
    assert manifest["system_prompts"]["shapes"] == "You are looking at a drawing of one shape."
