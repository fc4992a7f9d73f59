"""The reply corpus through the parsers: correct / wrong value / wrongly unscored / wrongly scored.

Prints the markdown table for the working tree's ``edct_task/parsing.py`` and, with ``--ref``, for
the ``parsing.py`` of a git commit (the parsers before issue 18: ``--ref 2fb9004``), loaded as a
separate module; the old parsers take no ``finish_reason``, as the old engine never read it.
``--details`` lists every reply that is not correct. A value the parsers read then goes through
the rules of ``edct_task.evidence`` (replies that are not evidence, issue 44), as the engine sends
it; ``--ref`` runs the commit's parsers without them (a commit before issue 44, as its engine
did: ``--ref efc9ddd``). ``--real`` reads the real-LLM corpus
(tests/real_llm/data/real_llm_replies.yaml) instead and prints its table per model and
``structured`` mode (the table of docs/guides/real-models.md).

    python benchmarks/reply_corpus_table.py [--ref 2fb9004] [--details] [--real]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import reply_corpus  # noqa: E402

from edct_task import parsing  # noqa: E402

REAL_CORPUS = ROOT / "tests" / "real_llm" / "data" / "real_llm_replies.yaml"


def parsing_at(ref: str) -> ModuleType:
    """``edct_task/parsing.py`` as it was at ``ref``, imported under another name."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:edct_task/parsing.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="edct-parsing-"))
    path = folder / "parsing_at_ref.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("parsing_at_ref", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def report(
    title: str, module: ModuleType, details: bool, corpus: Path, real: bool, evidence: bool = True
) -> None:
    outcomes = reply_corpus.evaluate(module, reply_corpus.load(corpus), evidence=evidence)
    print(f"### {title}\n")
    print(reply_corpus.style_table(outcomes) if real else reply_corpus.table(outcomes))
    if details:
        for o in outcomes:
            if o.category != "correct":
                print(f"- {o.id} ({o.category}): expected {o.expected!r}, got {o.got!r}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", help="also run the parsers of this git commit (e.g. 2fb9004)")
    parser.add_argument("--details", action="store_true", help="list the replies that are not correct")
    parser.add_argument("--real", action="store_true", help="the real-LLM corpus, per model and mode")
    args = parser.parse_args()
    corpus = REAL_CORPUS if args.real else reply_corpus.CORPUS
    print(f"{len(reply_corpus.load(corpus))} replies from {corpus.relative_to(ROOT)}\n")
    if args.ref:  # the engine at that commit: its parsers, without the evidence rules of issue 44
        report(
            f"parsers at {args.ref}", parsing_at(args.ref), args.details, corpus, args.real, evidence=False
        )
    report("parsers in this tree", parsing, args.details, corpus, args.real)


if __name__ == "__main__":
    main()
