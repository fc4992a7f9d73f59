"""The tables of docs/concepts/judge-reliability.md measured on the calibration world.

Default: each failure mode of a cheap judge (and the calibration judge) as the judge of a
calibration run of the ``prior`` target (true CCS ≈ 0), with its controls' accuracy, interval,
verdict and ``edct run``'s exit code. ``--false-alarms``: the calibration judge over the four
reference behaviours × 3 seeds, n = 100 each: how many runs are flagged, and the controls' share
of the judge calls.

    python benchmarks/judge_controls.py [--n 10] [--behavior prior]
    python benchmarks/judge_controls.py --false-alarms [--n 100]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.stand_in_judges import BACKEND, POLICIES, register

from edct_task.cli.run import finish
from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--behavior", default="prior")
    parser.add_argument("--false-alarms", action="store_true")
    args = parser.parse_args()
    if args.false_alarms:
        false_alarms(args.n)
        return
    print("| judge | CCS_binary | binary controls | 95% CI | graded controls | 95% CI | flagged | exit |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for policy in ("calibration", *POLICIES):
            register(policy)
            base = calibration_config(args.behavior, n=args.n, output_dir=Path(tmp) / policy).model_dump(
                mode="json"
            )
            base.update(progress=False, bootstrap_resamples=1000, cache_dir=str(Path(tmp) / "cache"))
            base["roles"]["judge"] = {"backend": BACKEND}
            outcome = run(config_from_dict(base))
            r = outcome.results
            ccs = r["results"]["overall"]["metrics"]["ccs_binary"]
            roles = r["controls"]["roles"]
            b, g = roles["judge_binary"]["judge"], roles["judge_graded"]["judge"]
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = finish(outcome.records, None, r["controls"])  # edct run's exit code
            shown = (
                "—"
                if ccs["estimate"] is None
                else f"{ccs['estimate']:.3f} [{ccs['low']:.2f}, {ccs['high']:.2f}]"
            )
            print(
                f"| {policy} | {shown} | {b['correct']}/{b['n']} | [{b['ci'][0]:.2f}, {b['ci'][1]:.2f}] | "
                f"{g['correct']}/{g['n']} | [{g['ci'][0]:.2f}, {g['ci'][1]:.2f}] | "
                f"{'yes' if r['controls']['unreliable'] else 'no'} | {code} |",
            )


def false_alarms(n: int) -> None:
    print("| target | seed | CCS_binary | controls right | flagged | control share of judge calls |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for behavior in ("faithful", "prior", "stale", "mixed:0.5"):
            for seed in (0, 1, 2):
                out = Path(tmp) / f"{behavior}-{seed}"
                base = calibration_config(behavior, n=n, output_dir=out).model_dump(mode="json")
                base.update(progress=False, bootstrap_resamples=1000, cache_dir=str(Path(tmp) / "cache"))
                base["data"]["seed"] = seed
                base["protocol"]["seed"] = seed
                r = run(config_from_dict(base)).results
                c = r["controls"]
                right = sum(t["correct"] for j in c["roles"].values() for t in j.values())
                total = sum(t["n"] for j in c["roles"].values() for t in j.values())
                judge_controls = sum(
                    t["n"] for role in ("judge_binary", "judge_graded") for t in c["roles"][role].values()
                )
                judge_calls = r["calls"]["calls"].get("judge", 0) + r["calls"]["cache_hits"].get("judge", 0)
                ccs = r["results"]["overall"]["metrics"]["ccs_binary"]["estimate"]
                print(
                    f"| {behavior} | {seed} | {ccs:.3f} | {right}/{total} | "
                    f"{'yes' if c['unreliable'] else 'no'} | "
                    f"{judge_controls}/{judge_calls} = {judge_controls / judge_calls:.1%} |"
                )


if __name__ == "__main__":
    main()
