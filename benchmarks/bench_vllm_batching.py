"""Does `edct run` with an openai-chat target get vLLM's continuous batching? The same N image
requests against a real vLLM server, sent as the driver sends one round's target requests (all at
once, through the ``openai-chat`` target's concurrent ``generate``) and one at a time.

    .venv/bin/python benchmarks/bench_vllm_batching.py [--requests 32] [--new-tokens 16 64]
    .venv/bin/python benchmarks/bench_vllm_batching.py --base-url http://127.0.0.1:8000/v1 --model NAME

Without ``--base-url`` it builds the tiny random Qwen3-VL (head_dim 64) and starts vLLM from the
vLLM environment (``make vllm-env``; or ``EDCT_VLLM_PYTHON``) with ``start_server``, and stops it at
the end. Prints one line per setting and a JSON summary. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edct_task.calibration import generate_samples  # noqa: E402
from model_adapters.contracts import ChatMessage, Completion, GenerationParams  # noqa: E402
from model_adapters.openai_chat import OpenAIVisionChat, client_from_options  # noqa: E402
from model_adapters.vllm_serve import start_server  # noqa: E402

CPU_ARGS = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "4096"]


@contextlib.contextmanager
def tiny_server(work: Path):
    """Build the tiny Qwen3-VL and serve it; yields (base_url, model name)."""
    model_dir = work / "tiny-qwen3-vl"
    builder = REPO / "tests" / "support" / "tiny_qwen3_vl.py"
    subprocess.run(
        [sys.executable, str(builder), str(model_dir), "--head-dim", "64"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    started = time.perf_counter()
    server = start_server(
        "target",
        str(model_dir),
        port=_free_port(),
        served_name="tiny",
        extra_args=CPU_ARGS,
        log_path=work / "vllm.log",
        poll_s=0.5,
        env={"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")},
    )
    print(f"# vLLM healthy after {time.perf_counter() - started:.1f} s at {server.base_url}", flush=True)
    try:
        yield server.base_url, "tiny"
    finally:
        server.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conversations(n: int) -> list[list[ChatMessage]]:
    """First-turn target requests of n calibration samples (question + its image)."""
    return [[ChatMessage("user", s.question, (s.image,))] for s in generate_samples(n=n, seed=0)]


def measure(url: str, model: str, n: int, new_tokens: int) -> dict[str, float]:
    convs = conversations(n)
    params = GenerationParams(max_new_tokens=new_tokens, seed=0)
    batched = OpenAIVisionChat(client_from_options({"model": model, "base_url": url, "concurrency": n}))
    single = OpenAIVisionChat(client_from_options({"model": model, "base_url": url, "concurrency": 1}))
    try:
        batched.generate(convs[:2], params)  # warm-up: connections, image processor caches
        start = time.perf_counter()
        together = batched.generate(convs, params)
        t_batched = time.perf_counter() - start
        start = time.perf_counter()
        alone = [single.generate([c], params)[0] for c in convs]
        t_single = time.perf_counter() - start
    finally:
        batched.close()
        single.close()
    bad = [o for o in [*together, *alone] if not isinstance(o, Completion)]
    if bad:
        raise SystemExit(f"requests failed: {bad[:3]}")
    same = sum(a.text == b.text for a, b in zip(together, alone, strict=True))
    return {
        "requests": n,
        "new_tokens": new_tokens,
        "batched_s": round(t_batched, 3),
        "one_at_a_time_s": round(t_single, 3),
        "ratio": round(t_single / t_batched, 2),
        "identical_replies": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--base-url", help="an already running vLLM server (…/v1)")
    parser.add_argument("--model", default="tiny", help="the served model name (with --base-url)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.base_url:
            url, model = args.base_url, args.model
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="edct-bench-vllm-")))
            url, model = stack.enter_context(tiny_server(work))
        rows = []
        print(
            f"{'requests':>8} {'new tok':>7} {'batched s':>9} {'one-by-one s':>12} {'ratio':>6} {'same':>5}"
        )
        for new_tokens in args.new_tokens:
            row = measure(url, model, args.requests, new_tokens)
            rows.append(row)
            print(
                f"{row['requests']:>8} {row['new_tokens']:>7} {row['batched_s']:>9.2f} "
                f"{row['one_at_a_time_s']:>12.2f} {row['ratio']:>6.2f} {row['identical_replies']:>5}"
            )
        print(json.dumps({"bench": "vllm_batching", "rows": rows}))


if __name__ == "__main__":
    main()
