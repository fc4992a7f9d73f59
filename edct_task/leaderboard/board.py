"""``edct leaderboard``: verify bundles, rank them within their setup track, write the board.

Tracks: bundles whose setup identity (everything but the target: judge(s), extractor, editor,
edit parser, detector, protocol incl. k, thresholds, prompt versions, dataset) is identical.
Different judge, editor, k, thresholds or prompts is a different track; nothing is ranked across
tracks. Within a track entries are ordered by CCS_binary. Every entry answers the same items, so
entries are compared item by item (``scoring.compare``) over the items all of them scored: each
entry's rank interval is the bootstrap's (items resampled, the entries ranked in every resample,
the 2.5 % and 97.5 % quantiles of each entry's ranks), entries whose rank intervals overlap,
transitively, form a tied group, and each pair of entries has its paired difference with a CI and
a sign-flip p-value, Holm-corrected over the track's pairs. (Overlap of two unpaired CIs is not a
test; the board does not use it.)

Entries are named by their verified target (model id, ``@revision`` when pinned, backend); the
submitter's free-text name is shown only as a sanitised label. The same evidence given more than
once is listed once, the others under ``duplicates`` (``drop_duplicates``): the same bundle, the
same records resealed under another name, or records copied with a few texts touched; of two
duplicates the one made first (``bundle.json`` ``created``, then the file's arrival) keeps the entry. Each
track's header names every setup field that differs between tracks, the dataset and its size
included. All intervals use the
board's scoring parameters (``scoring``), never a bundle's.

Known-answer controls: a verified entry whose controls put a text role below the bar
(``Verified.unreliable``, re-derived from the bundle's ``controls.jsonl``) is **unreliable**: it is
listed apart under "Unreliable runs (not ranked)" with its reasons, in no track's ranking, rank
interval, tied group or pairwise table, and is not re-judged. Every ranked entry says what its
controls were (``controls``: ``passed``, ``off``, or ``not run`` for a run made before controls,
which is not the same as unreliable and is ranked).

Writes ``leaderboard.md``, ``.csv``, ``.json``::

    {"tracks": [{"id", "label", "setup": {…}, "differs": {field: value}, "dataset": {digest, n},
                 "entries": [{"bundle", "model", "backend", "revision", "label", "rank",
                              "rank_interval": [best, worst], "group", "ccs_binary": {...}, …,
                              "counts", "digest", ["board": {re-judged numbers}]}],
                 "common_items", "tied_groups": [[model, …], …],
                 "pairwise": [{"a", "b", "difference", "low", "high", "p", "p_holm", "test",
                               "n_paired"}]}],
     "unreliable": [{entry fields, "track", "rank": null, "controls": "below the bar", "reasons"}],
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

import numpy as np
from numpy.typing import NDArray

from edct_task.engine.files import atomic_write, json_text
from edct_task.leaderboard.archive import DEFAULT_LIMITS, Limits
from edct_task.leaderboard.html import flag_text, render_html
from edct_task.leaderboard.identity import (
    NEAR_DUPLICATE_TEXT_SHARE,
    copied_share,
    differing_fields,
    field_value,
    sanitise,
)
from edct_task.leaderboard.verify import DEFAULT_SCORING, BoardScoring, Rejected, Verified, verify_bundle
from edct_task.reporting.setup import setup_label
from edct_task.reporting.tables import interval_cell
from edct_task.scoring.compare import (
    holm,
    p_text,
    pair_records,
    paired_summary,
    rank_intervals,
    tied_groups,
)
from edct_task.scoring.metrics import PRIMARY, metric_names, metrics, sample_value
from edct_task.text_safety import csv_number, csv_text, reveal_line

RANK_METRIC = PRIMARY.name
RANK_INTERVAL_TEXT = (
    f"95% bootstrap rank interval of {PRIMARY.label} over the items every entry of the track scored "
    "(items resampled; ties share the better rank); tied group: entries whose rank intervals overlap, "
    "transitively"
)
PAIRWISE_TEXT = (
    f"paired difference A − B of {PRIMARY.label} over the items both scored: 95% percentile-bootstrap CI "
    "(items resampled), two-sided sign-flip permutation p, Holm-corrected over the track's pairs"
)


UNRELIABLE_TITLE = "Unreliable runs (not ranked)"
UNRELIABLE_TEXT = (
    "a text role (judge, extractor or edit parser) answered its known-answer controls below the bar "
    "(the 95% interval of its accuracy lies wholly below protocol.control_bar): the scores cannot be "
    "trusted, so these entries are verified but never ranked"
)


def controls_status(v: Verified) -> str:
    """``passed``, ``off`` (``protocol.controls: 0``), ``not run`` (a run made before controls, or
    an lmms-eval bundle) or ``below the bar``."""
    from edct_task.scoring.controls import controls_status as status

    return status(v.controls)


def rank_entries(
    entries: Sequence[Verified],
    scoring: BoardScoring = DEFAULT_SCORING,
    board_numbers: dict[str, dict[str, Any]] | None = None,
    *,
    intervals: bool = True,
) -> list[dict[str, Any]]:
    """Entries of one track, best first, with rank (1 = best; ties share) and, with ``intervals``,
    each one's bootstrap rank interval and tied group over the track's common items (the items
    every entry scored; see :func:`common_scores`).

    The rank uses the board's own verified score: the CCS_binary it recomputed from the records,
    or, where it re-judged the entry (``board_numbers``, digest → numbers), its own judge's."""
    rows = []
    for e in entries:
        m = {name: v.model_dump() for name, v in e.summary.overall.metrics.items()}
        own = (board_numbers or {}).get(e.digest)
        rows.append(
            {
                "bundle": str(e.bundle),
                "model": e.model,
                "backend": e.identity.get("backend"),
                "revision": e.identity.get("revision"),
                "label": e.label,
                **{name: m[name] for name in metric_names()},
                "counts": e.summary.overall.counts.model_dump(),
                "digest": e.digest,
                "controls": controls_status(e),
                "_rank_by": own[RANK_METRIC] if own and RANK_METRIC in own else m[RANK_METRIC],
            }
        )

    def est(r: dict[str, Any]) -> float:
        v = r["_rank_by"]["estimate"]
        return -1.0 if v is None else v

    order = sorted(range(len(rows)), key=lambda i: (-est(rows[i]), rows[i]["model"], rows[i]["bundle"]))
    rows = [rows[i] for i in order]
    ranked = [entries[i] for i in order]
    for r in rows:
        r["rank"] = 1 + sum(est(o) > est(r) for o in rows if o is not r)
    for r in rows:
        del r["_rank_by"]
    if not intervals or not rows:
        return rows
    scores = common_scores(ranked)
    found = rank_intervals(scores, n_resamples=scoring.n_resamples, seed=scoring.seed)
    groups = tied_groups(found.low, found.high)
    for number, members in enumerate(groups, 1):
        for i in members:
            rows[i]["rank_interval"] = [int(found.low[i]), int(found.high[i])]
            rows[i]["group"] = number
    return rows


def common_scores(entries: Sequence[Verified]) -> NDArray[np.float64]:
    """Per-item CCS_binary of every entry over the items all of them scored: (items × entries)."""
    per_entry = [
        {r.sample.id: float(v) for r in e.records if (v := sample_value(PRIMARY, r)) is not None}
        for e in entries
    ]
    common = sorted(set.intersection(*(set(p) for p in per_entry))) if per_entry else []
    return np.array([[p[sid] for p in per_entry] for sid in common], dtype=np.float64).reshape(
        len(common), len(per_entry)
    )


def pairwise(entries: Sequence[Verified], scoring: BoardScoring = DEFAULT_SCORING) -> list[dict[str, Any]]:
    """Every pair (A above B in ``entries``' order): the paired difference A − B of CCS_binary over
    the items both scored, its bootstrap CI, the sign-flip p-value and the Holm-corrected p over
    the track's pairs."""
    out = []
    for i, a in enumerate(entries):
        for b in entries[i + 1 :]:
            paired = pair_records(a.records, b.records, RANK_METRIC)
            n, seed = scoring.n_resamples, scoring.seed
            out.append(
                {
                    "a": a.model,
                    "b": b.model,
                    "a_bundle": str(a.bundle),
                    "b_bundle": str(b.bundle),
                    **paired_summary(paired, RANK_METRIC, n_resamples=n, seed=seed),
                }
            )
    for row, adjusted in zip(out, holm([r["p"] for r in out]), strict=True):
        row["p_holm"] = float(adjusted)
    return out


def drop_duplicates(verified: Sequence[Verified]) -> tuple[list[Verified], list[dict[str, str]]]:
    """The distinct entries and the duplicates, each naming the entry it copies.

    Entries are taken in the order they were made (``Verified.created``; on a tie, as a copy
    keeping the original's time has, the order the board received their files, then their digest:
    never the file names), and an entry is a duplicate of an earlier one when it is the
    same bundle (digest), holds the same records under another name (``evidence``), or copies its
    evidence (``identity.copied_share``: every verdict and image the same, at least
    ``NEAR_DUPLICATE_TEXT_SHARE`` of the texts up to spacing, case and zero-width characters; a
    space added to an explanation, samples dropped)."""
    kept: list[Verified] = []
    duplicates: list[dict[str, str]] = []
    owner: dict[tuple[str, str], int] = {}  # (sample id, skeleton fingerprint) → index in kept
    for v in sorted(verified, key=lambda v: (v.created, v.received, v.digest)):
        same = next((k for k in kept if k.digest == v.digest), None)
        reason = "the same bundle"
        if same is None:
            same = next((k for k in kept if k.evidence == v.evidence), None)
            reason = f"the same sample records, resealed as {v.model}"
        if same is None:
            hits: dict[int, int] = {}
            for sample, (skeleton, _) in v.fingerprints.items():
                if (at := owner.get((sample, skeleton))) is not None:
                    hits[at] = hits.get(at, 0) + 1
            for at, _ in sorted(hits.items(), key=lambda h: -h[1]):
                share = copied_share(v.fingerprints, kept[at].fingerprints)
                if share is not None and share >= NEAR_DUPLICATE_TEXT_SHARE:
                    same = kept[at]
                    reason = (
                        f"the same evidence (every verdict and image, {share:.0%} of the texts up to "
                        f"spacing and case), as {v.model}"
                    )
                    break
        if same is not None:
            duplicates.append({"bundle": str(v.bundle), "same_as": str(same.bundle), "reason": reason})
            continue
        for sample, (skeleton, _) in v.fingerprints.items():
            owner.setdefault((sample, skeleton), len(kept))
        kept.append(v)
    return kept, duplicates


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
    for path in bundles:
        result = verify_bundle(path, reference_manifest=reference_manifest, scoring=scoring, limits=limits)
        if isinstance(result, Rejected):
            rejected.append({"bundle": str(path), "reason": result.reason, "code": result.code})
        else:
            verified.append(result)
    verified, duplicates = drop_duplicates(verified)
    apart_unreliable = [v for v in verified if v.unreliable]
    verified = [v for v in verified if not v.unreliable]
    unreliable = []
    for v in apart_unreliable:
        (row,) = rank_entries([v], intervals=False)
        row.update(track=v.track, rank=None, rank_interval=None, group=None, reasons=v.unreliable)
        unreliable.append(row)
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
        kept = [e for e in entries if not (board_numbers.get(e.digest) or {}).get("unranked")]
        rows = rank_entries(kept, scoring, board_numbers if judge else None)
        unranked = rank_entries(apart, intervals=False)
        by_bundle = {str(e.bundle): e for e in kept}
        ranked = [by_bundle[r["bundle"]] for r in rows]
        groups: dict[int, list[str]] = {}
        for row in rows:
            groups.setdefault(row["group"], []).append(row["model"])
        for row in (*rows, *unranked):
            if row["digest"] in board_numbers:
                row["board"] = board_numbers[row["digest"]]
        for row in unranked:
            row["rank"], row["rank_interval"], row["group"] = None, None, None
            row["unranked"] = row["board"]["unranked"]
        out_tracks.append(
            {
                "id": tid,
                "label": setup_label(entries[0].setup),
                "setup": entries[0].setup,
                "dataset": views[tid]["dataset"],
                "differs": {path: field_value(views[tid], path) for path in differs},
                "entries": rows,
                "common_items": int(common_scores(ranked).shape[0]) if ranked else 0,
                "tied_groups": [groups[g] for g in sorted(groups)],
                "pairwise": pairwise(ranked, scoring),
                "unranked": unranked,
            }
        )
    return {
        "tracks": out_tracks,
        "unreliable": unreliable,
        "unreliable_text": UNRELIABLE_TEXT,
        "rejected": rejected,
        "duplicates": duplicates,
        "unverified": list(unverified),
        "ranked_by": RANK_METRIC,
        "rank_interval": RANK_INTERVAL_TEXT,
        "pairwise": PAIRWISE_TEXT,
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


def rank_interval_text(r: dict[str, Any]) -> str:
    """``2`` or ``2–4``: an entry's rank interval."""
    lo, hi = r["rank_interval"]
    return str(lo) if lo == hi else f"{lo}–{hi}"


def difference_text(row: dict[str, Any]) -> str:
    """``+0.120 [+0.083, +0.157]``: a pairwise row's difference and CI."""
    if row["difference"] is None:
        return "—"
    return f"{row['difference']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"


def groups_text(track: dict[str, Any]) -> str:
    """``{a} > {b, c} > {d}``: the tied groups, best first."""
    return " > ".join("{" + ", ".join(g) + "}" for g in track.get("tied_groups", []))


def to_markdown(board: dict[str, Any]) -> str:
    lines = [
        "# EDCT leaderboard",
        "",
        f"Ranked by {board['ranked_by']} within each setup track. Rank interval: {board['rank_interval']}. "
        f"Pairwise: {board['pairwise']}.",
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
            "| Rank | Rank interval | Tied group | Model | Backend | Label | "
            + "".join(f"{m.label} | " for m in metrics())
            + "scored | excluded | unscored | error | bundle | controls |"
            + (f" board {PRIMARY.label} | agreement | κ | flag |" if rejudged else ""),
            "| --- " * (12 + len(metrics()) + (4 if rejudged else 0)) + "|",
        ]
        for r in t["entries"]:
            cells = [
                str(r["rank"]),
                rank_interval_text(r),
                str(r["group"]),
                r["model"],
                r.get("backend") or "",
                r.get("label") or "",
                *(interval_cell(r[m]) for m in metric_names()),
                *(str(r["counts"][c]) for c in ("scored", "excluded", "unscored", "error")),
                Path(r["bundle"]).name,
                r.get("controls") or "",
            ]
            if rejudged:
                b = r.get("board")
                if b is None or "error" in b:
                    cells += ["—", "—", "—", (b or {}).get("error", "")]
                else:
                    rate, kappa = _agreement(b)
                    flag = flag_text(b)
                    cells += [interval_cell(b[RANK_METRIC]), rate, kappa, flag]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
        lines += [
            f"Tied groups (ranks not told apart over the {t['common_items']} common items): "
            + _cell(groups_text(t), 2000),
            "",
        ]
        if t["pairwise"]:
            lines += [
                "| A | B | A − B [95% CI] | p | p (Holm) | items |",
                "| --- | --- | --- | --- | --- | --- |",
            ]
            for pr in t["pairwise"]:
                p, p_holm = p_text(pr["p"], pr["test"], pr["n_resamples"]), p_text(pr["p_holm"], "", 0)
                cells = [pr["a"], pr["b"], difference_text(pr), p, p_holm]
                lines.append("| " + " | ".join(_cell(c) for c in cells) + f" | {pr['n_paired']} |")
        if t.get("unranked"):
            lines += [
                "Shown apart, not ranked (the board could not confirm them with its own judge or gate):",
                "",
                f"| Model | Label | {PRIMARY.label} (submitted) | why | bundle |",
                "| --- | --- | --- | --- | --- |",
            ]
            for r in t["unranked"]:
                cells = [
                    r["model"],
                    r.get("label") or "",
                    interval_cell(r[RANK_METRIC]),
                    "; ".join(r["unranked"]),
                    Path(r["bundle"]).name,
                ]
                lines.append("| " + " | ".join(_cell(c, 300) for c in cells) + " |")
            lines.append("")
    if board.get("unreliable"):
        lines += [
            f"## {UNRELIABLE_TITLE}",
            "",
            f"Verified, but {board.get('unreliable_text', UNRELIABLE_TEXT)}.",
            "",
            f"| Model | Backend | Label | Track | {PRIMARY.label} (not ranked) | why unreliable | bundle |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in board["unreliable"]:
            cells = [
                r["model"],
                r.get("backend") or "",
                r.get("label") or "",
                r["track"],
                interval_cell(r[RANK_METRIC]),
                "; ".join(r["reasons"]),
                Path(r["bundle"]).name,
            ]
            lines.append("| " + " | ".join(_cell(c, 600) for c in cells) + " |")
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
            "rank_low",
            "rank_high",
            "group",
            "model",
            "backend",
            "revision",
            "label",
            "bundle",
            *(f"{m}_{p}" for m in metric_names() for p in ("estimate", "low", "high", "n")),
            "scored",
            "excluded",
            "unscored",
            "error",
            "digest",
            "unranked",
            "controls",
        ]
    )
    rows = [(t["id"], r) for t in board["tracks"] for r in (*t["entries"], *t.get("unranked", ()))]
    rows += [(r["track"], {**r, "unranked": r["reasons"]}) for r in board.get("unreliable", ())]
    for track, r in rows:
        w.writerow(
            [
                track,
                "" if r["rank"] is None else r["rank"],
                *(r["rank_interval"] or ("", "")),
                "" if r["group"] is None else r["group"],
                csv_text(r["model"]),
                csv_text(r.get("backend") or ""),
                csv_text(r.get("revision") or ""),
                csv_text(r.get("label") or ""),
                csv_text(r["bundle"]),
                *(csv_number(r[m][p]) for m in metric_names() for p in ("estimate", "low", "high", "n")),
                *(r["counts"][c] for c in ("scored", "excluded", "unscored", "error")),
                r["digest"],
                csv_text("; ".join(r.get("unranked") or ())),
                r.get("controls") or "",
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
