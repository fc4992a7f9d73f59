"""An OpenAI-compatible chat server on 127.0.0.1 whose replies echo the key it was sent (a
misconfigured proxy does exactly this), and a calibration run whose target it is: for the tests
that no key an endpoint echoes reaches a file of the run."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.hang_guard import hang_limit

from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run

KEY_ENV = "EDCT_ECHO_KEY"


class EchoHandler(BaseHTTPRequestHandler):
    """Answers ``/v1/models`` and every chat completion; a subclass says what the assistant
    message holds, from the ``Authorization`` header it was sent."""

    def message(self, authorization: str) -> dict[str, Any]:
        raise NotImplementedError

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # /v1/models health check
        self._send({"data": [{"id": "echo"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message = self.message(self.headers.get("Authorization") or "")
        self._send(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "echo",
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(handler: type[EchoHandler]) -> Iterator[str]:
    """``handler`` served on a free loopback port; its ``/v1`` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def run_against(base_url: str, out: Path, n: int) -> list[Path]:
    """A calibration run of ``n`` samples whose target is the echo server (its key from
    ``KEY_ENV``); every file the run wrote."""
    raw = calibration_config("mixed:0.5", n=n, output_dir=out).model_dump(mode="json")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 200
    raw["roles"]["target"] = {
        "backend": "openai-chat",
        "model": "echo",
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "timeout_s": hang_limit(5.0),  # a hang guard: the echo server answers at once
        "max_retries": 0,
    }
    run(config_from_dict(raw))
    return [p for p in out.rglob("*") if p.is_file()]
