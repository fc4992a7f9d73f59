"""`edct run --model …` (batched lockstep driver) vs `lmms-eval` (agentic loop, one request at a time).

Both run the edct_calibration task on the reference model with simulated latencies: the target
sleeps ``--target-latency`` per generate_until call (per batch, like a batched server), the text
roles and the editor sleep per call (their latency_s option, through an EDCT config file).

    .venv/bin/python benchmarks/bench_lmms.py --n 300

Prints both wall times and the ratio (lmms-eval / edct run); results files land in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent


def config_file(folder: Path, text_latency: float, editor_latency: float) -> Path:
    roles = {
        "extractor": {"backend": "calibration-rules", "latency_s": text_latency},
        "judge": {"backend": "calibration-rules", "latency_s": text_latency},
        "edit_parser": {"backend": "calibration-rules", "latency_s": text_latency},
        "editor": {"backend": "calibration-editor", "latency_s": editor_latency},
        "detector": {"backend": "calibration-oracle"},
    }
    path = folder / "edct_bench_config.yaml"
    path.write_text(yaml.safe_dump({"output_dir": str(folder / "edct"), "progress": False, "roles": roles}))
    return path


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=300, help="calibration documents (300)")
    p.add_argument("--target-latency", type=float, default=0.2, help="seconds per generate_until call")
    p.add_argument("--text-latency", type=float, default=0.2, help="seconds per extractor/judge/parser call")
    p.add_argument("--editor-latency", type=float, default=0.5, help="seconds per edit")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="bench_lmms_"))
    out.mkdir(parents=True, exist_ok=True)
    cfg = config_file(out, a.text_latency, a.editor_latency)
    common = [
        "--model",
        "edct_reference",
        "--model_args",
        f"behavior=faithful,latency_s={a.target_latency}",
        "--tasks",
        "edct_calibration",
        "--limit",
        str(a.n),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "EDCT_CONFIG": str(cfg)}
    t_fast = timed(
        [
            str(BIN / "edct"),
            "run",
            "--config",
            str(cfg),
            *common,
            "--output_path",
            str(out / "fast"),
            "--no-progress",
        ],
        {**env, "EDCT_WORK_DIR": str(out / "work_fast")},
    )
    t_slow = timed(
        [str(BIN / "lmms-eval"), *common, "--output_path", str(out / "lmms")],
        {**env, "EDCT_WORK_DIR": str(out / "work_lmms")},
    )
    scores = []
    for sub in ("fast", "lmms"):
        r = json.loads(sorted((out / sub).rglob("*_results.json"))[-1].read_text())
        scores.append(r["results"]["edct_calibration"]["ccs_binary,none"])
    print(
        json.dumps(
            {
                "n": a.n,
                "latency_s": {"target": a.target_latency, "text": a.text_latency, "editor": a.editor_latency},
                "edct_run_s": round(t_fast, 1),
                "lmms_eval_s": round(t_slow, 1),
                "ratio": round(t_slow / t_fast, 1),
                "ccs_binary": {"edct_run": scores[0], "lmms_eval": scores[1]},
                "output": str(out),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
