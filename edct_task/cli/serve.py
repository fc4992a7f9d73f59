"""``edct serve ROLE MODEL``: a local vLLM server for a role, and the config lines that use it."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="start a local vLLM server for a role, wait for its health check, print config lines"
    )
    p.add_argument("role", choices=("target", "extractor", "judge", "edit_parser"))
    p.add_argument("model", help="model id or folder, e.g. Qwen/Qwen3-VL-8B-Instruct")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--wait", type=float, default=1800.0, help="seconds to wait for /health (1800)")
    p.add_argument("vllm_args", nargs=argparse.REMAINDER, help="extra `vllm serve` arguments after --")


def run(args: argparse.Namespace) -> int:
    from model_adapters.vllm_serve import ServeError, serve

    extra = [a for a in args.vllm_args if a != "--"]
    try:
        return serve(
            args.role, args.model, host=args.host, port=args.port, wait_s=args.wait, extra_args=extra
        )
    except ServeError as exc:
        print(f"edct: {exc}", file=sys.stderr)
        return 1
