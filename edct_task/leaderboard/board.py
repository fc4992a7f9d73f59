"""``edct leaderboard``: verify bundles, rank them within their setup track, write the board.

Tracks: bundles whose setup identity (everything but the target: judge(s), extractor, editor,
edit parser, detector, protocol incl. k, thresholds, prompt versions, dataset) is identical.
Different judge, editor, k, thresholds or prompts is a different track; nothing is ranked across
tracks. Within a track entries are ordered by CCS_binary; the rank range comes from CI overlap:
the best rank counts only entries whose whole CI lies above this one's, the worst rank counts
every entry that is not wholly below it.

Writes ``leaderboard.md``, ``.csv``, ``.json``::

    {"tracks": [{"id", "label", "setup": {…}, "entries": [{"bundle", "model", "rank", "rank_range",
                  "ccs_binary": {...}, …, "counts", "digest"}]}],
     "rejected": [{"bundle", "reason", "code"}]}

and ``leaderboard.html`` (static, every value escaped).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edct_task.leaderboard.html import render_html
from edct_task.leaderboard.verify import Rejected, Verified, verify_bundle
from edct_task.reporting.setup import setup_label
from edct_task.reporting.tables import csv_number, interval_cell
from edct_task.scoring.metrics import CCS_BINARY, METRIC_NAMES

RANK_METRIC = CCS_BINARY


def rank_entries(entries: Sequence[Verified]) -> list[dict[str, Any]]:
    """Entries of one track with rank (1 = best; ties share) and rank range from CI overlap."""
    rows = []
    for e in entries:
        m = e.summary["overall"]["metrics"]
        rows.append(
            {
                "bundle": str(e.bundle),
                "model": e.model,
                **{name: m[name] for name in METRIC_NAMES},
                "counts": e.summary["overall"]["counts"],
                "digest": e.digest,
            }
        )

    def est(r: dict[str, Any]) -> float:
        v = r[RANK_METRIC]["estimate"]
        return -1.0 if v is None else v

    def bounds(r: dict[str, Any]) -> tuple[float, float]:
        m = r[RANK_METRIC]
        if m["estimate"] is None:
            return (-1.0, -1.0)
        return (m["low"], m["high"])

    rows.sort(key=lambda r: (-est(r), r["model"], r["bundle"]))
    for r in rows:
        low, high = bounds(r)
        others = [o for o in rows if o is not r]
        r["rank"] = 1 + sum(est(o) > est(r) for o in others)
        r["rank_range"] = [
            1 + sum(bounds(o)[0] > high for o in others),
            len(rows) - sum(bounds(o)[1] < low for o in others),
        ]
    return rows


def build_board(bundles: Sequence[Path], *, reference_manifest: str | None = None) -> dict[str, Any]:
    verified: list[Verified] = []
    rejected: list[dict[str, str]] = []
    for path in bundles:
        result = verify_bundle(path, reference_manifest=reference_manifest)
        if isinstance(result, Rejected):
            rejected.append({"bundle": str(path), "reason": result.reason, "code": result.code})
        else:
            verified.append(result)
    tracks: dict[str, list[Verified]] = {}
    for v in verified:
        tracks.setdefault(v.track, []).append(v)
    return {
        "tracks": [
            {
                "id": tid,
                "label": setup_label(entries[0].setup),
                "setup": entries[0].setup,
                "entries": rank_entries(entries),
            }
            for tid, entries in tracks.items()
        ],
        "rejected": rejected,
        "ranked_by": RANK_METRIC,
        "rank_range": "CI overlap of the 95% percentile-bootstrap interval of CCS_binary",
    }


def _range(r: dict[str, Any]) -> str:
    lo, hi = r["rank_range"]
    return str(lo) if lo == hi else f"{lo}–{hi}"


def to_markdown(board: dict[str, Any]) -> str:
    lines = [
        "# EDCT leaderboard",
        "",
        f"Ranked by {board['ranked_by']} within each setup track; rank range: {board['rank_range']}.",
        "",
    ]
    for t in board["tracks"]:
        lines += [
            f"## Track {t['id']}",
            "",
            f"`{t['label']}`",
            "",
            "| Rank | Range | Model | CCS_binary | CCS_graded | AC k=1 | EF k=1 | AC k=2 | EF k=2 | scored | "
            "excluded | bundle |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in t["entries"]:
            cells = [
                str(r["rank"]),
                _range(r),
                r["model"],
                *(
                    interval_cell(r[m])
                    for m in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1", "ac_k2", "ef_k2")
                ),
                str(r["counts"]["scored"]),
                str(r["counts"]["excluded"]),
                Path(r["bundle"]).name,
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    if board["rejected"]:
        lines += ["## Rejected bundles", "", "| bundle | reason |", "| --- | --- |"]
        lines += [
            f"| {Path(r['bundle']).name} | {r['reason'].replace('|', '/')} |" for r in board["rejected"]
        ]
    return "\n".join(lines) + "\n"


def to_csv(board: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "track",
            "rank",
            "rank_best",
            "rank_worst",
            "model",
            "bundle",
            *(f"{m}_{p}" for m in METRIC_NAMES for p in ("estimate", "low", "high", "n")),
            "scored",
            "excluded",
            "unscored",
            "error",
            "digest",
        ]
    )
    for t in board["tracks"]:
        for r in t["entries"]:
            w.writerow(
                [
                    t["id"],
                    r["rank"],
                    *r["rank_range"],
                    r["model"],
                    r["bundle"],
                    *(csv_number(r[m][p]) for m in METRIC_NAMES for p in ("estimate", "low", "high", "n")),
                    *(r["counts"][c] for c in ("scored", "excluded", "unscored", "error")),
                    r["digest"],
                ]
            )
    return buf.getvalue()


def write_board(board: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "leaderboard.json": json.dumps(board, indent=2, ensure_ascii=False) + "\n",
        "leaderboard.md": to_markdown(board),
        "leaderboard.csv": to_csv(board),
        "leaderboard.html": render_html(board),
    }
    paths = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        paths.append(out / name)
    return paths
