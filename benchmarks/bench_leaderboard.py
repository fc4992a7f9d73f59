"""`edct leaderboard` against hostile bundles (peak memory) and a board of honest ones (time).

1. Zip bombs, each verified in a fresh Python process whose peak RSS (``ru_maxrss``) is read:
   ``baseline`` (an honest bundle, for reference), ``probe`` (the issue's probe: an honest
   bundle plus three unlisted 600 MiB members of zeros, ~1.8 MB on disk), ``known`` (the same
   600 MiB under the name ``samples.jsonl``), ``at-cap`` (a ``samples.jsonl`` just under the
   256 MiB cap, one line) and ``at-cap-sealed`` (the same with ``bundle.json`` resealed over it,
   so it passes the hash check and is refused by the line-length cap while being streamed).
2. A board of ``--bundles`` honest bundles (``--samples`` per domain, three domains, k = 2,
   complete records): verification time per bundle, with the board's default 10,000 resamples.

    python benchmarks/bench_leaderboard.py [--bundles 50] [--samples 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.leaderboard.board import build_board
from edct_task.leaderboard.bundle import BUNDLE_JSON, bundle_digest, read_bundle

MiB = 1 << 20

# VmHWM (peak RSS of this process image): unlike ru_maxrss it is not inherited across exec
# from the forking benchmark process.
_MEASURE = """
import re, sys
from pathlib import Path
from edct_task.leaderboard.verify import verify_bundle
r = verify_bundle(Path(sys.argv[1]))
hwm = re.search(r"VmHWM:\\s*(\\d+) kB", Path("/proc/self/status").read_text()).group(1)
print(hwm, getattr(r, "reason", "accepted")[:160])
"""


def _peak_rss(bundle: Path) -> tuple[float, str]:
    """(peak RSS in MiB, outcome) of a fresh process that verifies ``bundle``."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(bundle)], capture_output=True, text=True, check=True
    ).stdout.strip()
    kib, outcome = out.split(" ", 1)
    return int(kib) / 1024, outcome


def _with_members(
    src: Path, dst: Path, extra: list[tuple[str, int]], *, drop: str | None = None, seal: bool = False
) -> Path:
    """``src``'s members plus ``extra`` members of zeros (name, bytes), written in 1 MiB chunks;
    ``seal``: with ``bundle.json`` listing their hashes and its digest redone (a resealed bomb)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == BUNDLE_JSON and seal:
                meta = json.loads(data)
                for name, size in extra:
                    digest = hashlib.sha256()
                    for _ in range(size // MiB):
                        digest.update(b"\0" * MiB)
                    meta["files"][name] = digest.hexdigest()
                meta["digest"] = bundle_digest(meta)
                data = json.dumps(meta).encode()
            if info.filename != drop:
                z.writestr(info, data)
        zeros = b"\0" * MiB
        for name, size in extra:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=True) as f:
                for _ in range(size // MiB):
                    f.write(zeros)
    return dst


def _honest(tmp: Path, i: int, n: int) -> Path:
    run = tmp / "runs" / f"m{i}"
    write_edct_run(
        run, records(0.3 + 0.6 * i / 50, n=n), target={"backend": "openai-chat", "model": f"org/m{i}"}
    )
    out = tmp / "bundles" / f"m{i}.edct.zip"
    assert main(["submit", str(run), "--out", str(out)]) == 0
    return out


def main_(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundles", type=int, default=50)
    ap.add_argument("--samples", type=int, default=100, help="samples per domain (three domains)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out: dict = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        honest = [_honest(tmp, i, args.samples) for i in range(args.bundles)]
        small = _honest(tmp, 999, 4)
        bombs = {
            "baseline": small,
            "probe": _with_members(
                small, tmp / "probe.edct.zip", [(f"pad{i}.bin", 600 * MiB) for i in range(3)]
            ),
            "known": _with_members(
                small, tmp / "known.edct.zip", [("samples.jsonl", 600 * MiB)], drop="samples.jsonl"
            ),
            "at-cap": _with_members(
                small, tmp / "atcap.edct.zip", [("samples.jsonl", 255 * MiB)], drop="samples.jsonl"
            ),
            "at-cap-sealed": _with_members(
                small,
                tmp / "sealed.edct.zip",
                [("samples.jsonl", 255 * MiB)],
                drop="samples.jsonl",
                seal=True,
            ),
        }
        out["bombs"] = {}
        for name, path in bombs.items():
            rss, outcome = _peak_rss(path)
            out["bombs"][name] = {
                "zip_bytes": path.stat().st_size,
                "peak_rss_mb": round(rss, 1),
                "outcome": outcome,
            }
            print(f"{name:>13}: {path.stat().st_size / MiB:7.2f} MiB zip, peak RSS {rss:7.1f} MB  {outcome}")
        read_bundle(honest[0])  # warm imports
        start = time.perf_counter()
        board = build_board(honest)
        seconds = time.perf_counter() - start
        verified = sum(len(tr["entries"]) for tr in board["tracks"])
        assert verified == len(honest), board["rejected"][:1]
        out["board"] = {
            "bundles": len(honest),
            "samples_per_bundle": 3 * args.samples,
            "seconds": round(seconds, 2),
            "seconds_per_bundle": round(seconds / len(honest), 3),
        }
        print(
            f"board of {len(honest)} honest bundles ({3 * args.samples} samples each): {seconds:.1f} s, "
            f"{seconds / len(honest):.3f} s per bundle"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main_()
