"""``start_server`` / ``serve`` against a fake ``vllm`` package (its OpenAI server module serves
/health), so these run without vLLM; tests/vllm/ runs the same code against the real server."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from support.hang_guard import finish, hang_limit, wait_for

from model_adapters.vllm_serve import (
    PYTHON_ENV,
    VLLM_MODULE,
    ServeError,
    VLLMNotFound,
    find_python,
    merge_args,
    recipe,
    serve,
    start_server,
)

FAKE_SERVER = textwrap.dedent("""\
    import json, os, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    args = sys.argv[1:]
    print("fake vllm", " ".join(args), flush=True)
    model = args[args.index("--served-model-name") + 1]
    if "--crash" in args:
        print("CUDA error: no kernel image is available", flush=True)
        sys.exit(3)
    port = int(args[args.index("--port") + 1])
    status = 503 if "--never-healthy" in args else 200
    # an "engine core" child that ignores SIGTERM, as a stuck worker would
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print("engine pid", child.pid, flush=True)
    time.sleep(0.2)  # start-up takes a moment

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = json.dumps({"data": [{"id": model}]}).encode() if self.path == "/v1/models" else b""
            self.send_response(status if self.path == "/health" else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


pytestmark = pytest.mark.slow  # server processes started and stopped: make test, not make test-fast


@pytest.fixture()
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``vllm`` package whose ``entrypoints.openai.api_server`` is the fake server above."""
    root = tmp_path / "site"
    module = root / Path(*VLLM_MODULE.split("."))
    module.parent.mkdir(parents=True)
    for pkg in (root / "vllm", root / "vllm" / "entrypoints", module.parent):
        (pkg / "__init__.py").write_text("")
    module.with_suffix(".py").write_text(FAKE_SERVER)
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.setenv(PYTHON_ENV, sys.executable)
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _engine_pid(log: Path) -> int:
    def found() -> re.Match | None:
        return re.search(r"engine pid (\d+)", log.read_text()) if log.exists() else None

    assert wait_for(found, 5, every=0.05), f"no engine pid in {log}"
    return int(found().group(1))


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_server_starts_as_a_module_waits_for_health_and_stops_its_whole_group(fake_vllm, tmp_path) -> None:
    port = _free_port()
    log = tmp_path / "vllm.log"
    server = start_server(
        "target",
        "Qwen/Qwen3-VL-8B-Instruct",
        port=port,
        poll_s=0.05,
        log_path=log,
        extra_args=["--gpu-memory-utilization", "0.9", "--max-model-len", "4096"],
    )
    engine = _engine_pid(log)
    try:
        assert server.process.poll() is None
        assert server.config_lines() == [
            "  target:",
            "    backend: openai-chat",
            "    model: Qwen/Qwen3-VL-8B-Instruct",
            f"    base_url: http://127.0.0.1:{port}/v1",
        ]
        cmd = server.command
        assert cmd[:5] == [sys.executable, "-m", VLLM_MODULE, "--model", "Qwen/Qwen3-VL-8B-Instruct"]
        assert cmd[-4:] == ["--gpu-memory-utilization", "0.9", "--max-model-len", "4096"]
        assert cmd.count("--max-model-len") == 1  # the user's value replaced the recipe's 32768
        assert "--limit-mm-per-prompt" in cmd and "--mm-processor-kwargs" in cmd
    finally:
        server.stop(timeout_s=5)
    assert server.process.poll() is not None
    assert wait_for(lambda: _gone(engine), 5)  # the child that ignored SIGTERM was killed with the group
    assert "fake vllm --model Qwen/Qwen3-VL-8B-Instruct" in log.read_text()


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
    log = tmp_path / "x.log"

    def clock() -> float:  # time passes once the fake has started its engine child
        return 1000.0 if log.exists() and "engine pid" in log.read_text() else 0.0

    with pytest.raises(ServeError, match="not healthy after 30 s"):
        start_server(
            "judge",
            "m",
            port=_free_port(),
            extra_args=["--never-healthy"],
            wait_s=30,
            poll_s=0.05,
            clock=clock,
            log_path=log,
        )
    engine = _engine_pid(log)
    assert wait_for(lambda: _gone(engine), 5)


def test_edct_serve_prints_the_roles_block_and_sigterm_leaves_no_process(fake_vllm, tmp_path) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "edct_task.cli.main", "serve", "extractor", "tiny", "--port", str(port)]
    cmd += ["--log", str(log), "--served-model-name", "tiny-llm", "--", "--max-model-len", "512"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        while not lines or not lines[-1].startswith("    base_url"):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line.rstrip("\n"))
    except BaseException:
        proc.send_signal(signal.SIGTERM)  # edct serve stops its server group
        finish(proc, 60)
        raise
    engine = _engine_pid(log)
    server_pid = int(re.search(r"pid (\d+)", lines[0]).group(1))
    assert lines[-4:] == [
        "  extractor:",
        "    backend: openai-chat",
        "    model: tiny-llm",
        f"    base_url: http://127.0.0.1:{port}/v1",
    ]
    proc.send_signal(signal.SIGTERM)
    out, err = finish(proc, 60)
    assert proc.returncode == 0, err
    assert "stopped vLLM (SIGTERM)" in out
    assert wait_for(lambda: _gone(server_pid) and _gone(engine), 5)


def test_serve_returns_the_servers_status_when_it_ends_by_itself(fake_vllm, tmp_path) -> None:
    printed: list[str] = []

    def out(line: str) -> None:
        printed.append(line)
        if line.startswith("    base_url"):  # the user has what they need; now the server goes away
            os.kill(int(re.search(r"pid (\d+)", printed[0]).group(1)), signal.SIGKILL)

    code = serve(
        "extractor",
        "Qwen/Qwen3-235B-A22B",
        out=out,
        port=_free_port(),
        poll_s=0.05,
        log_path=tmp_path / "s.log",
    )
    assert code == -signal.SIGKILL and any("backend: openai-chat" in line for line in printed)
    assert printed[0].startswith("# vLLM is serving Qwen/Qwen3-235B-A22B")
    engine = _engine_pid(tmp_path / "s.log")
    assert wait_for(lambda: _gone(engine), 5)


def test_recipes_and_overrides() -> None:
    assert recipe("judge", "Qwen/Qwen3-235B-A22B-Thinking-2507") == [
        "--max-model-len",
        "40960",
        "--reasoning-parser",
        "qwen3",
    ]
    assert "--mm-processor-kwargs" in recipe("target", "Qwen/Qwen3-VL-30B-A3B-Instruct")
    assert merge_args(["--max-model-len", "32768", "--a", "1"], ["--max-model-len=4096", "--b"]) == [
        "--a",
        "1",
        "--max-model-len=4096",
        "--b",
    ]
    with pytest.raises(ValueError, match="role must be"):
        start_server("editor", "m")


def test_finding_vllm(monkeypatch, tmp_path, fake_vllm) -> None:
    assert find_python() == sys.executable  # from EDCT_VLLM_PYTHON
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "nope" / "python"))
    with pytest.raises(VLLMNotFound, match="does not exist"):
        find_python()
    monkeypatch.delenv("PYTHONPATH")
    with pytest.raises(VLLMNotFound, match="cannot import vllm"):
        find_python(sys.executable)


def test_edct_serve_without_vllm_exits_2_with_one_message(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in (PYTHON_ENV, "PYTHONPATH")}
    env[PYTHON_ENV] = str(tmp_path / "missing-python")
    done = subprocess.run(
        [sys.executable, "-m", "edct_task.cli.main", "serve", "target", "m"],
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_limit(120),
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "EDCT_VLLM_PYTHON" in done.stderr
    assert "Traceback" not in done.stderr
