"""A key echoed by an endpoint in a *successful* reply never reaches a file the run writes.

The target is an OpenAI-compatible server on 127.0.0.1 that answers every request with the
``Authorization`` header it was sent (a misconfigured proxy does exactly this). The run's
``samples.jsonl``, stage cache, results and everything else under the output folder must hold
``[redacted]`` where the key was, never the key.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.hang_guard import hang_limit

from edct_task.config import calibration_config, config_from_dict
from edct_task.engine.redact import Redactor
from edct_task.run.runner import run
from model_adapters.contracts import Completion

KEY = "sk-echoed-9c41f0d2b7a35e86"


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # /v1/models health check
        self._send({"data": [{"id": "echo"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        text = f"Answer: yes. Your request said {self.headers.get('Authorization')}."
        self._send(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "echo",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def echo_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_key_echoed_in_a_successful_reply_is_redacted_everywhere(tmp_path, monkeypatch, echo_server):
    monkeypatch.setenv("EDCT_ECHO_KEY", KEY)
    raw = calibration_config("mixed:0.5", n=3, output_dir=tmp_path / "out").model_dump(mode="json")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 200
    raw["roles"]["target"] = {
        "backend": "openai-chat",
        "model": "echo",
        "base_url": echo_server,
        "api_key_env": "EDCT_ECHO_KEY",
        "timeout_s": hang_limit(5.0),  # a hang guard: the echo server answers at once
        "max_retries": 0,
    }
    run(config_from_dict(raw))
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert any(p.name == "samples.jsonl" for p in files)
    samples = (tmp_path / "out" / "samples.jsonl").read_text()
    assert "[redacted]" in samples  # the reply was recorded, the key in it replaced
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_the_redactor_replaces_every_configured_value_and_leaves_short_ones():
    r = Redactor([KEY, "abc", None, ""])
    reply = r.reply(Completion(f"a {KEY} b {KEY}", reasoning=f"({KEY})"))
    assert reply.text == "a [redacted] b [redacted]" and reply.reasoning == "([redacted])"
    assert r.text("abc stays") == "abc stays"  # too short to be a key; not redacted
