"""``edct run`` (calibration roles, ``openai-chat`` target) against a running vLLM server: the
Python part of ``benchmarks/gpu_check.sh``. Prints one summary line; exit 1 if a sample ended
without a record or a reason, or a target request failed.

    python benchmarks/gpu_check_run.py --base-url http://127.0.0.1:8000/v1 --model tiny --out DIR
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("-n", type=int, default=12)
    parser.add_argument("--new-tokens", type=int, default=16)
    args = parser.parse_args()
    raw = calibration_config("faithful", n=args.n, output_dir=args.out).model_dump(mode="json")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 200
    raw["protocol"]["max_new_tokens"] = args.new_tokens
    raw["protocol"]["graded_max_new_tokens"] = args.new_tokens
    raw["limits"]["target_concurrency"] = 4
    raw["roles"]["target"] = {"backend": "openai-chat", "model": args.model, "base_url": args.base_url}
    started = time.perf_counter()
    outcome = run(config_from_dict(raw))
    counts = outcome.results["results"]["overall"]["counts"]
    usage = outcome.results["usage"]["roles"]["target"]
    unrecorded = [r.sample.id for r in outcome.records if r.status != "scored" and not r.reason]
    ok = len(outcome.records) == args.n and not unrecorded and usage["failures"] == 0
    print(
        f"{len(outcome.records)}/{args.n} samples recorded ({counts}), {usage['requests']} target "
        f"requests, {usage['failures']} failed, {time.perf_counter() - started:.1f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
