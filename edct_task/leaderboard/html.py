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
"""
_METRICS = (
    ("CCS_binary", "ccs_binary"),
    ("CCS_graded", "ccs_graded"),
    ("AC k=1", "ac_k1"),
    ("EF k=1", "ef_k1"),
    ("AC k=2", "ac_k2"),
    ("EF k=2", "ef_k2"),
)


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def render_html(board: dict[str, Any]) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>EDCT leaderboard</title><style>{_STYLE}</style></head><body>",
        "<h1>EDCT leaderboard</h1>",
        f"<p>Ranked by {_e(board['ranked_by'])} within each setup track (bundles under another "
        "judge, editor, k, thresholds, prompts or dataset are never ranked together). "
        f"Rank range: {_e(board['rank_range'])}. Every entry was verified by recomputing its "
        "metrics from its sample records.</p>",
    ]
    for t in board["tracks"]:
        parts.append(f'<section data-track="{_e(t["id"])}"><h2>Track {_e(t["id"])}</h2>')
        parts.append(f"<p><code>{_e(t['label'])}</code></p>")
        setup = json.dumps(t["setup"], indent=2, ensure_ascii=False)
        parts.append(f"<details><summary>setup</summary><pre>{_e(setup)}</pre></details>")
        head = "".join(f"<th>{_e(n)}</th>" for n, _ in _METRICS)
        parts.append(
            f'<div class="wrap"><table><thead><tr><th>Rank</th><th>Range</th><th class="l">Model</th>{head}'
            '<th>scored</th><th>excluded</th><th class="l">bundle</th></tr></thead><tbody>'
        )
        for r in t["entries"]:
            lo, hi = r["rank_range"]
            span = lo if lo == hi else f"{lo}–{hi}"
            cells = "".join(f'<td class="ci">{_e(interval_cell(r[m]))}</td>' for _, m in _METRICS)
            parts.append(
                f'<tr data-model="{_e(r["model"])}"><td>{_e(r["rank"])}</td><td>{_e(span)}</td>'
                f'<td class="l model">{_e(r["model"])}</td>{cells}<td>{_e(r["counts"]["scored"])}</td>'
                f'<td>{_e(r["counts"]["excluded"])}</td><td class="l" title="{_e(r["digest"])}">'
                f"{_e(Path(r['bundle']).name)}</td></tr>"
            )
        parts.append("</tbody></table></div></section>")
    if board["rejected"]:
        parts.append(
            '<h2>Rejected bundles</h2><table class="rej"><thead><tr><th>bundle</th><th>reason</th></tr>'
            "</thead><tbody>"
        )
        for r in board["rejected"]:
            parts.append(f"<tr><td>{_e(Path(r['bundle']).name)}</td><td>{_e(r['reason'])}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
