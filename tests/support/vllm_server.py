"""The real vLLM server for tests/vllm/ and the benchmarks: found, started through ``edct serve``,
stopped with every process it had (``Served.stop``), and helpers for runs against it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from support.hang_guard import finish, hang_limit, wait_for
from support.processes import alive

REPO = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
"""Under CI the vLLM tests fail instead of skipping when the vLLM environment is missing."""
BUILD_TINY = REPO / "tests" / "support" / "tiny_qwen3_vl.py"
SERVED_NAME = "tiny-qwen3-vl"
START_TIMEOUT_S = 600
"""A hang guard's nominal seconds (``hang_limit``) for ``edct serve`` to print its roles block."""
CPU_ARGS = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "4096"]
"""What the CPU build needs beyond the target recipe (the tiny model's context is 4096)."""


def vllm_python() -> Path | None:
    explicit = os.environ.get("EDCT_VLLM_PYTHON")
    if explicit:
        return Path(explicit)
    candidate = REPO / ".venv-vllm" / "bin" / "python"
    return candidate if candidate.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    """The environment vLLM gets: offline, 1 GiB of KV cache, its own thread settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update({"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra)
    return env


@dataclass
class Served:
    """A running ``edct serve`` and what it printed."""

    url: str
    model: str
    server_pid: int
    log: Path
    serve: subprocess.Popen
    lines: list[str]
    seconds_to_healthy: float
    processes: set[int] = field(default_factory=set)

    def snapshot(self) -> set[int]:
        """The server and every process below it (engine core, workers), recorded for teardown."""
        try:
            root = psutil.Process(self.server_pid)
            self.processes |= {self.server_pid, *(c.pid for c in root.children(recursive=True))}
        except psutil.NoSuchProcess:
            pass
        return self.processes

    def stop(self) -> list[int]:
        """SIGTERM to ``edct serve``; the pids of the server's processes still alive after it (given
        a hang guard's while to finish dying: a busy machine tears down a big process slowly)."""
        self.snapshot()
        if self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):  # killed, then reported by returncode
                finish(self.serve, 120)
        wait_for(lambda: not any(alive(pid) for pid in self.processes), 5, every=0.2)
        left = [pid for pid in sorted(self.processes) if alive(pid)]
        if left:  # leave nothing behind for the next test run, then report
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.server_pid, signal.SIGKILL)
        return left


def start_edct_serve(
    python: Path, model_dir: Path, log: Path, *, role: str = "target", name: str = SERVED_NAME
) -> Served:
    """``edct serve ROLE MODEL`` in a subprocess; returns once it printed the roles block."""
    port = free_port()
    cmd = [sys.executable, "-m", "edct_task.cli.main", "serve", role, str(model_dir), "--port", str(port)]
    cmd += ["--python", str(python), "--served-model-name", name, "--log", str(log), "--", *CPU_ARGS]
    started = time.monotonic()
    serve = subprocess.Popen(
        cmd, cwd=REPO, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in serve.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    printed: list[str] = []
    deadline = started + hang_limit(START_TIMEOUT_S)
    while not (printed and printed[-1].startswith("    base_url:")):
        try:
            line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            serve.send_signal(signal.SIGTERM)
            _, err = finish(serve, 120)
            log_tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            raise RuntimeError(f"edct serve did not come up: {err[-2000:]}\n{log_tail}")
        printed.append(line)
    healthy_after = time.monotonic() - started
    server_pid = int(re.search(r"\(pid (\d+),", printed[0]).group(1))
    served = Served(
        url=f"http://127.0.0.1:{port}/v1",
        model=name,
        server_pid=server_pid,
        log=log,
        serve=serve,
        lines=printed,
        seconds_to_healthy=healthy_after,
    )
    served.snapshot()
    print(f"\nvLLM server (pid {server_pid}) healthy at {served.url} after {healthy_after:.1f} s", flush=True)
    return served


def run_group(
    cmd: list[str], env: dict[str, str], timeout: float = 900, grace_s: float = 20.0
) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a process group of its own; fail if any process of that group is still alive
    ``grace_s`` after it exited (vLLM's engine processes shut down just after their parent).
    Both are a hang guard's nominal seconds (``hang_limit``): a process that does go, however
    slowly a busy machine lets it, passes."""
    grace_s = hang_limit(grace_s)
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = finish(proc, timeout)
    finally:
        deadline = time.monotonic() + grace_s
        while (group := _group(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [_describe(pid) for pid in group]
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"processes of {cmd[:4]} outlived it by {grace_s:.0f} s: {left}"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _group(pgid: int) -> list[int]:
    return [p.pid for p in psutil.process_iter() if _in_group(p.pid, pgid) and alive(p.pid)]


def _describe(pid: int) -> str:
    try:
        return f"{pid} {' '.join(psutil.Process(pid).cmdline())[:120]}"
    except psutil.NoSuchProcess:
        return f"{pid} (gone)"


def _in_group(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except (ProcessLookupError, PermissionError):
        return False


NEW_TOKENS = 16
"""Tokens per reply in the vLLM tests: the tiny model never emits EOS, so every reply is this long."""
LMMS_LIMIT = 3
FAILED_MARK = "LMMS_EVAL_REQUEST_FAILED"  # what lmms-eval's openai model answers after its retries


def finished_requests(server) -> float:
    """vLLM's own count of finished requests (its Prometheus /metrics)."""
    text = httpx.get(server.url.removesuffix("/v1") + "/metrics", timeout=hang_limit(30)).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{")
    )


def lmms_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "OPENAI_API_KEY": "EMPTY",  # vLLM was started without --api-key
            "EDCT_WORK_DIR": str(tmp_path / "work"),
            "HF_DATASETS_CACHE": str(tmp_path / "hf_datasets"),
        }
    )
    env.pop("EDCT_CONFIG", None)
    return env


def sample_record(sample: dict) -> dict:
    """The full sample record a logged sample carries (lmms-eval writes ``filtered_resps`` as the
    string, edct run --model as a one-element list)."""
    resp = sample["filtered_resps"]
    return json.loads(resp[0] if isinstance(resp, list) else resp)


def check_lmms_output(output_path: Path, n: int) -> list[dict]:
    (results_file,) = output_path.rglob("*_results.json")
    results = json.loads(results_file.read_text())
    row = results["results"]["edct_calibration"]
    assert results["n-samples"]["edct_calibration"]["effective"] == n
    counted = row["n_scored,none"] + row["n_excluded,none"] + row["n_unscored,none"] + row["n_error,none"]
    assert counted == n
    (samples_file,) = output_path.rglob("*_samples_edct_calibration.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines() if line.strip()]
    assert len(samples) == n
    for s in samples:
        record = sample_record(s)
        assert FAILED_MARK not in json.dumps(record), "a request to vLLM failed"
        assert record["baseline"]["answer"].strip() and record["baseline"]["explanation"].strip()
        assert record["status"] == "scored" or record["reason"]
    return samples
