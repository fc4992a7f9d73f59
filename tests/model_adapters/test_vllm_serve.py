"""``start_server`` against a fake ``vllm`` executable on PATH that serves /health."""

from __future__ import annotations

import socket
import sys
import textwrap

import pytest

from model_adapters.vllm_serve import ServeError, recipe, serve, start_server

FAKE = textwrap.dedent("""\
    #!{python}
    import json, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    args = sys.argv[1:]
    print("fake vllm", " ".join(args), flush=True)
    model = args[1]
    if "--crash" in args:
        print("CUDA error: no kernel image is available", flush=True)
        sys.exit(3)
    port = int(args[args.index("--port") + 1])
    status = 503 if "--never-healthy" in args else 200
    time.sleep(0.2)  # start-up takes a moment

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = json.dumps({{"data": [{{"id": model}}]}}).encode() if self.path == "/v1/models" else b""
            self.send_response(status if self.path == "/health" else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


@pytest.fixture()
def fake_vllm(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}:{__import__('os').environ['PATH']}")
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_starts_waits_for_health_and_prints_config(fake_vllm, tmp_path) -> None:
    port = _free_port()
    server = start_server(
        "target",
        "Qwen/Qwen3-VL-8B-Instruct",
        port=port,
        poll_s=0.05,
        log_path=tmp_path / "vllm.log",
        extra_args=["--gpu-memory-utilization", "0.9"],
    )
    try:
        assert server.process.poll() is None
        assert server.config_lines() == [
            "  target:",
            "    backend: openai-chat",
            "    model: Qwen/Qwen3-VL-8B-Instruct",
            f"    base_url: http://127.0.0.1:{port}/v1",
        ]
        cmd = server.command
        assert cmd[1:3] == ["serve", "Qwen/Qwen3-VL-8B-Instruct"] and cmd[-2:] == [
            "--gpu-memory-utilization",
            "0.9",
        ]
        assert "--limit-mm-per-prompt" in cmd and "--max-model-len" in cmd
    finally:
        server.stop(timeout_s=5)
    assert server.process.poll() is not None
    assert "fake vllm serve Qwen/Qwen3-VL-8B-Instruct" in (tmp_path / "vllm.log").read_text()


def test_a_crashing_server_fails_with_its_log(fake_vllm, tmp_path) -> None:
    with pytest.raises(ServeError, match=r"(?s)exited with status 3.*no kernel image"):
        start_server(
            "judge",
            "Qwen/Qwen3-235B-A22B",
            port=_free_port(),
            extra_args=["--crash"],
            poll_s=0.05,
            log_path=tmp_path / "crash.log",
        )


def test_a_server_that_never_gets_healthy_is_stopped(fake_vllm, tmp_path) -> None:
    clock = iter(range(0, 10_000, 10))
    with pytest.raises(ServeError, match="not healthy after 30 s"):
        start_server(
            "judge",
            "m",
            port=_free_port(),
            extra_args=["--never-healthy"],
            wait_s=30,
            poll_s=0.05,
            clock=lambda: float(next(clock)),
            log_path=tmp_path / "x.log",
        )


def test_serve_prints_the_lines_and_returns_when_the_server_ends(fake_vllm, tmp_path) -> None:
    import os
    import re
    import signal

    printed: list[str] = []

    def out(line: str) -> None:
        printed.append(line)
        if line.startswith("    base_url"):  # the user has what they need; now the server goes away
            pid = int(re.search(r"pid (\d+)", printed[0]).group(1))
            os.kill(pid, signal.SIGTERM)

    code = serve(
        "extractor",
        "Qwen/Qwen3-235B-A22B",
        out=out,
        port=_free_port(),
        poll_s=0.05,
        log_path=tmp_path / "s.log",
    )
    assert code != 0 and any("backend: openai-chat" in line for line in printed)
    assert printed[0].startswith("# vLLM is serving Qwen/Qwen3-235B-A22B")


def test_recipes() -> None:
    assert "--reasoning-parser" in recipe("judge", "Qwen/Qwen3-235B-A22B-Thinking-2507")
    assert "--mm-processor-kwargs" in recipe("target", "Qwen/Qwen3-VL-30B-A3B-Instruct")
    with pytest.raises(ValueError, match="role must be"):
        start_server("editor", "m")


def test_missing_executable_says_how_to_install(monkeypatch) -> None:
    with pytest.raises(ServeError, match="pip install vllm"):
        start_server("target", "m", executable="vllm-not-installed-here")
