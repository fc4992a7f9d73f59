"""The trained tiny Qwen3-VL through every runtime: the same checkpoint, the same scores?

For each checkpoint (``edct tiny-vlm path faithful|prior``) and each runtime

    a  edct run --model qwen3_vl         (lmms-eval's transformers class as the run's target)
    b  lmms-eval --model qwen3_vl        (lmms-eval's own agentic loop)
    c  a real vLLM server (CPU build, ``edct serve``) behind an ``openai-chat`` target (edct run)
    d  lmms-eval --model vllm            (vLLM in the lmms-eval process)
    n  negative control: (a) with every re-query sent the ORIGINAL picture (``controls``)

runs the ``edct_calibration`` task on its first ``--limit`` documents and prints one row per
(checkpoint, runtime): CCS_binary [95% CI], CCS_graded [95% CI], per-sample agreement with (a)
(same status and same CCS_binary), wall time; where a runtime's replies differ from (a)'s, the
first diverging token. (c) and (d) need the vLLM environment (``make vllm-env``).

    .venv/bin/python benchmarks/tiny_vlm_runtimes.py --limit 60 --runtimes a,b,n,c,d --out /tmp/tv
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from support.tiny_vlm_runs import RUNTIMES, TASK  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=60)
    p.add_argument("--runtimes", default="a,b,n")
    p.add_argument("--behaviors", default="faithful,prior")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--vllm-python", type=Path, default=REPO / ".venv-vllm" / "bin" / "python")
    p.add_argument("--reuse", action="store_true", help="read runs already in --out instead of rerunning")
    args = p.parse_args(argv)

    from transformers import AutoTokenizer

    from edct_task.tiny_vlm.comparison import compare, records, summary
    from edct_task.tiny_vlm.store import checkpoint_path

    table = []
    for behavior in args.behaviors.split(","):
        folder = checkpoint_path(behavior)
        info = json.loads((folder / "edct_training.json").read_text())
        tok = AutoTokenizer.from_pretrained(str(folder))
        base = None
        for rt in args.runtimes.split(","):
            out = args.out / f"{behavior}-{rt}"
            out.mkdir(parents=True, exist_ok=True)
            done = out / "wall_s.txt"
            if args.reuse and done.is_file():
                wall = float(done.read_text())
            else:
                wall = RUNTIMES[rt](folder, out, args.limit, vllm_python=args.vllm_python)
                done.write_text(f"{wall:.1f}\n")
            recs = records(out, TASK)
            row = {"behavior": behavior, "runtime": rt, "wall_s": round(wall, 1), **summary(recs)}
            if rt == "a":
                base = recs
            elif base is not None:
                row.update(compare(base, recs, tok))
            row["train_cpu_s"], row["size_bytes"] = info["train_cpu_s"], info["size_bytes"]
            table.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "table.json").write_text(json.dumps(table, indent=2))

    def fmt(v: Any) -> str:
        return "–" if not v else f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"

    print(
        "\n| checkpoint | runtime | CCS_binary [95% CI] | CCS_graded [95% CI] | agreement with (a) | wall |"
    )
    print("|---|---|---|---|---|---|")
    for r in table:
        agree = "–" if r.get("agreement") is None else f"{r['agreement']:.0%} of {r['n']}"
        print(
            f"| {r['behavior']} | {r['runtime']} | {fmt(r['ccs_binary'])} | {fmt(r['ccs_graded'])} "
            f"| {agree} | {r['wall_s']:.0f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
