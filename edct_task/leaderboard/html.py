"""The static leaderboard page: one self-contained HTML file, no script, every value escaped.

Model names, bundle names, setup fields and rejection reasons come from submitted files, so each
is passed through ``html.escape`` (quotes included) before it reaches text or an attribute.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from edct_task.reporting.tables import interval_cell
from edct_task.scoring.compare import p_text
from edct_task.scoring.metrics import PRIMARY, metrics
from edct_task.text_safety import reveal

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}
td.l,th.l{text-align:left}
td.ci{white-space:nowrap;font-variant-numeric:tabular-nums;font-size:.85rem}
td.model{overflow-wrap:anywhere;min-width:12rem;max-width:22rem}
.wrap{overflow-x:auto}
caption{text-align:left;font-weight:600;padding:.25rem 0}
pre{background:#f6f6f6;padding:.5rem;overflow:auto;max-height:20rem}
.rej td{text-align:left}
td,th,code,pre,bdi{unicode-bidi:isolate}
"""


def _e(value: Any) -> str:
    """A value for an attribute or inside markup this module wrote: controls shown, escaped."""
    return escape(reveal(value), quote=True)


def _t(value: Any) -> str:
    """A value from a submitted file as text: controls shown, escaped, its direction isolated."""
    return f"<bdi>{_e(value)}</bdi>"


def flag_text(board: dict[str, Any]) -> str:
    """What the board's own judge and gate flag about an entry ("" when nothing)."""
    flags = []
    if board.get("flagged"):
        flags.append("CLAIM OUTSIDE BOARD CI")
    if board.get("gate_flagged"):
        flags.append(f"GATE DISAGREES ({board['gate_agreement']['disagreements']} edit(s))")
    return "; ".join(flags)


def _agreement(board: dict[str, Any]) -> str:
    a = board["agreement"]
    rate = "—" if a["rate"] is None else f"{a['rate']:.3f} ({a['steps']} steps)"
    kappa = "—" if a["kappa"] is None else f"{a['kappa']:.3f}"
    return f"{rate}, κ {kappa}"


def _pairwise_html(track: dict[str, Any]) -> str:
    """The track's tied groups and its pairwise table (paired differences, Holm-corrected p)."""
    groups = " &gt; ".join(
        "{" + ", ".join(_t(m) for m in members) + "}" for members in track.get("tied_groups", [])
    )
    parts = [
        f'<p class="groups">Tied groups (ranks not told apart over the {_e(track.get("common_items"))} '
        f"common items): {groups}</p>"
    ]
    rows = track.get("pairwise") or []
    if rows:
        parts.append(
            '<div class="wrap"><table class="pairwise"><caption>Pairwise: paired difference A − B of '
            f"{_e(PRIMARY.label)}, 95% CI, sign-flip p, Holm-corrected p</caption><thead><tr>"
            '<th class="l">A</th><th class="l">B</th><th>A − B [95% CI]</th><th>p</th><th>p (Holm)</th>'
            "<th>items</th></tr></thead><tbody>"
        )
        for r in rows:
            diff = (
                "—"
                if r["difference"] is None
                else f"{r['difference']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]"
            )
            parts.append(
                f'<tr><td class="l model">{_t(r["a"])}</td><td class="l model">{_t(r["b"])}</td>'
                f'<td class="ci">{_e(diff)}</td><td>{_e(p_text(r["p"], r["test"], r["n_resamples"]))}</td>'
                f"<td>{_e(p_text(r['p_holm'], '', 0))}</td>"
                f"<td>{_e(r['n_paired'])}</td></tr>"
            )
        parts.append("</tbody></table></div>")
    return "".join(parts)


def render_html(board: dict[str, Any]) -> str:
    scoring = board.get("scoring") or {}
    rejudged = bool(board.get("rejudged"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>EDCT leaderboard</title><style>{_STYLE}</style></head><body>",
        "<h1>EDCT leaderboard</h1>",
        f"<p>Ranked by {_e(board['ranked_by'])} within each setup track (bundles under another "
        "judge, editor, k, thresholds, prompts or dataset are never ranked together). "
        f"Rank interval: {_e(board['rank_interval'])}. Pairwise: {_e(board['pairwise'])}. "
        "Every entry was verified by re-deriving it from its "
        "raw evidence: verdicts re-parsed from the stored judge replies, sample scores from the steps, "
        "statuses from the recorded gate numbers; intervals are the board's own"
        + (
            f" ({_e(scoring.get('method'))}, {_e(scoring.get('n_resamples'))} resamples, seed "
            f"{_e(scoring.get('seed'))})"
            if scoring
            else ""
        )
        + ". Models are named by their verified target; labels are the submitters' own.</p>",
    ]
    for t in board["tracks"]:
        parts.append(f'<section data-track="{_e(t["id"])}"><h2>Track {_e(t["id"])}</h2>')
        dataset = t.get("dataset") or {}
        parts.append(
            f"<p><code>{_t(t['label'])}</code> · dataset <code>{_e(str(dataset.get('digest'))[:12])}</code> "
            f"({_e(dataset.get('n'))} samples)</p>"
        )
        if t.get("differs"):
            items = "".join(
                f"<li><code>{_e(k)}</code> = <code>{_e(json.dumps(v, ensure_ascii=False))}</code></li>"
                for k, v in t["differs"].items()
            )
            parts.append(f"<p>Differs from the other tracks in:</p><ul>{items}</ul>")
        setup = json.dumps(t["setup"], indent=2, ensure_ascii=False)
        parts.append(f"<details><summary>setup</summary><pre>{_e(setup)}</pre></details>")
        head = "".join(f"<th>{_e(m.label)}</th>" for m in metrics())
        extra = f"<th>board {_e(PRIMARY.label)}</th><th>agreement</th><th>flag</th>" if rejudged else ""
        parts.append(
            '<div class="wrap"><table><thead><tr><th>Rank</th><th>Rank interval</th><th>Tied group</th>'
            '<th class="l">Model</th>'
            '<th class="l">Backend</th>'
            f'<th class="l">Label</th>{head}<th>scored</th><th>excluded</th><th>unscored</th><th>error</th>'
            f'<th class="l">bundle</th><th class="l">controls</th>{extra}'
            "</tr></thead><tbody>"
        )
        for r in t["entries"]:
            lo, hi = r["rank_interval"]
            span = lo if lo == hi else f"{lo}–{hi}"
            cells = "".join(f'<td class="ci">{_e(interval_cell(r[m.name]))}</td>' for m in metrics())
            board_cells = ""
            if rejudged:
                b = r.get("board")
                board_cells = (
                    f"<td>—</td><td>—</td><td>{_e((b or {}).get('error', ''))}</td>"
                    if b is None or "error" in b
                    else f"<td>{_e(interval_cell(b[PRIMARY.name]))}</td><td>{_e(_agreement(b))}</td>"
                    f"<td>{_e(flag_text(b))}</td>"
                )
            parts.append(
                f'<tr data-model="{_e(r["model"])}"><td>{_e(r["rank"])}</td><td>{_e(span)}</td>'
                f"<td>{_e(r['group'])}</td>"
                f'<td class="l model">{_t(r["model"])}</td><td class="l">{_e(r.get("backend") or "")}</td>'
                f'<td class="l">{_t(r.get("label") or "")}</td>{cells}<td>{_e(r["counts"]["scored"])}</td>'
                f"<td>{_e(r['counts']['excluded'])}</td><td>{_e(r['counts']['unscored'])}</td>"
                f'<td>{_e(r["counts"]["error"])}</td><td class="l" title="{_e(r["digest"])}">'
                f'{_t(Path(r["bundle"]).name)}</td><td class="l">{_e(r.get("controls") or "")}</td>'
                f"{board_cells}</tr>"
            )
        parts.append("</tbody></table></div>")
        parts.append(_pairwise_html(t))
        if t.get("unranked"):
            parts.append(
                "<h3>Shown apart, not ranked</h3><p>The board could not confirm these entries with its "
                'own judge or gate.</p><table class="rej"><thead><tr><th class="l">Model</th>'
                f'<th class="l">Label</th><th>{_e(PRIMARY.label)} (submitted)</th><th class="l">why</th>'
                '<th class="l">bundle</th></tr></thead><tbody>'
            )
            for r in t["unranked"]:
                parts.append(
                    f'<tr data-model="{_e(r["model"])}"><td class="l">{_t(r["model"])}</td>'
                    f'<td class="l">{_t(r.get("label") or "")}</td>'
                    f"<td>{_e(interval_cell(r[PRIMARY.name]))}</td>"
                    f'<td class="l">{_t("; ".join(r["unranked"]))}</td>'
                    f'<td class="l">{_t(Path(r["bundle"]).name)}</td></tr>'
                )
            parts.append("</tbody></table>")
        parts.append("</section>")
    if board.get("unreliable"):
        parts.append(
            '<section class="unreliable"><h2>Unreliable runs (not ranked)</h2><p>Verified, but '
            f"{_e(board.get('unreliable_text', ''))}.</p>"
            '<table class="rej"><thead><tr><th class="l">Model</th><th class="l">Backend</th>'
            f'<th class="l">Label</th><th class="l">Track</th><th>{_e(PRIMARY.label)} (not ranked)</th>'
            '<th class="l">why unreliable</th><th class="l">bundle</th></tr></thead><tbody>'
        )
        for r in board["unreliable"]:
            reasons = "".join(f"<li>{_t(line)}</li>" for line in r["reasons"])
            parts.append(
                f'<tr data-model="{_e(r["model"])}"><td class="l">{_t(r["model"])}</td>'
                f'<td class="l">{_e(r.get("backend") or "")}</td>'
                f'<td class="l">{_t(r.get("label") or "")}</td><td class="l">{_e(r["track"])}</td>'
                f"<td>{_e(interval_cell(r[PRIMARY.name]))}</td>"
                f'<td class="l"><ul>{reasons}</ul></td>'
                f'<td class="l">{_t(Path(r["bundle"]).name)}</td></tr>'
            )
        parts.append("</tbody></table></section>")
    if board.get("unverified"):
        parts.append(
            "<h2>Unverified entries</h2><p>Hub eval-results files: numbers as written, not re-derived, "
            'never ranked.</p><table class="rej"><thead><tr><th>model</th><th>dataset</th><th>task</th>'
            "<th>value</th><th>date</th><th>notes</th><th>file</th></tr></thead><tbody>"
        )
        for u in board["unverified"]:
            keys = ("model", "dataset", "task_id", "value", "date", "notes", "file")
            parts.append("<tr>" + "".join(f"<td>{_e(u[k])}</td>" for k in keys) + "</tr>")
        parts.append("</tbody></table>")
    if board.get("duplicates"):
        parts.append(
            '<h2>Duplicate bundles (listed once)</h2><table class="rej"><thead><tr><th>bundle</th>'
            "<th>same as</th><th>why</th></tr></thead><tbody>"
        )
        for d in board["duplicates"]:
            parts.append(
                f"<tr><td>{_e(Path(d['bundle']).name)}</td><td>{_e(Path(d['same_as']).name)}</td>"
                f"<td>{_t(d.get('reason', ''))}</td></tr>"
            )
        parts.append("</tbody></table>")
    if board["rejected"]:
        parts.append(
            '<h2>Rejected bundles</h2><table class="rej"><thead><tr><th>bundle</th><th>reason</th></tr>'
            "</thead><tbody>"
        )
        for r in board["rejected"]:
            parts.append(f"<tr><td>{_t(Path(r['bundle']).name)}</td><td>{_t(r['reason'])}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
