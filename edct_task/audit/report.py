"""``write_audit``: one run's records as a static HTML report that opens from ``file://``.

The report folder::

    index.html            every sample: domain, status, CCS_binary, CCS_graded, AC/EF per step,
                          exclusion reason; filter (domain, status, AC/EF failure, text) and sort
    samples/NNNN.html     one page per sample: the chain as an image strip, every edit with its
                          instruction, parsed target, attempts (r_in, r_out, mask share, alignment,
                          change heatmap and mask overlay), re-query and every judge vote
    assets/audit.css, assets/audit.js
    img/, thumb/          full images and thumbnails, named by image-store reference
    audit.json            what was written (counts, missing images)

A run whose known-answer controls put a text role below the bar (``scoring.controls``) is
*unreliable*: ``index.html`` opens with an **UNRELIABLE RUN** banner listing the reasons and a
table of the controls, written as static, HTML-escaped markup (it shows without the script), and
``run.controls`` / ``run.unreliable`` in its data say the same.

Pages hold their data as JSON in ``<script type="application/json">`` (``edct_task.audit.embed``)
and ``assets/audit.js`` renders it with ``textContent`` only: model and judge text can never
become markup. Nothing is fetched from the network; the pages need no server.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from edct_task.audit.embed import attribute, script_json_element
from edct_task.audit.images import ImageWriter, Picture
from edct_task.core.records import ChainStep, EditAttempt, SampleRecord
from edct_task.engine.files import atomic_write
from edct_task.run.log import partial_label
from edct_task.scoring.metrics import family
from edct_task.scoring.results import Results
from edct_task.text_safety import reveal_all, reveal_line

__all__ = ["AUDIT_FORMAT_VERSION", "AuditSummary", "RunLike", "sample_page_name", "write_audit"]

AUDIT_FORMAT_VERSION = 1
ASSETS = ("audit.css", "audit.js")
CSP = (
    "default-src 'none'; script-src 'self' file:; style-src 'self' file:; img-src 'self' file: data:; "
    "base-uri 'none'; form-action 'none'"
)
"""Pages run only the report's own script file: no inline script or event handler ever runs, even if
some text were to end up as markup. ``file:`` beside ``'self'`` for browsers whose file pages have
an opaque origin."""


class RunLike(Protocol):
    """What the report needs of a loaded run (``edct_task.run.outputs.LoadedRun``)."""

    records: list[SampleRecord]
    results: dict

    def image_path(self, ref: str) -> Path | None: ...


@dataclass(frozen=True)
class AuditSummary:
    out_dir: Path
    samples: int
    pages: int
    images: int
    missing_images: int
    by_status: dict[str, int]
    partial: str | None = None
    """``run.log.partial_label`` of a merge of some slices only."""

    @property
    def index(self) -> Path:
        return self.out_dir / "index.html"


def sample_page_name(position: int) -> str:
    """File name of the page of the sample at ``position`` (0-based, the run's order)."""
    return f"{position + 1:04d}.html"


def _finite(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _pic(p: Picture | None) -> dict[str, Any] | None:
    return None if p is None else p.as_json()


def _alignment_text(check: Any) -> str:
    a = check.alignment
    if a is None:
        return "off" if not check.params.align else "not run"
    parts = []
    if a.homography_used:
        parts.append(
            f"{a.motion_model or 'homography'} used ({a.n_inliers} inliers, ratio {a.inlier_ratio:.2f}, "
            f"max corner shift {a.max_corner_shift_px:.1f} px)"
        )
    else:
        parts.append("no global warp")
    parts.append(f"flow {'used' if a.flow_used else 'not used'} (mean {a.mean_flow_px:.2f} px)")
    if a.fallback_reason:
        parts.append(a.fallback_reason)
    return "; ".join(parts)


def _attempt_view(attempt: EditAttempt, before_ref: str, images: ImageWriter) -> dict[str, Any]:
    check = attempt.check
    view: dict[str, Any] = {
        "attempt": attempt.attempt + 1,
        "seed": attempt.seed,
        "failure": attempt.failure,
        "resized_from": attempt.resized_from,
        "image": _pic(images.image(attempt.image)),
        "check": None,
        "figures": None,
    }
    if check is not None:
        view["check"] = {
            "passed": check.passed,
            "verdict": check.verdict,
            "r_in": _finite(check.r_in),
            "r_out": _finite(check.r_out),
            "tau_in": check.tau_in,
            "tau_out": check.tau_out,
            "mask_fraction": _finite(check.mask_fraction),
            "edit_type": check.edit_type,
            "target": check.target,
            "searched": check.searched,
            "locator": check.locator,
            "n_boxes": check.n_boxes,
            "alignment": _alignment_text(check),
            "detail": check.detail,
            "maps_stored": check.maps is not None,
        }
        figures = images.gate_figures(check.maps, before_ref)
        if figures is not None:
            view["figures"] = {k: v.as_json() for k, v in figures.items()}
    return view


def _binary_view(b: Any) -> dict[str, Any] | None:
    if b is None:
        return None
    return {
        "ac": b.ac,
        "ef": b.ef,
        "ccs": b.ccs,
        "ac_reason": b.ac_reason,
        "ef_reason": b.ef_reason,
        "note": b.note,
        "error": b.error,
        "raw": b.raw,
    }


def _graded_view(g: Any) -> dict[str, Any] | None:
    if g is None:
        return None
    return {
        "score": _finite(g.score),
        "normalised": _finite(g.normalised),
        "reason": g.reason,
        "error": g.error,
        "raw": g.raw,
    }


def _step_view(step: ChainStep, before_ref: str, images: ImageWriter) -> dict[str, Any]:
    ins = step.instruction
    target = step.edit_target
    return {
        "index": step.index,
        "instruction": ins.model_dump(),
        "edit_target": None
        if target is None
        else {
            "edit_type": target.edit_type,
            "target": target.target,
            "source": target.source,
            "note": target.note,
        },
        "verified": step.verified,
        "image": _pic(images.image(step.image)),
        "before": _pic(images.image(before_ref)),
        "attempts": [_attempt_view(a, before_ref, images) for a in step.attempts],
        "requery": None
        if step.requery is None
        else {"answer": step.requery.answer, "explanation": step.requery.explanation},
        "requery_error": step.requery_error,
        "binary": _binary_view(step.binary),
        "graded": _graded_view(step.graded),
        "votes": [
            {
                "member": v.member,
                "sample": v.sample,
                "binary": _binary_view(v.binary),
                "graded": _graded_view(v.graded),
            }
            for v in step.votes
        ],
    }


def _sample_view(record: SampleRecord, images: ImageWriter) -> dict[str, Any]:
    s = record.sample
    steps = []
    before = s.image
    for step in record.steps:
        steps.append(_step_view(step, before, images))
        if step.image:
            before = step.image
    scores = record.scores
    return {
        "id": s.id,
        "domain": s.domain,
        "status": record.status,
        "reason": record.reason,
        "question": s.question,
        "system_prompt": s.system_prompt,
        "metadata": dict(s.metadata),
        "original": _pic(images.image(s.image)),
        "baseline": None
        if record.baseline is None
        else {"answer": record.baseline.answer, "explanation": record.baseline.explanation},
        "concepts": None
        if record.concepts is None
        else {
            "concepts": list(record.concepts.concepts),
            "error": record.concepts.error,
            "raw": record.concepts.raw,
        },
        "instructions_error": None if record.instructions is None else record.instructions.error,
        "instructions_raw": None if record.instructions is None else record.instructions.raw,
        **{m.name: None if scores is None else _finite(m.value(scores)) for m in family("score")},
        "ac": [] if scores is None else list(scores.ac),
        "ef": [] if scores is None else list(scores.ef),
        "steps": steps,
    }


def _index_row(view: dict[str, Any], page: str) -> dict[str, Any]:
    texts = [view["id"], view["question"], view["reason"] or ""]
    if view["baseline"]:
        texts += [view["baseline"]["answer"], view["baseline"]["explanation"]]
    if view["concepts"]:
        texts += view["concepts"]["concepts"]
    for st in view["steps"]:
        texts += [st["instruction"]["concept"], st["instruction"]["change"]]
        if st["requery"]:
            texts += [st["requery"]["answer"], st["requery"]["explanation"]]
    return {
        "id": view["id"],
        "page": page,
        "domain": view["domain"],
        "status": view["status"],
        "reason": view["reason"],
        "question": view["question"],
        **{m.name: view[m.name] for m in family("score")},
        "ac": view["ac"],
        "ef": view["ef"],
        "steps": len(view["steps"]),
        "thumb": None if view["original"] is None else view["original"]["thumb"],
        "search": "\n".join(t for t in texts if t).lower(),
    }


def _metrics(summary: Results | None) -> dict[str, Any]:
    """Overall estimates of the score metrics (CCS) with their CIs (else empty)."""
    if summary is None:
        return {}
    out: dict[str, Any] = {}
    for name in (m.name for m in family("score")):
        value = summary.overall.metric(name)
        if value is not None:
            out[name] = value.model_dump(include={"estimate", "low", "high", "n"})
    return out


def _run_summary(run: RunLike, source: str) -> dict[str, Any]:
    results = run.results if isinstance(run.results, dict) else {}
    log = getattr(run, "log", None)
    summary: Results | None = log.results if log is not None else None
    if summary is None and run.records:  # lmms-eval output: the overall CCS from the logged samples
        from edct_task.scoring.metrics import summarise

        summary = summarise(list(run.records))
    metrics = _metrics(summary)
    from edct_task.scoring.controls import controls_status, unreliable_reasons

    controls = results.get("controls") if isinstance(results.get("controls"), dict) else None
    return {
        "source": source,
        "kind": getattr(run, "kind", None),
        "model": model_name(results),
        "metrics": _plain(metrics),
        "controls": _plain(controls),
        "controls_status": controls_status(controls),
        "unreliable": [str(r) for r in unreliable_reasons(controls)],
        "partial": partial_label(results),
    }


def partial_banner(summary: dict[str, Any]) -> str:
    """Static, escaped markup for the index page: the PARTIAL RUN banner of an ``edct merge
    --allow-missing`` result (its label names the missing slices); "" for a complete run."""
    from html import escape

    label = summary.get("partial")
    if not label:
        return ""
    return (
        '<section class="unreliable" role="alert"><h2>PARTIAL RUN</h2>'
        f"<p>{escape(reveal_line(str(label)), quote=True)}: the numbers cover only the slices that "
        "were run and are not comparable with complete runs.</p></section>\n"
    )


def controls_banner(summary: dict[str, Any]) -> str:
    """Static, escaped markup for the index page: the UNRELIABLE RUN banner with its reasons and
    the controls' table (role, judge, n, correct, accuracy, 95% CI); "" for a reliable run."""
    from html import escape

    from edct_task.scoring.controls import controls_rows

    reasons = summary.get("unreliable") or []
    if not reasons:
        return ""

    def e(value: Any) -> str:
        return escape(reveal_line(str(value)), quote=True)

    items = "".join(f"<li>{e(r)}</li>" for r in reasons)
    rows = []
    for r in controls_rows(summary.get("controls")):
        ci = "–" if r["ci"] is None else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        acc = "–" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        flag = " below the bar" if r["below_bar"] else ""
        rows.append(
            f"<tr><td>{e(r['role'])}</td><td>{e(r['judge'])}</td><td>{e(r['n'])}</td>"
            f"<td>{e(r['correct'])}</td><td>{e(acc + flag)}</td><td>{e(ci)}</td></tr>"
        )
    table = (
        '<table class="controls"><thead><tr><th>role</th><th>judge</th><th>n</th><th>correct</th>'
        "<th>accuracy</th><th>95% CI</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return (
        '<section class="unreliable" role="alert"><h2>UNRELIABLE RUN</h2>'
        "<p>A text role answered its known-answer controls below the bar: the scores of this run "
        f"cannot be trusted (controls.jsonl has every reply).</p><ul>{items}</ul>{table}</section>\n"
    )


def model_name(results: dict[str, Any]) -> str | None:
    """The target model of a run: lmms-eval's ``pretrained=``-like argument (else ``--model``) of
    an lmms-eval target, or an ``edct run``'s target role (``openai-chat Qwen/Qwen3-VL-8B-Instruct``)."""
    from edct_task.run.lmms_results import model_name_from_args

    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    if isinstance(config.get("model"), str):  # lmms-eval's results file
        args = config.get("model_args")
        if isinstance(args, dict):
            args = ",".join(f"{k}={v}" for k, v in args.items())
        return model_name_from_args(args or "") or config["model"]
    roles = config.get("roles") if isinstance(config.get("roles"), dict) else {}
    target = roles.get("target") if isinstance(roles.get("target"), dict) else None
    if not target:
        return None
    if target.get("backend") == "lmms-eval" and isinstance(target.get("model"), str):  # loop or export
        return model_name_from_args(str(target.get("model_args") or "")) or target["model"]
    detail = target.get("model") or target.get("behavior") or target.get("pretrained")
    return f"{target.get('backend', '?')}" + (f" {detail}" if detail else "")


def _plain(value: Any) -> Any:
    """JSON-safe copy (non-finite floats → None)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _page(kind: str, title: str, data: dict[str, Any], asset_prefix: str, banner: str = "") -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{attribute(CSP)}">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{attribute(reveal_line(title))}</title>\n"
        f'<link rel="stylesheet" href="{asset_prefix}assets/audit.css">\n'
        "</head>\n"
        f'<body data-page="{attribute(kind)}">\n'
        '<noscript><p class="noscript">This report needs JavaScript to show its data '
        "(it runs locally; nothing is fetched).</p></noscript>\n"
        f"{banner}"
        '<main id="app"></main>\n'
        f"{script_json_element('edct-data', reveal_all(data))}\n"
        f'<script src="{asset_prefix}assets/audit.js"></script>\n'
        "</body>\n</html>\n"
    )


def write_audit(run: RunLike, out_dir: Path, *, source: str = "") -> AuditSummary:
    """Write the audit report of ``run`` into ``out_dir`` (created; existing report files replaced).

    Parameters
    ----------
    run : LoadedRun
        The run's records, results and image paths.
    out_dir : Path
        The report folder.
    source : str
        How to name the run in the report (its folder, usually).

    Returns
    -------
    AuditSummary
    """
    out_dir = Path(out_dir)
    (out_dir / "samples").mkdir(parents=True, exist_ok=True)
    (out_dir / "assets").mkdir(parents=True, exist_ok=True)
    images = ImageWriter(out_dir, run.image_path)
    package = resources.files("edct_task.audit") / "assets"
    for name in ASSETS:
        with resources.as_file(package / name) as src:
            shutil.copyfile(src, out_dir / "assets" / name)

    records = list(run.records)
    views = [_sample_view(r, images) for r in records]
    pages = [sample_page_name(i) for i in range(len(views))]
    rows = [_index_row(v, f"samples/{p}") for v, p in zip(views, pages, strict=True)]
    summary = _run_summary(run, source)
    columns = [{"key": m.name, "label": m.label.replace("_", " ")} for m in family("score")]
    for i, (view, page) in enumerate(zip(views, pages, strict=True)):
        nav = {
            "index": "../index.html",
            "prev": pages[i - 1] if i > 0 else None,
            "next": pages[i + 1] if i + 1 < len(pages) else None,
            "position": i + 1,
            "total": len(pages),
        }
        data = {"run": {"source": source}, "sample": view, "nav": nav, "prefix": "../", "scores": columns}
        atomic_write(out_dir / "samples" / page, _page("sample", f"EDCT audit: sample {i + 1}", data, "../"))
    by_status = dict(Counter(r.status for r in records))
    atomic_write(
        out_dir / "index.html",
        _page(
            "index",
            "EDCT audit report"
            + (" (PARTIAL RUN)" if summary["partial"] else "")
            + (" (UNRELIABLE RUN)" if summary["unreliable"] else ""),
            {"run": summary, "rows": rows, "by_status": by_status, "scores": columns},
            "",
            partial_banner(summary) + controls_banner(summary),
        ),
    )
    written = sum(1 for p in (out_dir / "img").iterdir() if p.suffix in (".png", ".jpg"))
    manifest = {
        "format_version": AUDIT_FORMAT_VERSION,
        "source": source,
        "samples": len(records),
        "by_status": by_status,
        "partial": summary["partial"],
        "images": written,
        "missing_images": sorted(set(images.missing)),
    }
    atomic_write(out_dir / "audit.json", json.dumps(manifest, indent=2) + "\n")
    return AuditSummary(
        out_dir=out_dir,
        samples=len(records),
        pages=len(pages),
        images=written,
        missing_images=len(set(images.missing)),
        by_status=by_status,
        partial=summary["partial"],
    )
