"""CPU time of every reply parser on megabyte-sized adversarial replies, per million characters.

Usage::

    python benchmarks/bench_parsers.py [--size 1000000] [--ref COMMIT | --tree PATH] [--only NAME,...]
                                       [--each SECONDS]

Each adversarial reply (runs of spaces, tabs, brackets, quotes, tags, markdown, labels ...; see
``INPUTS``) goes through each parser (``PARSERS``) in one child process with one core
(``OMP_NUM_THREADS=1``); the child measures CPU time (``time.process_time``), so a busy machine
does not inflate the figures much. Prints a Markdown table: input × parser → CPU milliseconds per
million characters, then the slowest pair. ``--ref`` measures the parsers of a git commit (its
tree exported to a temporary folder), ``--tree`` those of another checkout; the inputs are always
this script's. ``--each 60`` runs each input in its own child, killed after 60 s: the parsers
before issue 43 hang on some (``--ref efc9ddd --each 60``). ``tests/engine/test_parsing_adversarial.py``
runs the same child and bounds every pair.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE = 1_000_000

INPUTS: dict[str, Callable[[int], str]] = {
    # issue 18's inputs: what made the old regexes backtrack
    "spaces after AC": lambda n: "AC" + " " * n + "x",
    "spaces after SCORE": lambda n: "SCORE" + " " * n,
    "table padding": lambda n: "| AC" + " " * n + "| 1 |",
    "padded table rows": lambda n: ("| EF" + " " * 2000 + "|" + " " * 2000 + "\n") * (n // 4000),
    "tabs after a label": lambda n: "EF:" + "\t" * n + "y",
    "spaces around names": lambda n: ("AC" + " " * 1000 + "EF" + " " * 1000) * (n // 2004) + ":",
    "open brackets": lambda n: "[" * n,
    "open bracket and spaces": lambda n: "[" + " " * n,
    "close brackets": lambda n: "]" * n,
    "nested braces": lambda n: "{" * (n // 2) + "}" * (n // 2),
    "empty arrays": lambda n: "[]" * (n // 2),
    "open think tags": lambda n: "<think>" * (n // 7),
    "close think tags": lambda n: "</think>" * (n // 8),
    "unclosed thinking": lambda n: "<think>" + "a" * n,
    "harmony channels": lambda n: "<|channel|>analysis" * (n // 19),
    "decoded harmony": lambda n: "analysis" + "x" * n,
    "bold markers": lambda n: "**" * (n // 2),
    "stars then change": lambda n: "*" * n + "Change: x",
    "scores on one line": lambda n: "AC: 1 " * (n // 6),
    "list items": lambda n: "- item\n" * (n // 7),
    "labels and spaces": lambda n: "Keep:" + " " * n + "Change:",
    "quotes": lambda n: '"' * n,
    "parentheses": lambda n: "(" * n + "AC: 1 EF: 1",
    "numbered spaces": lambda n: "1." + " " * n,
    "score aside": lambda n: "Score (" + " " * n,
    "digits": lambda n: "SCORE: " + "9" * n,
    # issue 43: other repeated punctuation and markup, one line or many
    "single quotes": lambda n: "'" * n,
    "backticks": lambda n: "`" * n,
    "underscores": lambda n: "_" * n,
    "curly quotes": lambda n: "“" * (n // 2) + "”" * (n // 2),
    "quoted words": lambda n: '"a" ' * (n // 4),
    "quote and bracket pairs": lambda n: '["' * (n // 2),
    "open brace and quote": lambda n: '{"' + "x" * n,
    "colons": lambda n: ":" * n,
    "pipes": lambda n: "|" * n,
    "dashes": lambda n: "-" * n,
    "hashes then digits": lambda n: "#" * n + " 1. x",
    "newlines": lambda n: "\n" * n,
    "blank quoted lines": lambda n: '"\n' * (n // 2),
    "stars and spaces": lambda n: "* " * (n // 2),
    "nested bullets": lambda n: "- " * (n // 2) + "x",
    "labels without values": lambda n: "AC: " * (n // 4),
    "change labels": lambda n: "Change: " * (n // 8),
    "keep lines": lambda n: "Keep: x\n" * (n // 8),
    "edit headers": lambda n: "Edit 1\n" * (n // 7),
    "type and target labels": lambda n: "Type: Target: " * (n // 14),
    "words without verbs": lambda n: "word " * (n // 5),
    "reason labels": lambda n: "AC reason: " * (n // 11) + "AC: 1 EF: 0",
    "indented spaces": lambda n: "x\n" + " " * n + "y",
    "carriage returns": lambda n: "\r" * n,
    "accented letters": lambda n: "é" * n,
    "dotted capital I": lambda n: "İ" * n,
    "mismatched brackets": lambda n: "[}" * (n // 2),
    "nested pairs": lambda n: "[[]]" * (n // 4),
    "bracketed words": lambda n: "[" + "[x" * (n // 2),
    "escaped quotes": lambda n: '["' + '\\"' * (n // 2),
    "apostrophes in brackets": lambda n: "[" + "it's " * (n // 5),
    "JSON verdicts": lambda n: '{"AC": 1, "EF": 0}' * (n // 18),
    "single-quoted list": lambda n: "[" + "'a', " * (n // 5) + "]",
    "deeply nested field": lambda n: (
        '[{"keep": "x", "change": ' + "[" * 40 + '"y"' + "]" * 40 + "}]" + " " * n
    ),
    "table rows": lambda n: "| AC | EF |\n|---|---|\n| 1 | 0 |\n" * (n // 32),
    "table rules": lambda n: "| AC | EF |\n" + "|---|---|\n" * (n // 10),
    "pipe lines": lambda n: "|\n" * (n // 2),
    "form feeds and pipes": lambda n: "|\x0c" * (n // 2),
    "concept lines": lambda n: "Concept: x\n" * (n // 11),
    "continuation lines": lambda n: "Keep: x\n" + "y\n" * (n // 2),
    "bold list items": lambda n: "- **x**\n" * (n // 8),
    "quoted list item": lambda n: "- " + '"' * n,
    "harmony finals": lambda n: "<|channel|>final<|message|>" * (n // 27),
}
"""Adversarial replies by name: ``n`` → a reply of about ``n`` characters (at least ``n // 2``)."""

PARSER_NAMES = (
    "concepts",
    "instructions",
    "edit_target",
    "binary",
    "graded",
    "strip_thinking",
    "rule_based_edit_target",
)

CHILD = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[3])
    from bench_parsers import INPUTS
    from edct_task import parsing
    from verification.edit_parsing import rule_based_edit_target

    PARSERS = {
        "concepts": lambda t: parsing.parse_concepts(t, 2),
        "instructions": lambda t: parsing.parse_instructions(t, 2),
        "edit_target": parsing.parse_edit_target,
        "binary": parsing.parse_binary_judgement,
        "graded": parsing.parse_graded_judgement,
        "strip_thinking": parsing.strip_thinking,
        "rule_based_edit_target": rule_based_edit_target,
    }
    size, names = int(sys.argv[1]), json.loads(sys.argv[2])
    for name in names:
        text = INPUTS[name](size)
        for parser_name, parse in PARSERS.items():
            print(json.dumps({"start": [name, parser_name]}), flush=True)
            error = None
            t0 = time.process_time()
            try:
                parse(text)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:200]
            seconds = time.process_time() - t0
            row = {"input": name, "parser": parser_name, "seconds": seconds, "chars": len(text)}
            row["error"] = error
            print(json.dumps(row), flush=True)
    """
)


def measure(
    size: int = SIZE, tree: Path = ROOT, names: list[str] | None = None, timeout: float = 600
) -> tuple[list[dict], list[str] | None, str]:
    """Run the child: its rows, the (input, parser) it was still reading when it was killed (None
    when it finished) and the end of its stderr."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(tree)}
    names = list(INPUTS) if names is None else names
    command = [sys.executable, "-c", CHILD, str(size), json.dumps(names), str(ROOT / "benchmarks")]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, cwd=tree, check=False
        )
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = "timed out"
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    rows = [line for line in lines if "seconds" in line]
    hung = lines[-1]["start"] if lines and "start" in lines[-1] else None
    return rows, hung, err[-2000:]


def ms_per_mb(row: dict) -> float:
    """CPU milliseconds per million characters of the reply."""
    return row["seconds"] * 1000 / (row["chars"] / 1e6)


def table(rows: list[dict], killed: dict[tuple[str, str], float] | None = None) -> str:
    """Markdown: one row per input, one column per parser, CPU ms per million characters;
    ``killed``: the pairs whose child was killed after so many seconds (``> 60 s``)."""
    cells = {(r["input"], r["parser"]): f"{ms_per_mb(r):,.0f}" for r in rows}
    cells.update({pair: f"> {seconds:.0f} s" for pair, seconds in (killed or {}).items()})
    inputs = list(dict.fromkeys([r["input"] for r in rows] + [name for name, _ in killed or {}]))
    lines = ["| input | " + " | ".join(PARSER_NAMES) + " |", "|---|" + "---:|" * len(PARSER_NAMES)]
    for name in sorted(inputs, key=list(INPUTS).index):
        lines.append(f"| {name} | " + " | ".join(cells.get((name, p), "") for p in PARSER_NAMES) + " |")
    return "\n".join(lines)


def _export(ref: str, into: Path) -> Path:
    """The tree of git commit ``ref``, written under ``into``."""
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE, help="characters per reply")
    parser.add_argument("--ref", help="measure the parsers of this git commit")
    parser.add_argument("--tree", type=Path, default=ROOT, help="source tree the child imports")
    parser.add_argument("--only", help="comma-separated input names (default: all)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before the child is killed")
    parser.add_argument(
        "--each",
        type=float,
        metavar="SECONDS",
        help="one child per input, killed after SECONDS (for parsers that may hang: --ref of an old commit)",
    )
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(INPUTS)
    killed: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = _export(args.ref, Path(tmp)) if args.ref else args.tree.resolve()
        if args.each is None:
            rows, hung, err = measure(args.size, tree, names, args.timeout)
        else:
            rows, hung, err = [], None, ""
            for name in names:
                got, stuck, err = measure(args.size, tree, [name], args.each)
                rows += got
                if stuck is not None:
                    killed[tuple(stuck)] = args.each  # the input's later parsers are not reached
    print(table(rows, killed))
    if rows:
        worst = max(rows, key=ms_per_mb)
        print(f"\nslowest: {worst['input']} × {worst['parser']}: {ms_per_mb(worst):,.0f} CPU ms per MB")
        print(f"all {len(rows)} pairs: {sum(r['seconds'] for r in rows):.1f} CPU s")
    for row in rows:
        if row["error"]:
            print(f"raised: {row['input']} × {row['parser']}: {row['error']}")
    for name, parser_name in killed:
        print(f"killed after {args.each:.0f} s: {name} × {parser_name} (its later parsers not run)")
    if hung is not None:
        print(f"killed while reading {hung} ({err[-300:]})")
    elif not rows:
        print(f"the child failed:\n{err}")


if __name__ == "__main__":
    main()
