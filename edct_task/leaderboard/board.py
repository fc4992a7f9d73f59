"""``edct leaderboard``: verify bundles, rank them within their setup track, write the board.

Tracks: bundles whose setup identity (everything but the target: judge(s), extractor, editor,
edit parser, detector, protocol incl. k, thresholds, prompt versions, dataset) is identical.
Different judge, editor, k, thresholds or prompts is a different track; nothing is ranked across
tracks. Within a track entries are ordered by CCS_binary; the rank range comes from CI overlap:
the best rank counts only entries whose whole CI lies above this one's, the worst rank counts
every entry that is not wholly below it.

Entries are named by their verified target (model id, ``@revision`` when pinned, backend); the
submitter's free-text name is shown only as a sanitised label. The same bundle (same digest) given
more than once is listed once (the others under ``duplicates``). Each track's header names every
setup field that differs between tracks, the dataset and its size included. All intervals use the
board's scoring parameters (``scoring``), never a bundle's.

Writes ``leaderboard.md``, ``.csv``, ``.json``::

    {"tracks": [{"id", "label", "setup": {…}, "differs": {field: value}, "dataset": {digest, n},
                 "entries": [{"bundle", "model", "backend", "revision", "label", "rank",
                              "rank_range", "ccs_binary": {...}, …, "counts", "digest",
                              ["board": {re-judged numbers}]}]}],
     "rejected": [{"bundle", "reason", "code"}], "duplicates": [{"bundle", "same_as"}],
     "unverified": [{Hub eval-results entries}], "scoring": {seed, n_resamples, method}}

and ``leaderboard.html`` (static, every value escaped), each file replaced atomically.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edct_task.engine.files import atomic_write, json_text
from edct_task.leaderboard.archive import DEFAULT_LIMITS, Limits
from edct_task.leaderboard.html import flag_text, render_html
from edct_task.leaderboard.identity import differing_fields, field_value, sanitise
from edct_task.leaderboard.verify import DEFAULT_SCORING, BoardScoring, Rejected, Verified, verify_bundle
from edct_task.reporting.setup import setup_label
from edct_task.reporting.tables import interval_cell
from edct_task.scoring.metrics import CCS_BINARY, METRIC_NAMES
from edct_task.text_safety import csv_number, csv_text, reveal_line

RANK_METRIC = CCS_BINARY


def rank_entries(
    entries: Sequence[Verified], board_numbers: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Entries of one track with rank (1 = best; ties share) and rank range from CI overlap.

    The rank uses the board's own verified score: the CCS_binary it recomputed from the records,
    or, where it re-judged the entry (``board_numbers``, digest → numbers), its own judge's."""
    rows = []
    for e in entries:
        m = e.summary["overall"]["metrics"]
        own = (board_numbers or {}).get(e.digest)
        rows.append(
            {
                "bundle": str(e.bundle),
                "model": e.model,
                "backend": e.identity.get("backend"),
                "revision": e.identity.get("revision"),
                "label": e.label,
                **{name: m[name] for name in METRIC_NAMES},
                "counts": e.summary["overall"]["counts"],
                "digest": e.digest,
                "_rank_by": own[RANK_METRIC] if own and RANK_METRIC in own else m[RANK_METRIC],
            }
        )

    def est(r: dict[str, Any]) -> float:
        v = r["_rank_by"]["estimate"]
        return -1.0 if v is None else v

    def bounds(r: dict[str, Any]) -> tuple[float, float]:
        m = r["_rank_by"]
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
    for r in rows:
        del r["_rank_by"]
    return rows


def _track_view(v: Verified) -> dict[str, Any]:
    """What a reader compares between tracks: the setup and the dataset (digest and size)."""
    setup = {k: val for k, val in v.setup.items() if k != "dataset_digest"}  # shown as dataset.digest
    return {**setup, "dataset": {"digest": v.dataset.get("digest"), "n": v.dataset.get("n")}}


def build_board(
    bundles: Sequence[Path],
    *,
    reference_manifest: str | None = None,
    scoring: BoardScoring = DEFAULT_SCORING,
    limits: Limits = DEFAULT_LIMITS,
    judge: Any = None,
    unverified: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Verify every bundle, list each distinct one once, rank per track; ``judge`` (a
    ``rejudge.BoardJudge``) re-judges every entry; ``unverified`` are Hub eval-results entries."""
    verified: list[Verified] = []
    rejected: list[dict[str, str]] = []
    duplicates: list[dict[str, str]] = []
    seen: dict[str, Path] = {}
    seen_evidence: dict[str, Path] = {}
    for path in bundles:
        result = verify_bundle(path, reference_manifest=reference_manifest, scoring=scoring, limits=limits)
        if isinstance(result, Rejected):
            rejected.append({"bundle": str(path), "reason": result.reason, "code": result.code})
        elif result.digest in seen:
            duplicates.append(
                {"bundle": str(path), "same_as": str(seen[result.digest]), "reason": "the same bundle"}
            )
        elif result.evidence in seen_evidence:
            duplicates.append(
                {
                    "bundle": str(path),
                    "same_as": str(seen_evidence[result.evidence]),
                    "reason": f"the same sample records, resealed as {result.model}",
                }
            )
        else:
            seen[result.digest] = path
            seen_evidence[result.evidence] = path
            verified.append(result)
    board_numbers: dict[str, dict[str, Any]] = {}
    if judge is not None and verified:
        from edct_task.leaderboard.rejudge import rejudge_board

        board_numbers = rejudge_board(verified, judge, scoring)
    tracks: dict[str, list[Verified]] = {}
    for v in verified:
        tracks.setdefault(v.track, []).append(v)
    views = {tid: _track_view(entries[0]) for tid, entries in tracks.items()}
    differs = differing_fields(list(views.values()))
    out_tracks = []
    for tid, entries in tracks.items():
        apart = [e for e in entries if (board_numbers.get(e.digest) or {}).get("unranked")]
        ranked = [e for e in entries if not (board_numbers.get(e.digest) or {}).get("unranked")]
        rows = rank_entries(ranked, board_numbers if judge else None)
        unranked = rank_entries(apart)
        for row in (*rows, *unranked):
            if row["digest"] in board_numbers:
                row["board"] = board_numbers[row["digest"]]
        for row in unranked:
            row["rank"], row["rank_range"] = None, None
            row["unranked"] = row["board"]["unranked"]
        out_tracks.append(
            {
                "id": tid,
                "label": setup_label(entries[0].setup),
                "setup": entries[0].setup,
                "dataset": views[tid]["dataset"],
                "differs": {path: field_value(views[tid], path) for path in differs},
                "entries": rows,
                "unranked": unranked,
            }
        )
    return {
        "tracks": out_tracks,
        "rejected": rejected,
        "duplicates": duplicates,
        "unverified": list(unverified),
        "ranked_by": RANK_METRIC,
        "rank_range": "CI overlap of the 95% percentile-bootstrap interval of CCS_binary",
        "scoring": scoring.as_dict(),
        "rejudged": judge is not None,
    }


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]  # a digest
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return sanitise(text, 60)


def differs_line(track: dict[str, Any]) -> str:
    """``field = value; …`` of the setup fields in which this track differs from the others."""
    return "; ".join(f"{k} = {_short(v)}" for k, v in track.get("differs", {}).items())


def _agreement(board: dict[str, Any]) -> tuple[str, str]:
    a = board["agreement"]
    rate = "—" if a["rate"] is None else f"{a['rate']:.3f} ({a['steps']})"
    kappa = "—" if a["kappa"] is None else f"{a['kappa']:.3f}"
    return rate, kappa


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
    scoring = board.get("scoring") or {}
    if scoring:
        lines += [
            f"Intervals: the board's own ({scoring['method']}, {scoring['n_resamples']} resamples, "
            f"seed {scoring['seed']}), never a bundle's.",
            "",
        ]
    rejudged = board.get("rejudged")
    for t in board["tracks"]:
        differs = differs_line(t)
        lines += [
            f"## Track {t['id']}",
            "",
            "`"
            + reveal_line(t["label"]).replace("`", "'")
            + f"` · dataset {t['dataset']['digest'][:12]} ({t['dataset']['n']} samples)",
            "",
            *([f"Differs from the other tracks in: {differs}", ""] if differs else []),
            "| Rank | Range | Model | Backend | Label | CCS_binary | CCS_graded | AC k=1 | EF k=1 | AC k=2 | "
            "EF k=2 | scored | excluded | unscored | error | bundle |"
            + (" board CCS_binary | agreement | κ | flag |" if rejudged else ""),
            "| --- " * (16 + (4 if rejudged else 0)) + "|",
        ]
        for r in t["entries"]:
            cells = [
                str(r["rank"]),
                _range(r),
                r["model"],
                r.get("backend") or "",
                r.get("label") or "",
                *(
                    interval_cell(r[m])
                    for m in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1", "ac_k2", "ef_k2")
                ),
                *(str(r["counts"][c]) for c in ("scored", "excluded", "unscored", "error")),
                Path(r["bundle"]).name,
            ]
            if rejudged:
                b = r.get("board")
                if b is None or "error" in b:
                    cells += ["—", "—", "—", (b or {}).get("error", "")]
                else:
                    rate, kappa = _agreement(b)
                    flag = flag_text(b)
                    cells += [interval_cell(b["ccs_binary"]), rate, kappa, flag]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
        if t.get("unranked"):
            lines += [
                "Shown apart, not ranked (the board could not confirm them with its own judge or gate):",
                "",
                "| Model | Label | CCS_binary (submitted) | why | bundle |",
                "| --- | --- | --- | --- | --- |",
            ]
            for r in t["unranked"]:
                cells = [
                    r["model"],
                    r.get("label") or "",
                    interval_cell(r["ccs_binary"]),
                    "; ".join(r["unranked"]),
                    Path(r["bundle"]).name,
                ]
                lines.append("| " + " | ".join(_cell(c, 300) for c in cells) + " |")
            lines.append("")
    if board.get("unverified"):
        lines += [
            "## Unverified entries (Hub eval-results files, not re-derived; never ranked)",
            "",
            "| Model | Dataset | Task | Value | Date | Notes | File |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for u in board["unverified"]:
            cells = [
                u["model"],
                u["dataset"],
                u["task_id"],
                str(u["value"]),
                u["date"],
                u["notes"],
                u["file"],
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    if board.get("duplicates"):
        lines += [
            "## Duplicate bundles (listed once)",
            "",
            "| bundle | same as | why |",
            "| --- | --- | --- |",
        ]
        lines += [
            f"| {_cell(Path(d['bundle']).name)} | {_cell(Path(d['same_as']).name)} | "
            f"{_cell(d.get('reason', ''))} |"
            for d in board["duplicates"]
        ]
        lines.append("")
    if board["rejected"]:
        lines += ["## Rejected bundles", "", "| bundle | reason |", "| --- | --- |"]
        lines += [
            f"| {_cell(Path(r['bundle']).name)} | {_cell(r['reason'], 300)} |" for r in board["rejected"]
        ]
    return "\n".join(lines) + "\n"


def _cell(text: str, limit: int = 200) -> str:
    """A markdown table cell: one line, no control characters, pipes escaped."""
    return sanitise(text, limit).replace("¦", "\\|")


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
            "backend",
            "revision",
            "label",
            "bundle",
            *(f"{m}_{p}" for m in METRIC_NAMES for p in ("estimate", "low", "high", "n")),
            "scored",
            "excluded",
            "unscored",
            "error",
            "digest",
            "unranked",
        ]
    )
    for t in board["tracks"]:
        for r in (*t["entries"], *t.get("unranked", ())):
            w.writerow(
                [
                    t["id"],
                    "" if r["rank"] is None else r["rank"],
                    *(r["rank_range"] or ("", "")),
                    csv_text(r["model"]),
                    csv_text(r.get("backend") or ""),
                    csv_text(r.get("revision") or ""),
                    csv_text(r.get("label") or ""),
                    csv_text(r["bundle"]),
                    *(csv_number(r[m][p]) for m in METRIC_NAMES for p in ("estimate", "low", "high", "n")),
                    *(r["counts"][c] for c in ("scored", "excluded", "unscored", "error")),
                    r["digest"],
                    csv_text("; ".join(r.get("unranked") or ())),
                ]
            )
    return buf.getvalue()


def write_board(board: dict[str, Any], out: Path) -> list[Path]:
    """Write the four files, each replaced atomically (a reader never sees half a board)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "leaderboard.md": to_markdown(board),
        "leaderboard.csv": to_csv(board),
        "leaderboard.html": render_html(board),
        "leaderboard.json": json_text(board, indent=2, ensure_ascii=False) + "\n",
    }
    paths = []
    for name, text in files.items():  # leaderboard.json last: it is the one other tools read
        atomic_write(out / name, text)
        paths.append(out / name)
    return paths
