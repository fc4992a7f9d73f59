"""Throughput of the OpenAI-compatible chat backend against loopback servers with fixed latency.

A remote model's latency, not our client, should bound a run: with ``concurrency`` requests in
flight, N requests of latency L should take about N·L / concurrency, and two endpoints should
double the throughput of one. Run:

    .venv/bin/python benchmarks/bench_openai_chat.py [--requests 256] [--latency 0.05]

Prints one line per setting: endpoints, concurrency, wall seconds, requests/s, and the ideal
(latency-bound) requests/s. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.loopback import CalibrationWorld, Loopback

from model_adapters.contracts import Completion, GenerationParams
from model_adapters.openai_chat import OpenAIText, client_from_options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request")
    args = parser.parse_args()
    world = CalibrationWorld("faithful")
    params = GenerationParams()
    print(f"{'endpoints':>9} {'concurrency':>11} {'seconds':>8} {'req/s':>8} {'ideal req/s':>11}")
    for endpoints in (1, 2):
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(Loopback(world, latency_s=args.latency)) for _ in range(endpoints)]
            urls = [s.url + "/v1" for s in servers]
            for concurrency in (1, 4, 16, 64):
                llm = OpenAIText(
                    client_from_options({"model": "bench", "base_urls": urls, "concurrency": concurrency})
                )
                prompts = [f"prompt {i}" for i in range(args.requests)]
                start = time.perf_counter()
                out = llm.client.map(lambda p, llm=llm: llm.complete(p, params), prompts)
                wall = time.perf_counter() - start
                assert all(isinstance(o, Completion) for o in out)
                ideal = concurrency / args.latency
                rate = args.requests / wall
                print(f"{endpoints:>9} {concurrency:>11} {wall:>8.2f} {rate:>8.1f} {ideal:>11.1f}")
                llm.close()


if __name__ == "__main__":
    main()
