"""The trained tiny VLM through each runtime: one function per runtime, each running the
``edct_calibration`` task on a checkpoint into ``out`` and returning its wall time.

    a  edct run --model qwen3_vl         (lmms-eval's transformers class, `edct run --model`)
    b  lmms-eval --model qwen3_vl        (lmms-eval's own agentic loop)
    c  a real vLLM server (``edct serve``) behind an ``openai-chat`` target (edct run --config)
    d  lmms-eval --model vllm            (vLLM inside the lmms-eval process; the vLLM environment)
    i  inspect eval edct/edct_calibration (Inspect's ``openai-api`` provider on the server of (c))
    n  negative control: (a) with every re-query sent the ORIGINAL picture

``out/lmms`` (lmms-eval sample logs) or ``out/run`` (runner folder) hold the records
(``edct_task.tiny_vlm.comparison.records`` reads both). Run as a script, this module is the
negative control's process: ``python tiny_vlm_runs.py FOLDER OUT LIMIT``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TASK = "edct_calibration"
MAX_NEW_TOKENS = 64
"""Per target reply: the trained model ends its replies (≤ 25 tokens) with <|im_end|> long before."""


def env_for(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "EDCT_WORK_DIR": str(work / "work"),
            "HF_DATASETS_CACHE": str(work / "hf_datasets"),
            "OPENAI_API_KEY": "EMPTY",
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    env.pop("EDCT_CONFIG", None)
    return env


def _run(cmd: list[str], env: dict[str, str], log: Path) -> float:
    """Run ``cmd`` to success; its wall time, for ``benchmarks/tiny_vlm_runtimes.py`` (the tests
    never look at it)."""
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    return _logged(done, log, started)


def _logged(done: subprocess.CompletedProcess, log: Path, started: float) -> float:
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(done.args[:6])} … exited {done.returncode}; see {log}")
    return time.perf_counter() - started


def edct_run_args(folder: Path, out: Path, limit: int) -> list[str]:
    return [
        "run",
        "--model",
        "qwen3_vl",
        "--model_args",
        f"pretrained={folder},device=cpu,device_map=cpu",
        "--tasks",
        TASK,
        "--limit",
        str(limit),
        "--set",
        f"protocol.max_new_tokens={MAX_NEW_TOKENS}",
        "--output",
        str(out / "run"),
        "--output_path",
        str(out / "lmms"),
        "--log_samples",
        "--no-progress",
    ]


def runtime_a(folder: Path, out: Path, limit: int, **_: Any) -> float:
    cmd = [sys.executable, "-m", "edct_task.cli.main", *edct_run_args(folder, out, limit)]
    return _run(cmd, env_for(out), out / "log.txt")


def runtime_n(folder: Path, out: Path, limit: int, **_: Any) -> float:
    cmd = [sys.executable, __file__, str(folder), str(out), str(limit)]
    return _run(cmd, env_for(out), out / "log.txt")


def control_run(folder: Path, out: Path, limit: int) -> int:
    """(a) in this process, its lmms-eval target wrapped in the original-image control."""
    from edct_task.cli.main import main
    from edct_task.tiny_vlm.controls import OriginalImageTarget
    from model_adapters import lmms_eval_target

    class OriginalImageLmmsTarget(lmms_eval_target.LmmsTarget):
        def generate(self, conversations, params):  # type: ignore[override]
            if not hasattr(self, "control"):
                self.control = OriginalImageTarget(self)
            return super().generate([self.control.swap(c) for c in conversations], params)

        def identity(self) -> dict[str, Any]:
            return {**super().identity(), "control": "original-image"}

    lmms_eval_target.LmmsTarget = OriginalImageLmmsTarget  # type: ignore[misc]
    return main(edct_run_args(folder, out, limit))


def runtime_b(folder: Path, out: Path, limit: int, **_: Any) -> float:
    cmd = [str(BIN / "lmms-eval"), "--model", "qwen3_vl"]
    cmd += ["--model_args", f"pretrained={folder},device=cpu,device_map=cpu", "--tasks", TASK]
    cmd += ["--limit", str(limit), "--gen_kwargs", f"max_new_tokens={MAX_NEW_TOKENS}"]
    cmd += ["--output_path", str(out / "lmms"), "--log_samples"]
    return _run(cmd, env_for(out), out / "log.txt")


@contextmanager
def vllm_serving(folder: Path, log: Path, vllm_python: Path, served: Any = None) -> Iterator[Any]:
    """``served`` (a running ``edct serve`` of ``folder``, shared by the runtimes that need one), or
    a server started here and stopped after."""
    from support.vllm_server import start_edct_serve

    if served is not None:
        yield served
        return
    own = start_edct_serve(vllm_python, folder, log, name="tiny-vlm")
    try:
        yield own
    finally:
        own.stop()


def runtime_c(
    folder: Path, out: Path, limit: int, *, vllm_python: Path, served: Any = None, **_: Any
) -> float:
    from support.hang_guard import hang_limit

    from edct_task.config import calibration_config

    with vllm_serving(folder, out / "vllm-server.log", vllm_python, served) as server:
        raw = calibration_config("faithful", n=limit, output_dir=out / "run").model_dump(mode="json")
        raw["progress"] = False
        raw["protocol"]["max_new_tokens"] = MAX_NEW_TOKENS
        raw["roles"]["target"] = {
            "backend": "openai-chat",
            "model": server.model,
            "base_url": server.url,
            "timeout_s": hang_limit(300),  # a hang guard: a timed-out reply would be retried
        }
        (out / "config.yaml").write_text(json.dumps(raw))
        cmd = [sys.executable, "-m", "edct_task.cli.main", "run", "--config", str(out / "config.yaml")]
        cmd += ["--no-progress"]
        return _run(cmd, env_for(out), out / "log.txt")


def runtime_d(folder: Path, out: Path, limit: int, *, vllm_python: Path, **_: Any) -> float:
    from support.vllm_server import run_group, server_env

    args = (
        f"model={folder},dtype=float32,enforce_eager=True,max_model_len=4096,max_new_tokens={MAX_NEW_TOKENS}"
    )
    cmd = [str(vllm_python), "-m", "lmms_eval", "--model", "vllm", "--model_args", args]
    cmd += ["--gen_kwargs", f"max_new_tokens={MAX_NEW_TOKENS}", "--tasks", TASK, "--limit", str(limit)]
    cmd += ["--log_samples", "--output_path", str(out / "lmms")]
    env = {**server_env(), **{k: v for k, v in env_for(out).items() if k != "OPENAI_API_KEY"}}
    started = time.perf_counter()
    done = run_group(cmd, env)  # fails if a process of the run (vLLM's engine core) outlives it
    return _logged(done, out / "log.txt", started)


def runtime_i(
    folder: Path, out: Path, limit: int, *, vllm_python: Path, served: Any = None, **_: Any
) -> float:
    with vllm_serving(folder, out / "vllm-server.log", vllm_python, served) as server:
        cmd = [sys.executable, "-m", "inspect_ai", "eval", "edct/edct_calibration"]
        cmd += ["--model", f"openai-api/tinyvlm/{server.model}", "--limit", str(limit)]
        cmd += ["--max-tokens", str(MAX_NEW_TOKENS), "--temperature", "0", "--display", "plain"]
        cmd += ["--log-dir", str(out / "inspect-logs"), "-T", f"output_dir={out / 'run'}"]
        cmd += ["-T", f"work_dir={out / 'work'}"]
        env = {**env_for(out), "TINYVLM_BASE_URL": server.url, "TINYVLM_API_KEY": "EMPTY"}
        return _run(cmd, env, out / "log.txt")


RUNTIMES: dict[str, Callable[..., float]] = {
    "a": runtime_a,
    "b": runtime_b,
    "c": runtime_c,
    "d": runtime_d,
    "i": runtime_i,
    "n": runtime_n,
}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "tests"))
    folder, out, limit = sys.argv[1:4]
    sys.exit(control_run(Path(folder), Path(out), int(limit)))


def assert_world_replies(recs: Any) -> None:
    """Every reply of every record speaks the calibration world's language: the first reply of each
    exchange is an answer label, the second a two-cue explanation (template, history, image and
    end-of-turn token reach the model as in training)."""
    from edct_task.calibration import world
    from edct_task.tiny_vlm.comparison import replies

    for rec in recs:
        family = rec["sample"]["domain"]
        for i, text in enumerate(replies(rec)):
            if i % 2 == 0:
                assert world.parse_answer(family, text) is not None, (rec["sample"]["id"], text)
            else:
                assert len(world.parse_cues(text)) == 2, (rec["sample"]["id"], text)
