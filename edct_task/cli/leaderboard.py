"""``edct leaderboard BUNDLE... --out DIR``: verify bundles and rank them within their setup track."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from edct_task.roles import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="verify bundles by recomputation and rank them per setup track",
        description="Verify every bundle (hashes, digest, dataset manifest, setup, and every score "
        "recomputed from its sample records), reject those that fail with the reason, and rank the rest "
        "by CCS_binary within their setup track (Markdown, CSV, JSON, HTML).",
    )
    p.add_argument(
        "bundles", nargs="+", type=Path, help="bundles written by `edct submit` (or folders of them)"
    )
    p.add_argument(
        "--output",
        "--out",
        dest="out",
        metavar="DIR",
        type=Path,
        required=True,
        help="folder for leaderboard.md/.csv/.json/.html",
    )
    p.add_argument(
        "--manifest",
        type=Path,
        help="reference dataset_manifest.json (or a bundle): reject bundles scored on other documents",
    )


def _reference_digest(path: Path) -> str:
    from edct_task.leaderboard.bundle import BundleError, read_bundle

    if not path.is_file():
        raise ConfigError(f"--manifest {path}: no such file")
    try:
        if path.name.endswith(".zip"):
            data = read_bundle(path).json_member("dataset_manifest.json")
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
    except (BundleError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--manifest {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("digest"), str):
        raise ConfigError(f"--manifest {path}: expected a dataset_manifest.json with a 'digest'")
    return data["digest"]


def run(args: argparse.Namespace) -> int:
    from edct_task.leaderboard.board import build_board, write_board
    from edct_task.reporting.tables import interval_cell

    bundles: list[Path] = []
    for p in args.bundles:
        if p.is_dir():
            bundles.extend(sorted(p.rglob("*.edct.zip")))
        elif p.is_file():
            bundles.append(p)
        else:
            raise ConfigError(f"{p} does not exist: pass bundles written by `edct submit`")
    if not bundles:
        raise ConfigError("no bundle found (*.edct.zip)")
    reference = _reference_digest(args.manifest) if args.manifest else None
    board = build_board(bundles, reference_manifest=reference)
    write_board(board, args.out)
    for t in board["tracks"]:
        print(f"track {t['id']}: {t['label']}")
        for e in t["entries"]:
            lo, hi = e["rank_range"]
            print(f"  {e['rank']:>3} ({lo}–{hi})  {e['model']}  CCS_binary {interval_cell(e['ccs_binary'])}")
    for r in board["rejected"]:
        print(f"rejected {r['bundle']}: {r['reason']}")
    print(
        f"wrote {args.out}/leaderboard.md, .csv, .json, .html "
        f"({sum(len(t['entries']) for t in board['tracks'])} verified, {len(board['rejected'])} rejected)"
    )
    return 0
