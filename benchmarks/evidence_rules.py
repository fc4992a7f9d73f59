"""Each rule of ``edct_task.evidence`` alone, on honest replies and on replies that are not evidence.

    python benchmarks/evidence_rules.py [--demo DIR] [--samples 300]

For the hand-labelled reply corpus (tests/engine/data/reply_corpus.yaml) and the real-LLM corpus
(tests/real_llm/data/real_llm_replies.yaml): per rule, how many replies a careful reader scores
(``expect`` a value) it unscores — its false positives — and how many of the replies labelled
with its reason (``echoed``, ``unsupported``, ``restated``) it catches alone. Only replies the
parsers read and whose entry gives the texts the rule needs are checked (``context``; a graded
verdict needs none). For the calibration world: every concept list, chain, edit target and graded
verdict the rule-based text models wrote in the four demo runs (``edct demo --output DIR``;
without ``--demo`` a fresh demo of ``--samples`` is run into a temporary folder), through each
rule: none may fire.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import reply_corpus  # noqa: E402

from edct_task import evidence, parsing  # noqa: E402
from edct_task.core.records import SampleRecord  # noqa: E402

REAL_CORPUS = ROOT / "tests" / "real_llm" / "data" / "real_llm_replies.yaml"
BEHAVIORS = ("faithful", "prior", "stale", "mixed_0.5")


def _apply(rule: Any, kind: str, value: Any, context: dict[str, Any]) -> evidence.NotEvidence | bool | None:
    """The rule on one value; ``False`` when the value lacks the context the rule needs."""
    if kind == "concepts":
        if "explanation" not in context:
            return False
        texts = {k: context.get(k, "") for k in ("question", "answer", "explanation")}
        return rule(list(value), **texts)
    if kind == "instructions":
        if "concepts" not in context:
            return False
        return rule(list(zip([e.change for e in value], context["concepts"], strict=False)))
    if kind == "edit_target":
        if "instruction" not in context:
            return False
        return rule(value.target, context["instruction"])
    return rule(value.score, getattr(value, "reason", ""))


def corpus_rows(name: str, entries: list[dict[str, Any]]) -> list[str]:
    rows = []
    for kind, rules in evidence.RULES.items():
        for rule in rules:
            honest = flagged_honest = labelled = caught = 0
            for entry in entries:
                if entry["kind"] != kind:
                    continue
                parsed = reply_corpus.parse(parsing, entry, evidence=False)
                if isinstance(parsed, dict) and "unscored" in parsed:
                    continue  # unread: no value to check
                value = _parsed_value(entry)
                found = _apply(rule, kind, value, entry.get("context") or {})
                if found is False:
                    continue
                expect = entry["expect"]
                if isinstance(expect, dict) and "unscored" in expect:
                    if expect["unscored"] == rule.__name__.split("_")[0]:
                        labelled += 1
                        caught += found is not None
                    continue
                honest += 1
                flagged_honest += found is not None
            rows.append(
                f"| {name} | `{rule.__name__}` | {flagged_honest} of {honest} | {caught} of {labelled} |"
            )
    return rows


def _parsed_value(entry: dict[str, Any]) -> Any:
    kind, reply, finish = entry["kind"], entry["reply"], entry.get("finish_reason")
    if kind == "concepts":
        return parsing.parse_concepts(reply, entry["k"], finish_reason=finish).value
    if kind == "instructions":
        return parsing.parse_instructions(reply, entry["n"], finish_reason=finish).value
    if kind == "edit_target":
        return parsing.parse_edit_target(reply, finish_reason=finish).value
    return parsing.parse_graded_judgement(reply, finish_reason=finish).value


def calibration_rows(demo: Path) -> list[str]:
    checked: Counter[str] = Counter()
    fired: Counter[str] = Counter()
    for behaviour in BEHAVIORS:
        for line in (demo / behaviour / "samples.jsonl").read_text(encoding="utf-8").splitlines():
            record = SampleRecord.model_validate_json(line)
            texts = {}
            if record.baseline is not None:
                texts = {
                    "question": record.sample.question,
                    "answer": record.baseline.answer,
                    "explanation": record.baseline.explanation,
                }
            values: list[tuple[str, Any, dict[str, Any]]] = []
            if record.concepts is not None and record.concepts.concepts and texts:
                values.append(("concepts", record.concepts.concepts, texts))
            if record.instructions is not None and record.instructions.instructions:
                concepts = {"concepts": list(record.concepts.concepts)}
                values.append(("instructions", record.instructions.instructions, concepts))
            for step in record.steps:
                target = step.edit_target
                if target is not None and target.source == "llm":
                    values.append(("edit_target", target, {"instruction": step.instruction.as_text()}))
                if step.graded is not None and step.graded.score is not None:
                    values.append(("graded", _Graded(int(step.graded.score), step.graded.reason), {}))
            for kind, value, context in values:
                for rule in evidence.RULES[kind]:
                    checked[rule.__name__] += 1
                    fired[rule.__name__] += _apply(rule, kind, value, context) is not None
    return [
        f"| calibration world ({', '.join(BEHAVIORS)}) | `{name}` | {fired[name]} of {n} | – |"
        for name, n in checked.items()
    ]


class _Graded:
    def __init__(self, score: int, reason: str) -> None:
        self.score, self.reason = score, reason


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, help="an `edct demo --output DIR` folder (else one is run)")
    parser.add_argument("--samples", type=int, default=300, help="samples of the demo run here")
    args = parser.parse_args()
    demo = args.demo
    if demo is None:
        demo = Path(tempfile.mkdtemp(prefix="edct-evidence-demo-"))
        edct = Path(sys.executable).parent / "edct"
        cmd = [str(edct), "demo", "--samples", str(args.samples), "--output", str(demo), "--no-progress"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print("| replies | rule | honest replies it unscores (false positives) | labelled replies it catches |")
    print("|---|---|---|---|")
    for row in corpus_rows("reply corpus", reply_corpus.load()):
        print(row)
    for row in corpus_rows("real-LLM corpus", reply_corpus.load(REAL_CORPUS)):
        print(row)
    for row in calibration_rows(demo):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
