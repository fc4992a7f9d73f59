"""The output folder of ``edct attention``.

``attention.json``      every number: settings, memory, the summary and each pair's answers and scores
``summary.md``          the summary and one table row per pair (Markdown)
``overlays/<id>.png``   original | counterfactual, saliency in JET over the image, M outlined in white
``index.html``          the same in the audit report's style (opens from file://; all model and
                        dataset text escaped)
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from edct_task.attention.analyse import SIDES, PairMaps, overlay_png
from edct_task.audit.embed import attribute, text
from edct_task.bench_data.output import write_folder

__all__ = ["ATTENTION_VERSION", "write_attention_folder"]

ATTENTION_VERSION = 1
OVERLAYS = "overlays"


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(ci: dict[str, Any]) -> str:
    if ci["estimate"] is None:
        return "–"
    return f"{ci['estimate']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"


def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def summary_markdown(document: dict[str, Any]) -> str:
    s = document["summary"]
    lines = [
        f"# Attention localization — {document['model']}",
        "",
        f"Layers {document['layers']} · {s['scored_pairs']} of {s['pairs']} pairs scored on both sides "
        f"({s['errors']} errors, {s['no_mask']} without mask M).",
        "",
        "| | localization (mean, 95% CI) |",
        "|---|---|",
        f"| original | {_ci(s['localization']['original'])} |",
        f"| counterfactual | {_ci(s['localization']['counterfactual'])} |",
        f"| counterfactual − original | {_ci(s['difference_counterfactual_minus_original'])} |",
        "",
        f"More localized on the counterfactual in {s['counterfactual_more_localized']} of "
        f"{s['scored_pairs']} pairs. "
        "Localization = share of saliency mass inside M / M's share of the image (1 = spread evenly).",
        "",
        *(
            [
                "| edit type | pairs | original | counterfactual |",
                "|---|---|---|---|",
                *(
                    f"| {kind} | {v['original']['n']} | {_ci(v['original'])} | {_ci(v['counterfactual'])} |"
                    for kind, v in s["by_edit_type"].items()
                ),
                "",
            ]
            if s.get("by_edit_type")
            else []
        ),
        "| pair | answer (original) | answer (counterfactual) | loc. original | loc. counterfactual | note |",
        "|---|---|---|---|---|---|",
    ]
    for p in document["pairs"]:
        o, c = p.get("original") or {}, p.get("counterfactual") or {}
        lines.append(
            "| "
            + " | ".join(
                _md_cell(v)
                for v in (
                    p["id"],
                    o.get("answer", ""),
                    c.get("answer", ""),
                    _fmt(o.get("localization")),
                    _fmt(c.get("localization")),
                    p["error"] or ("" if p["has_mask"] else "no mask M"),
                )
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def summary_html(document: dict[str, Any]) -> str:
    s = document["summary"]
    rows = []
    for p in document["pairs"]:
        o, c = p.get("original") or {}, p.get("counterfactual") or {}
        picture = (
            f'<a href="{attribute(p["overlay"])}"><img src="{attribute(p["overlay"])}" alt="overlay" '
            'style="max-width:420px"></a>'
            if p["overlay"]
            else text(p["error"] or "")
        )
        rows.append(
            "<tr>"
            f"<td>{text(p['id'])}<div class='muted text'>{text(p['question'])}</div></td>"
            f"<td class='text'>{text(o.get('answer', ''))}</td>"
            f"<td class='text'>{text(c.get('answer', ''))}</td>"
            f"<td>{_fmt(o.get('localization'))}</td><td>{_fmt(c.get('localization'))}</td>"
            f"<td>{picture}</td></tr>"
        )
    cards = "".join(
        f"<div><span class='label'>{text(name)}</span><br><b>{text(_ci(ci))}</b></div>"
        for name, ci in (
            ("original", s["localization"]["original"]),
            ("counterfactual", s["localization"]["counterfactual"]),
            ("counterfactual − original", s["difference_counterfactual_minus_original"]),
        )
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Attention localization — {text(document['model'])}</title>"
        "<link rel='stylesheet' href='audit.css'></head><body><main>"
        f"<h1>Attention localization — {text(document['model'])}</h1>"
        f"<p class='muted'>layers {text(document['layers'])} · "
        f"recipe {text(json.dumps(document['recipe']))} · "
        f"{s['scored_pairs']} of {s['pairs']} pairs scored on both sides, {s['errors']} errors, "
        f"{s['no_mask']} without mask M. Localization = saliency mass inside the edit mask M / M's share "
        "of the image (1 = spread evenly); mean with 95% bootstrap CI. Overlays: original | "
        "counterfactual, M outlined in white.</p>"
        f"<div class='card summary'>{cards}</div>"
        "<div class='card'><table><thead><tr><th>pair</th><th>answer (original)</th>"
        "<th>answer (counterfactual)</th><th>loc. original</th><th>loc. counterfactual</th>"
        f"<th>overlay</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        "</main></body></html>\n"
    )


def write_attention_folder(
    out: Path, results: list[PairMaps], document: dict[str, Any], *, overwrite: bool = False
) -> dict[str, Any]:
    """Write the folder (atomically); returns the ``attention.json`` document as written."""

    def write(tmp: Path) -> None:
        (tmp / OVERLAYS).mkdir()
        for r in results:
            if r.error is None and all(s in r.sides for s in SIDES):
                safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in r.pair.id)
                name = f"{OVERLAYS}/{len(document['pairs']):04d}-{safe}.png"
                overlay_png(r).save(tmp / name)
                r.overlay = name
            document["pairs"].append(r.as_dict())
        (tmp / "attention.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        (tmp / "summary.md").write_text(summary_markdown(document), encoding="utf-8")
        (tmp / "index.html").write_text(summary_html(document), encoding="utf-8")
        css = resources.files("edct_task.audit").joinpath("assets/audit.css").read_text(encoding="utf-8")
        (tmp / "audit.css").write_text(css, encoding="utf-8")

    document = {**document, "attention_version": ATTENTION_VERSION, "pairs": []}
    write_folder(out, write, overwrite=overwrite)
    return document
