"""Several vLLM servers behind one role: ``base_urls`` with two real servers (the session's and a
second one started here through ``edct serve``); requests go to the endpoint with the fewest in
flight, so both serve a share. The second server is then stopped with SIGTERM to ``edct serve``:
none of its processes may remain."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from support.hang_guard import hang_limit
from support.vllm_server import NEW_TOKENS, finished_requests, start_edct_serve

from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run

pytestmark = pytest.mark.vllm
N = 16


def _rss_gib(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**30


def test_one_role_balanced_over_two_real_vllm_servers(
    vllm_server, vllm_env, tiny_vl_dir, tmp_path: Path
) -> None:
    second = start_edct_serve(vllm_env, tiny_vl_dir, tmp_path / "second.log")
    try:
        servers = (vllm_server, second)
        print(
            f"\nsecond vLLM server healthy after {second.seconds_to_healthy:.1f} s; resident memory "
            f"{_rss_gib(vllm_server.snapshot()):.1f} GiB + {_rss_gib(second.snapshot()):.1f} GiB"
        )
        before = [finished_requests(s) for s in servers]
        raw = calibration_config("faithful", n=N, output_dir=tmp_path / "run").model_dump(mode="json")
        raw["progress"] = False
        raw["bootstrap_resamples"] = 200
        raw["protocol"]["max_new_tokens"] = NEW_TOKENS
        raw["protocol"]["graded_max_new_tokens"] = NEW_TOKENS
        raw["limits"]["target_concurrency"] = 2
        raw["roles"]["target"] = {
            "backend": "openai-chat",
            "model": vllm_server.model,
            "base_urls": [s.url for s in servers],
            "concurrency": 8,
            "timeout_s": hang_limit(120),  # a hang guard: a retried request would count twice
        }
        outcome = run(config_from_dict(raw))
        served = [finished_requests(s) - b for s, b in zip(servers, before, strict=True)]
    finally:
        left = second.stop()
    assert second.serve.returncode == 0 and not left, f"processes left: {left}"

    usage = outcome.results["usage"]["roles"]["target"]
    assert len(outcome.records) == N and all(r.status == "scored" or r.reason for r in outcome.records)
    assert sum(served) == usage["requests"] >= 2 * N
    assert min(served) >= 0.2 * sum(served), f"one server did almost nothing: {served}"
    # what our client counted per endpoint is what each vLLM server says it finished
    assert [e["requests"] for e in usage["endpoints"]] == served
    print(f"requests per server: {served}")
