"""``edct leaderboard BUNDLE... --output DIR``: verify bundles and rank them within their setup track."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output
from edct_task.core.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="verify bundles by recomputation and rank them per setup track",
        description="Verify every bundle (hashes, digest, dataset manifest, setup, and every score "
        "recomputed from its sample records), reject those that fail with the reason, and rank the rest "
        "by CCS_binary within their setup track (Markdown, CSV, JSON, HTML).",
    )
    p.add_argument(
        "bundles", nargs="*", type=Path, help="bundles written by `edct submit` (or folders of them)"
    )
    add_output(p, "folder for leaderboard.md/.csv/.json/.html", required=True)
    p.add_argument(
        "--manifest",
        type=Path,
        help="reference dataset_manifest.json (or a bundle): reject bundles scored on other documents",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=10_000,
        help="bootstrap resamples of the board's intervals (every entry's, whatever its bundle says)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed of the board's intervals")
    p.add_argument(
        "--rejudge",
        type=Path,
        metavar="CONFIG",
        help="re-run the judge role of this run config on every entry's recorded texts",
    )
    p.add_argument(
        "--regate",
        action="store_true",
        help="with --rejudge: also re-run the edit gate (the config's detector) on the bundled images",
    )
    p.add_argument(
        "--cache",
        type=Path,
        help="stage cache of --rejudge (default: OUT/cache); a re-run pays only for new entries",
    )
    p.add_argument(
        "--eval-results",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="Hub eval-results files (or model repos holding .eval_results/): shown as unverified entries",
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
    from edct_task.leaderboard.html import flag_text
    from edct_task.reporting.tables import interval_cell
    from edct_task.scoring.metrics import PRIMARY

    bundles: list[Path] = []
    for p in args.bundles:
        if p.is_dir():  # everything found is read only if it is a regular file (archive.read_archive)
            bundles.extend(sorted(p.rglob("*.edct.zip")))
        elif p.exists() or p.is_symlink():
            bundles.append(p)
        else:
            raise ConfigError(f"{p} does not exist: pass bundles written by `edct submit`")
    if not bundles and not args.eval_results:
        raise ConfigError("no bundle found (*.edct.zip)")
    if args.regate and not args.rejudge:
        raise ConfigError("--regate goes with --rejudge CONFIG (the board's detector comes from that config)")
    from edct_task.leaderboard.verify import MAX_RESAMPLES, BoardScoring

    if not 100 <= args.resamples <= MAX_RESAMPLES:
        raise ConfigError(f"--resamples must be within 100..{MAX_RESAMPLES}")
    scoring = BoardScoring(seed=args.seed, n_resamples=args.resamples)
    reference = _reference_digest(args.manifest) if args.manifest else None
    judge = None
    if args.rejudge:
        from edct_task.config import load_config
        from edct_task.leaderboard.rejudge import BoardJudge

        config = load_config(args.rejudge)
        judge = BoardJudge(config=config, cache_dir=args.cache or args.output / "cache", regate=args.regate)
    unverified: list = []
    extra_rejected: list = []
    if args.eval_results:
        from edct_task.leaderboard.eval_results import read_eval_results

        for p in args.eval_results:
            if not p.exists():
                raise ConfigError(f"--eval-results {p} does not exist")
        unverified, extra_rejected = read_eval_results(args.eval_results)
    board = build_board(
        bundles, reference_manifest=reference, scoring=scoring, judge=judge, unverified=unverified
    )
    board["rejected"] += extra_rejected
    try:
        write_board(board, args.output)
    except OSError as exc:
        raise ConfigError(
            f"--output {args.output}: the board could not be written ({exc.strerror or exc}); "
            "the previous board, if any, is unchanged"
        ) from None
    for t in board["tracks"]:
        print(f"track {t['id']}: {t['label']}")
        for e in t["entries"]:
            lo, hi = e["rank_interval"]
            line = f"  {e['rank']:>3} ({lo}–{hi})  {e['model']}  "
            line += f"{PRIMARY.label} {interval_cell(e[PRIMARY.name])}"
            if "board" in e and "error" in e["board"]:
                line += f"  board: {e['board']['error']}"
            elif "board" in e:
                b = e["board"]
                rate = b["agreement"]["rate"]
                line += f"  board {interval_cell(b[PRIMARY.name])}, agreement " + (
                    "—" if rate is None else f"{rate:.3f}"
                )
                line += f"  {flag_text(b)}" if flag_text(b) else ""
            print(line)
        for e in t.get("unranked", ()):
            print(f"  not ranked  {e['model']}: {'; '.join(e['unranked'])}")
    for e in board.get("unreliable", ()):
        for reason in e["reasons"]:
            print(f"unreliable, not ranked  {e['model']} (track {e['track']}): {reason}")
    for d in board["duplicates"]:
        print(f"duplicate {d['bundle']}: {d.get('reason', 'the same bundle')} as {d['same_as']}")
    for r in board["rejected"]:
        print(f"rejected {r['bundle']}: {r['reason']}")
    print(
        f"wrote {args.output}/leaderboard.md, .csv, .json, .html "
        f"({sum(len(t['entries']) for t in board['tracks'])} ranked, "
        f"{sum(len(t['unranked']) for t in board['tracks'])} not ranked, {len(board['rejected'])} rejected, "
        f"{len(board['duplicates'])} duplicate(s), {len(board['unverified'])} unverified, "
        f"{len(board.get('unreliable', ()))} unreliable, not ranked)"
    )
    return 0
