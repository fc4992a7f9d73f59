"""Peak RSS and CPU of the worst inputs of issue 34's probe, each read in a fresh child process.

Usage::

    python benchmarks/bench_hostile_inputs.py [--tree PATH] [--members 1000,2000,8000]

``--tree`` is the source tree the children import (default: this checkout); pass a checkout of an
older commit to measure "before". Each child runs under a 4 GiB address-space limit and a 60 s
CPU limit, so a reader that would exhaust the machine is reported as killed (or MemoryError)
rather than taking it down. Prints one row per case: outcome, CPU seconds, peak RSS (MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AS_LIMIT = 4 << 30
CPU_LIMIT_S = 60


TRAMPOLINE = """
import json, os, resource, subprocess, sys
def limits():
    resource.setrlimit(resource.RLIMIT_AS, ({as_limit}, {as_limit}))
    resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
proc = subprocess.Popen([sys.executable, "-c", sys.argv[1]], preexec_fn=limits)
_, status, usage = os.wait4(proc.pid, 0)
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps({{"status": status, "cpu_s": cpu, "maxrss_kib": usage.ru_maxrss}}))
"""


def measure(tree: Path, code: str) -> dict:
    """Run ``code`` in a grandchild importing ``tree``; its CPU, peak RSS and last output line.

    The grandchild is forked from a bare interpreter (the trampoline), not from this process: on
    Linux a child's peak RSS starts at its parent's, so forking from here would report this
    process's memory as every case's floor."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree}:{tree / 'tests'}",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    trampoline = TRAMPOLINE.format(as_limit=AS_LIMIT, cpu=CPU_LIMIT_S)
    done = subprocess.run(
        [sys.executable, "-c", trampoline, textwrap.dedent(code)],
        env=env,
        cwd=tree,  # ``python -c`` puts the working folder first on sys.path
        capture_output=True,
        text=True,
        errors="replace",
        check=True,
    )
    lines = [line for line in (done.stderr + done.stdout).strip().splitlines() if line.strip()]
    usage = json.loads(next(line for line in reversed(lines) if line.startswith('{"status"')))
    lines = [line for line in lines if not line.startswith('{"status"')]
    status = usage["status"]
    if os.WIFSIGNALED(status):
        outcome = f"killed (signal {os.WTERMSIG(status)})"
    else:
        outcome = (lines[-1] if lines else f"exit {os.WEXITSTATUS(status)}")[:110]
    return {
        "outcome": outcome,
        "cpu_s": round(usage["cpu_s"], 2),
        "peak_rss_mib": round(usage["maxrss_kib"] / 1024, 1),
    }


def _bundle_with_members(tmp: Path, count: int) -> Path:
    """An honest 36-sample bundle plus ``count`` tiny members, each listed in bundle.json."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from support.edct_runs import records, write_edct_run

    from edct_task.leaderboard.bundle import create_bundle, read_bundle, reseal, sha256_bytes, write_zip

    run = tmp / "run"
    if not run.exists():
        write_edct_run(run, records(0.6, n=12), resamples=200)
        create_bundle(run, tmp / "honest.edct.zip")
    with read_bundle(tmp / "honest.edct.zip") as b:
        meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    for i in range(count):
        members[f"images/{sha256_bytes(str(i).encode())}.png"] = b"x"
    out = tmp / f"members-{count}.edct.zip"
    write_zip(out, reseal(meta, members), members)
    return out


def cases(tmp: Path, member_counts: list[int]) -> dict[str, str]:
    out: dict[str, str] = {}
    for count in member_counts:
        path = _bundle_with_members(tmp, count)
        out[f"bundle of {count} tiny members, verified"] = f"""
            from edct_task.leaderboard.verify import verify_bundle
            r = verify_bundle({str(path)!r})
            print(getattr(r, "code", "verified"), getattr(r, "reason", "")[:80])
        """
    (tmp / "zero.edct.zip").symlink_to("/dev/zero")
    out["*.edct.zip link to /dev/zero"] = f"""
        from edct_task.leaderboard.verify import verify_bundle
        r = verify_bundle({str(tmp / "zero.edct.zip")!r})
        print(r.code, r.reason[:90])
    """
    layers = ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
    layers += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = "roles:\n  judge:\n    backend: calibration-rules\n    extra: [" + ", ".join(layers) + "]\n"
    (tmp / "aliases.yaml").write_text(bomb)
    out[f"config of YAML aliases ({len(bomb)} bytes), edct estimate"] = f"""
        from edct_task.cli.main import main
        print("exit", main(["estimate", "--config", {str(tmp / "aliases.yaml")!r}]))
    """
    (tmp / "digits.yaml").write_text("- dataset: {id: o/b, task_id: t}\n  value: " + "9" * 5000 + "\n")
    out["eval-results YAML with a 5,000-digit value"] = f"""
        from edct_task.leaderboard.eval_results import read_eval_results
        entries, rejected = read_eval_results([__import__("pathlib").Path({str(tmp / "digits.yaml")!r})])
        print(len(entries), "entries,", rejected[0]["reason"][:80] if rejected else "")
    """
    from PIL import Image

    Image.new("1", (12000, 12000)).save(tmp / "big.png")  # 144 M pixels
    out["attention pair of 144-megapixel PNGs"] = f"""
        from pathlib import Path
        from edct_task.attention.analyse import _rgb
        try:
            im = _rgb(Path({str(tmp / "big.png")!r})); print("decoded", im.size)
        except Exception as exc:
            print(type(exc).__name__, str(exc)[:90])
    """
    out["Hub table row whose image path is /dev/zero"] = f"""
        import inspect
        from pathlib import Path
        from edct_task.bench_data import hub
        from edct_task.bench_data.format import Candidate, read_image
        table = [{{"image": {{"bytes": None, "path": "/dev/zero"}}}}]
        args = (table, 0, Path({str(tmp)!r}))[: len(inspect.signature(hub.image_reader).parameters)]
        reader = hub.image_reader(*args)
        c = Candidate("okvqa-1", "okvqa", "q", "s", "1", image_path=None, image_reader=reader)
        try:
            read_image(c); print("read")
        except Exception as exc:
            print(type(exc).__name__, str(exc)[:90])
    """
    with (
        zipfile.ZipFile(tmp / "drivelm.zip", "w", compression=zipfile.ZIP_DEFLATED) as z,
        z.open("samples/CAM_FRONT/bomb.jpg", "w", force_zip64=True) as f,
    ):
        for _ in range(1024):
            f.write(b"\0" * (1 << 20))
    out[f"DriveLM zip member of 1 GiB zeros ({(tmp / 'drivelm.zip').stat().st_size >> 10} KiB)"] = f"""
        from edct_task.bench_data import hub
        try:
            archive = __import__("pathlib").Path({str(tmp / "drivelm.zip")!r})
            data = hub._member(archive, "samples/CAM_FRONT/bomb.jpg")()
            print("inflated", len(data))
        except Exception as exc:
            print(type(exc).__name__, str(exc)[:90])
    """
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="source tree the children import")
    parser.add_argument("--members", default="1000,2000,8000", help="member counts of the bundles")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, code in cases(Path(tmp), [int(n) for n in args.members.split(",")]).items():
            r = measure(args.tree.resolve(), code)
            print(f"| {name} | {r['outcome']} | {r['cpu_s']} | {r['peak_rss_mib']} |", flush=True)


if __name__ == "__main__":
    main()
