"""Commands in the docs run.

Every ``edct …``, ``lmms-eval …`` (also ``-m lmms_eval`` under ``accelerate launch``/``torchrun``)
and ``make …`` line of a fenced ``bash`` block in README.md and docs/ is collected and checked
against the real command lines: ``edct`` lines parse with ``edct_task.cli.main.build_parser`` (flags
exist, choices are valid, ``--tasks`` are EDCT tasks, a ``--config`` without a path is a shipped
preset); ``lmms-eval`` lines parse with lmms-eval's own parser, name a model lmms-eval or this
plugin registers, and tasks that are ours or in lmms-eval's task folder; ``make`` lines name
Makefile targets. Blocks of other kinds (``text``, ``yaml``) are output and synopses, not collected.

The slow tests run the quick start and a chosen set of those very lines end to end on the
calibration world, made small (``--limit``, ``-n``, ``--set data.n=…``) in a temporary folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.hang_guard import hang_limit

ROOT = Path(__file__).resolve().parents[2]
SHELL_BLOCKS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[\w+-]*)")
OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}


@dataclass(frozen=True)
class DocCommand:
    """One simple command of a docs shell block: where it is, and its words."""

    where: str
    text: str
    words: tuple[str, ...]

    @property
    def program(self) -> str:
        return kind_of(self.words)[0]


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def shell_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, logical line) of every fenced shell block; continuations joined."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, indent = m.group("fence"), m.group("info"), len(m.group("indent"))
        i += 1
        pending, start = "", 0
        while i < len(lines) and not lines[i].strip().startswith(fence):
            if info in SHELL_BLOCKS:
                line = lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i]
                if not pending:
                    start = i + 1
                if line.rstrip().endswith("\\"):
                    pending += line.rstrip()[:-1] + " "
                else:
                    yield start, pending + line
                    pending = ""
            i += 1
        i += 1


def split_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line (``a && b; c | d``), comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[list[str]] = [[]]
    for token in lexer:
        if token in OPERATORS:
            out.append([])
        else:
            out[-1].append(token)
    return [words for words in out if words]


def kind_of(words: tuple[str, ...] | list[str]) -> tuple[str, list[str]]:
    """("edct" | "lmms-eval" | "make" | "", the arguments), environment assignments skipped."""
    words = list(words)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return "", []
    head = Path(words[0]).name
    if head in ("edct", "lmms-eval", "make"):
        return head, words[1:]
    if "-m" in words:  # accelerate launch … -m lmms_eval …, torchrun … -m edct_task.cli.main …
        module_at = words.index("-m") + 1
        if module_at < len(words):
            module = words[module_at]
            if module == "lmms_eval":
                return "lmms-eval", words[module_at + 1 :]
            if module == "edct_task.cli.main":
                return "edct", words[module_at + 1 :]
    return "", []


def doc_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for path in doc_files():
        for number, line in shell_lines(path):
            for words in split_commands(line):
                if kind_of(words)[0]:
                    where = f"{path.relative_to(ROOT)}:{number}"
                    found.append(DocCommand(where, " ".join(words), tuple(words)))
    return found


# -- the checks ----------------------------------------------------------------------------------


def our_tasks() -> set[str]:
    names = set()
    for yaml_file in (ROOT / "task_configs").glob("*.yaml"):
        match = re.search(r"^(?:task|group): *(\S+)", yaml_file.read_text(), re.MULTILINE)
        if match:
            names.add(match.group(1))
    return names


def lmms_eval_tasks() -> set[str]:
    """Task and group names of lmms-eval's own task folder (read as text, not imported)."""
    import lmms_eval

    names: set[str] = set()
    for yaml_file in (Path(lmms_eval.__file__).parent / "tasks").rglob("*.yaml"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            names.update(
                re.findall(r"^(?:task|group): *['\"]?([\w.-]+)", yaml_file.read_text(), re.MULTILINE)
            )
    return names


def check_edct(args: list[str]) -> str | None:
    """None when ``edct ARGS`` parses against the real CLI, else why not."""
    from edct_task.cli.main import build_parser
    from edct_task.presets import preset_names

    parser, owners = build_parser()
    if "--" in args:
        cut = args.index("--")
        args, passthrough = args[:cut], args[cut + 1 :]
    else:
        passthrough = []
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(args)
    except SystemExit as exc:
        if exc.code == 0:  # --help
            return None
        return (err.getvalue().strip().splitlines() or [f"exit {exc.code}"])[-1]
    if passthrough and not getattr(owners[ns.command], "TAKES_PASSTHROUGH", False):
        return f"edct {ns.command} takes no arguments after --"
    tasks = getattr(ns, "tasks", None)
    if ns.command == "run" and tasks:
        unknown = set(tasks.split(",")) - our_tasks()
        if unknown:
            return f"not an EDCT task: {', '.join(sorted(unknown))}"
    config = str(getattr(ns, "config", None) or "")
    preset_like = config and "/" not in config and not config.endswith((".yaml", ".yml"))
    if ns.command in ("run", "estimate") and preset_like and config not in preset_names():
        return f"--config {config}: neither a file path nor a shipped preset ({', '.join(preset_names())})"
    return None


def check_lmms_eval(args: list[str], known_tasks: set[str]) -> str | None:
    """None when ``lmms-eval ARGS`` parses with lmms-eval's own parser and names known things."""
    import lmms_eval.__main__ as lmms_main
    from lmms_eval.models import AVAILABLE_CHAT_TEMPLATE_MODELS, AVAILABLE_SIMPLE_MODELS

    from edct_task.lmms.plugin import MODEL_NAME

    err = io.StringIO()
    saved = sys.argv
    sys.argv = ["lmms-eval", *args]
    try:
        with contextlib.redirect_stderr(err):
            _, ns = lmms_main.parse_eval_args()
    except SystemExit as exc:
        return (err.getvalue().strip().splitlines() or [f"exit {exc.code}"])[-1]
    finally:
        sys.argv = saved
    models = set(AVAILABLE_SIMPLE_MODELS) | set(AVAILABLE_CHAT_TEMPLATE_MODELS) | {MODEL_NAME}
    if ns.model not in models:
        return f"--model {ns.model}: not a model lmms-eval or edct-bench registers"
    if ns.tasks and ns.tasks != "list":
        unknown = set(ns.tasks.split(",")) - known_tasks
        if unknown:
            return f"unknown task(s): {', '.join(sorted(unknown))}"
    return None


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", text, re.MULTILINE))


def check_make(args: list[str]) -> str | None:
    targets = [a for a in args if "=" not in a and not a.startswith("-")]
    missing = [t for t in targets if t not in make_targets()]
    return f"no Makefile target {', '.join(missing)}" if missing else None


@pytest.fixture(scope="module", autouse=True)
def _extension_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """docs/extending.md's example package installed (its domain's flags parse, its backend is
    known), as the guide installs it before its commands."""
    from support.installed import install

    with pytest.MonkeyPatch.context() as monkeypatch:
        install(tmp_path_factory.mktemp("site"), monkeypatch)
        yield


@pytest.fixture(scope="module")
def commands() -> list[DocCommand]:
    return doc_commands()


def test_the_docs_hold_commands_of_every_kind(commands: list[DocCommand]) -> None:
    kinds = {c.program for c in commands}
    assert kinds == {"edct", "lmms-eval", "make"}
    assert len(commands) >= 60, len(commands)
    files = {c.where.split(":")[0] for c in commands}
    assert "README.md" in files and "docs/get-started.md" in files


def test_every_edct_line_parses(commands: list[DocCommand]) -> None:
    bad = [
        f"{c.where}: {c.text}\n    {why}"
        for c in commands
        if c.program == "edct" and (why := check_edct(kind_of(c.words)[1]))
    ]
    print(f"edct lines checked: {sum(c.program == 'edct' for c in commands)}")
    assert bad == [], "\n".join(bad)


def test_every_lmms_eval_line_parses(commands: list[DocCommand]) -> None:
    known = our_tasks() | lmms_eval_tasks()
    lines = [c for c in commands if c.program == "lmms-eval"]
    bad = [
        f"{c.where}: {c.text}\n    {why}"
        for c in lines
        if (why := check_lmms_eval(kind_of(c.words)[1], known))
    ]
    print(f"lmms-eval lines checked: {len(lines)}")
    assert bad == [], "\n".join(bad)


def test_every_make_line_names_a_target(commands: list[DocCommand]) -> None:
    bad = [
        f"{c.where}: {c.text}: {why}"
        for c in commands
        if c.program == "make" and (why := check_make(kind_of(c.words)[1]))
    ]
    assert bad == [], "\n".join(bad)


def test_the_checks_catch_bad_lines() -> None:
    assert "unrecognized arguments: --nonsense" in check_edct(["run", "--config", "x.yaml", "--nonsense"])
    assert "invalid choice" in check_edct(["demo", "--model", "gpt-9"])
    assert check_edct(["build-bench", "--help"]) is None
    assert "not an EDCT task" in check_edct(["run", "--model", "edct_reference", "--tasks", "mme"])
    assert "neither a file path nor a shipped preset" in check_edct(["run", "--config", "no-such-preset"])
    assert check_edct(["run", "--config", "open-models-one-gpu-80gb"]) is None
    assert "no Makefile target" in check_make(["deploy"])
    assert check_make(["test", "PYTEST_ARGS=-m 'not slow'"]) is None
    assert split_commands("EDCT_X=1 edct demo && make test # a comment") == [
        ["EDCT_X=1", "edct", "demo"],
        ["make", "test"],
    ]
    assert kind_of(["accelerate", "launch", "--num_processes", "2", "-m", "lmms_eval", "--tasks", "x"]) == (
        "lmms-eval",
        ["--tasks", "x"],
    )


def test_the_lmms_eval_check_catches_bad_lines() -> None:
    known = our_tasks() | {"mmmu_val"}
    assert "unrecognized arguments" in check_lmms_eval(["--model", "edct_reference", "--bogus"], known)
    assert "unknown task" in check_lmms_eval(["--model", "edct_reference", "--tasks", "edct_nope"], known)
    assert "not a model" in check_lmms_eval(
        ["--model", "no_such_model", "--tasks", "edct_calibration"], known
    )
    assert check_lmms_eval(["--model", "qwen3_vl", "--tasks", "edct_bench,mmmu_val"], known) is None


# -- end to end: the quick start and a chosen set, made small --------------------------------------

RUNS = [
    # (the line exactly as the docs write it, what makes it small, what it must write)
    (
        "edct run --config docs/examples/calibration.yaml",
        ["--set", "data.n=4", "--no-progress"],
        "runs/calibration-faithful/results.json",
    ),
    (
        "edct run --config docs/examples/calibration.yaml --set roles.target.behavior=prior"
        " --output runs/calibration-prior",
        ["--set", "data.n=4", "--no-progress"],
        "runs/calibration-prior/results.json",
    ),
    ("edct audit runs/calibration-faithful", [], "runs/calibration-faithful/audit/index.html"),
    (
        "edct submit runs/calibration-faithful --output faithful.edct.zip --every-eval-ever eee-records",
        [],
        "eee-records/data/edct-bench/calibration-reference/faithful",
    ),
    ("edct report runs/calibration-faithful runs/calibration-prior --output report/", [], "report/report.md"),
    (
        "edct run --model edct_reference --model_args behavior=faithful --tasks edct_calibration"
        " --limit 8 --output runs/fast",
        ["--limit", "3", "--no-progress"],
        "runs/fast/lmms",
    ),
    (
        "lmms-eval --model edct_reference --model_args behavior=faithful --tasks edct_calibration"
        " --limit 8 --output_path results/ --log_samples",
        ["--limit", "3"],
        "results",
    ),
]
"""Lines run end to end; each runs after the ones before it, in one folder (a newcomer's session)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    return env


def _argv(words: list[str], extra: list[str]) -> list[str]:
    program, args = kind_of(words)
    args = [str(ROOT / a) if a.startswith("docs/examples/") else a for a in args]
    module = {"edct": "edct_task.cli.main", "lmms-eval": "lmms_eval"}[program]
    return [sys.executable, "-m", module, *args, *extra]


@pytest.mark.slow
def test_the_chosen_lines_run_end_to_end(commands: list[DocCommand], tmp_path: Path) -> None:
    texts = {c.text for c in commands}
    for line, extra, output in RUNS:
        assert line in texts, f"not in the docs any more: {line}"
        done = subprocess.run(
            _argv(shlex.split(line), extra),
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=hang_limit(600),
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert (tmp_path / output).exists(), f"{line}: no {output}"
    faithful = json.loads((tmp_path / "runs/calibration-faithful/results.json").read_text())
    prior = json.loads((tmp_path / "runs/calibration-prior/results.json").read_text())
    assert faithful["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] == 1.0
    assert prior["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] == 0.0
    assert faithful["results"]["overall"]["counts"]["scored"] == 4
    for folder in ("runs/fast/lmms", "results"):  # edct run --model and lmms-eval: lmms-eval's format
        (written,) = (tmp_path / folder).rglob("*_results.json")
        results = json.loads(written.read_text())["results"]["edct_calibration"]
        assert results["ccs_binary,none"] == 1.0 and results["n_scored,none"] == 3
    assert "Table 1" in (tmp_path / "report/report.md").read_text()


def _dry_run(target: str) -> str:
    """What ``make TARGET`` would run, printed only (``-n``), with this environment as ``.venv``."""
    venv = Path(sys.executable).parent.parent
    argv = ["make", "-n", "-o", f"{venv}/.installed", target, f"VENV={venv}"]
    return subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, check=True, timeout=hang_limit(60)
    ).stdout


@pytest.mark.slow
def test_the_quick_start_demo_runs(commands: list[DocCommand], tmp_path: Path) -> None:
    """``make demo`` is ``edct demo`` once the environment exists; its recipe runs here, small."""
    texts = {c.text for c in commands}
    assert "make demo" in texts and "make test" in texts
    recipe = _dry_run("demo")
    demo_line = next(line for line in recipe.splitlines() if line.rstrip().endswith("edct demo"))
    assert "HF_HUB_OFFLINE=1" in demo_line
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edct_task.cli.main",
            "demo",
            "-n",
            "4",
            "--behavior",
            "faithful",
            "--behavior",
            "prior",
            "--no-progress",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=hang_limit(600),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^faithful +1\.000", done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^prior +0\.000", done.stdout, re.MULTILINE), done.stdout
    assert (tmp_path / "runs/demo/report/report.md").exists()
    assert "-m pytest" in _dry_run("test")
