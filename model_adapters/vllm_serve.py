"""``edct serve ROLE MODEL``: start a local vLLM OpenAI-compatible server, wait until it is healthy and
say which config lines use it.

``start_server`` runs ``vllm serve MODEL --host H --port P --served-model-name MODEL`` plus the
role's recipe (``recipe``: image limits and context length for a target VLM, a reasoning parser for
thinking text LLMs) and any extra arguments, logs to a file, polls ``GET /health`` until it answers
200 (failing early, with the log's tail, if the process exits), and returns a ``VLLMServer`` whose
``config_lines()`` are the YAML to paste under ``roles:``. ``serve`` does all that and keeps the
server in the foreground until interrupted.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("target", "extractor", "judge", "edit_parser")


def recipe(role: str, model: str) -> list[str]:
    """vLLM arguments we recommend for a role and model (documented in the README)."""
    name = model.lower()
    args: list[str] = []
    if role == "target":
        args += ["--max-model-len", "32768", "--limit-mm-per-prompt", '{"image": 1, "video": 0}']
        if "qwen3-vl" in name or "qwen2.5-vl" in name:
            # Qwen-VL: cap the visual tokens per image (pixels = tokens · 28²) so context stays bounded
            args += ["--mm-processor-kwargs", '{"max_pixels": 1605632}']
    else:
        args += ["--max-model-len", "40960"]
        if "qwen3" in name:
            args += ["--reasoning-parser", "qwen3"]
    return args


@dataclass
class VLLMServer:
    role: str
    model: str
    host: str
    port: int
    process: subprocess.Popen
    log_path: Path
    command: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def config_lines(self) -> list[str]:
        """YAML lines for the run config's ``roles:`` section."""
        return [
            f"  {self.role}:",
            "    backend: openai-chat",
            f"    model: {self.model}",
            f"    base_url: {self.base_url}",
        ]

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT if os.name != "nt" else signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ServeError(RuntimeError):
    """The server did not come up; the message carries the end of its log."""


def start_server(
    role: str,
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    extra_args: Sequence[str] = (),
    use_recipe: bool = True,
    executable: str = "vllm",
    wait_s: float = 1800.0,
    poll_s: float = 2.0,
    log_path: Path | None = None,
    env: dict[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> VLLMServer:
    """Start ``vllm serve`` for ``role`` and return once ``/health`` answers 200."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    exe = shutil.which(executable)
    if exe is None:
        raise ServeError(f"{executable!r} is not on PATH: install vLLM (pip install vllm) on the GPU machine")
    command = [exe, "serve", model, "--host", host, "--port", str(port), "--served-model-name", model]
    if use_recipe:
        command += recipe(role, model)
    command += list(extra_args)
    if log_path is None:
        log_path = Path(tempfile.mkstemp(prefix=f"edct-vllm-{role}-", suffix=".log")[1])
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed when it ends
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    log.close()
    server = VLLMServer(role, model, host, port, process, log_path, command)
    deadline = clock() + wait_s
    health = f"http://{host}:{port}/health"
    while True:
        code = process.poll()
        if code is not None:
            raise ServeError(
                f"vllm exited with status {code} before it was healthy; log {log_path}:\n" + _tail(log_path)
            )
        if _healthy(health):
            return server
        if clock() > deadline:
            server.stop()
            raise ServeError(
                f"vllm was not healthy after {wait_s:.0f} s; log {log_path}:\n" + _tail(log_path)
            )
        sleep(poll_s)


def serve(role: str, model: str, *, out: Callable[[str], None] = print, **kwargs: object) -> int:
    """``edct serve``: start, print the config lines, keep serving until Ctrl-C."""
    server = start_server(role, model, **kwargs)  # type: ignore[arg-type]
    out(f"# vLLM is serving {model} at {server.base_url} (pid {server.process.pid}, log: {server.log_path})")
    out(f"# command: {shlex.join(server.command)}")
    out("# put these lines under 'roles:' in your run config:")
    for line in server.config_lines():
        out(line)
    try:
        return server.process.wait()
    except KeyboardInterrupt:
        server.stop()
        return 130


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


if __name__ == "__main__":  # python -m model_adapters.vllm_serve ROLE MODEL [vllm args...]
    sys.exit(serve(sys.argv[1], sys.argv[2], extra_args=sys.argv[3:]))
