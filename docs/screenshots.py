"""Screenshots for the docs site (docs/img/*.png): the audit report, the annotation page, the
leaderboard and the demo's Fig. 5.

Builds a small calibration run (k = 2, mixed outcomes), writes its audit report, serves the
annotation app for it, builds a leaderboard of three bundles, runs a small `edct demo` for its
report's Fig. 5 (SVG), and photographs the five pages with Debian's chromium through Playwright
(its path and flags: tests/support/browser.py).

    python docs/screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.audit_runs import calibration_run
from support.browser import CHROMIUM, CHROMIUM_ARGS
from support.edct_runs import records, write_edct_run

from edct_task.annotation.app import AnnotationSession, create_app
from edct_task.annotation.interventions import draw, judgeable_interventions
from edct_task.annotation.labels import LabelChoice, LabelLog
from edct_task.annotation.server import serving
from edct_task.audit.report import write_audit
from edct_task.cli.main import main as edct
from edct_task.run.outputs import load_run

WIDTH = 1280


def _save_small(png: bytes, path: Path, max_height: int) -> None:
    """Crop to ``max_height``, reduce to a 128-colour palette: README images of ~100 kB."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    if image.height > max_height:
        image = image.crop((0, 0, image.width, max_height))
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path}: {image.width}×{image.height}, {path.stat().st_size / 1024:.0f} KiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "img")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = calibration_run(Path(tmp) / "runs" / "calibration-mixed")
        loaded = load_run(run_dir)
        write_audit(loaded, Path(tmp) / "audit", source="runs/calibration-mixed")
        population = judgeable_interventions(loaded.records)
        log = LabelLog(Path(tmp) / "alice.jsonl", "alice")
        drawn = draw(population, 16, 0)
        for item in drawn[:5]:  # a session under way
            log.append(LabelChoice(intervention=item.id, edit_valid="valid", ac=1, ef=1))
        session = AnnotationSession("runs/calibration-mixed", drawn, log, loaded.image_path, 16, 0)
        retried = next(
            i
            for i, r in enumerate(loaded.records)
            if any(len(s.attempts) > 1 for s in r.steps) and r.steps[0].binary
        )
        with sync_playwright() as p, serving(create_app(session)) as url:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": WIDTH, "height": 900}, bypass_csp=True)
            page.goto((Path(tmp) / "audit" / "index.html").as_uri())
            page.select_option("#filter-domain", "knowledge")
            _save_small(page.screenshot(full_page=True), args.out / "audit-index.png", 900)
            page.goto((Path(tmp) / "audit" / "samples" / f"{retried + 1:04d}.html").as_uri())
            page.evaluate("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
            page.wait_for_function("Array.from(document.querySelectorAll('img')).every(i => i.complete)")
            _save_small(page.screenshot(full_page=True), args.out / "audit-sample.png", 1500)
            page.set_viewport_size({"width": WIDTH, "height": 1000})
            page.goto(url + "/")
            page.wait_for_function(
                "document.body.dataset.ready === '1' && document.body.dataset.pending === '0'"
            )
            page.keyboard.press("v")
            page.keyboard.press("1")
            page.wait_for_function("document.body.dataset.pending === '0'")
            page.wait_for_function(
                "['img-before', 'img-after'].every(i => document.getElementById(i).complete)"
            )
            _save_small(page.screenshot(full_page=True), args.out / "annotate.png", 1100)
            board = _leaderboard(Path(tmp) / "board")
            page.set_viewport_size({"width": 1600, "height": 700})
            page.goto(board.as_uri())
            widest = "Math.max(...[...document.querySelectorAll('table')].map(t => t.scrollWidth))"
            wide = page.evaluate(widest)  # every column of the table in view
            page.set_viewport_size({"width": max(1600, wide + 80), "height": 700})
            _save_small(page.screenshot(full_page=True), args.out / "leaderboard.png", 700)
            figure = _demo_fig5(Path(tmp) / "demo")
            page.set_viewport_size({"width": 1100, "height": 700})
            page.goto(figure.as_uri())
            page.wait_for_function("document.querySelector('img').complete")
            _save_small(page.locator("img").screenshot(), args.out / "fig5.png", 900)
            browser.close()
    return 0


def _demo_fig5(out: Path) -> Path:
    """Fig. 5 of a small demo (the four reference models on 24 calibration samples), as SVG."""
    assert edct(["demo", "-n", "24", "--no-progress", "--output", str(out)]) == 0
    page = out / "report" / "fig5.html"  # an SVG document photographs poorly: shown as an image
    page.write_text(
        '<!doctype html><body style="margin:0;background:#fff">'
        '<img src="fig5_ccs_vs_benchmarks.svg" style="width:1000px"></body>'
    )
    return page


def _leaderboard(root: Path) -> Path:
    """Three verified bundles of one setup track (constructed records, no model run)."""
    models = {"Qwen/Qwen3-VL-8B-Instruct": 0.62, "OpenGVLab/InternVL3-8B": 0.55, "org/small-vl-2b": 0.31}
    bundles = []
    for i, (model, level) in enumerate(models.items()):
        run = root / f"run{i}"
        write_edct_run(run, records(level, n=40), target={"backend": "openai-chat", "model": model})
        bundles.append(str(root / f"m{i}.edct.zip"))
        assert edct(["submit", str(run), "--output", bundles[-1]]) == 0
    assert edct(["leaderboard", *bundles, "--output", str(root / "out")]) == 0
    return root / "out" / "leaderboard.html"


if __name__ == "__main__":
    sys.exit(main())
