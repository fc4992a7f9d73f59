"""The audit report of a 300-sample, k = 2 calibration run: cost to write, size, and opening it.

Runs the calibration benchmark (``mixed:0.5`` with a background-spill editor, so samples are
scored, excluded and retried), writes its audit report, then opens the index and one sample page
in Debian's chromium from ``file://`` and measures what the browser loads. The figures that
matter are ratios: how much of the run's image bytes the index loads (thumbnails), and the time
to a rendered index relative to the time to write the report.

    python benchmarks/bench_audit.py [--samples 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.browser import CHROMIUM, CHROMIUM_ARGS

from edct_task.audit.report import write_audit
from edct_task.config import calibration_config
from edct_task.run.outputs import image_files, load_run
from edct_task.run.runner import run


def _folder_bytes(path: Path, pattern: str = "*", *, own: bool = False) -> int:
    """Bytes of the files under ``path``; ``own``: only files not hard-linked from elsewhere."""
    files = [p for p in path.rglob(pattern) if p.is_file()]
    return sum(p.stat().st_size for p in files if not own or p.stat().st_nlink == 1)


def _open(page, url: str) -> dict[str, float]:
    """Load ``url``; time to rendered content and bytes of every image the page loaded."""
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    page.wait_for_function("document.querySelector('main').children.length > 0")
    rendered = time.perf_counter() - start
    page.wait_for_function(  # images below the fold load lazily, when scrolled to
        "Array.from(document.images).filter(i => i.getBoundingClientRect().top < innerHeight)"
        ".every(i => i.complete)"
    )
    loaded = time.perf_counter() - start
    # file:// loads report no sizes in resource timing: add up the files of the images it loaded
    srcs = page.evaluate(
        "Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).map(i => i.src)"
    )
    image_bytes = sum(Path(unquote(urlparse(s).path)).stat().st_size for s in srcs)
    n_images = page.evaluate("document.images.length")
    return {
        "rendered_s": rendered,
        "images_loaded_s": loaded,
        "images": n_images,
        "images_loaded": len(srcs),
        "image_bytes": image_bytes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        config = calibration_config(
            "mixed:0.5", n=args.samples, output_dir=run_dir, degradation={"spill": 0.3}
        )
        t0 = time.perf_counter()
        run(config.model_copy(update={"progress": False}))
        run_s = time.perf_counter() - t0
        loaded = load_run(run_dir)
        run_image_bytes = sum(
            loaded.image_path(ref).stat().st_size
            for r in loaded.records
            for name, ref in image_files(r).items()
            if not name.endswith("_maps.png")
        )
        report = Path(tmp) / "report"
        t0 = time.perf_counter()
        summary = write_audit(loaded, report)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        write_audit(loaded, report)  # again into the same folder: images are kept
        rewrite_s = time.perf_counter() - t0
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
            index = _open(page, (report / "index.html").as_uri())
            page.select_option("#filter-status", "excluded")
            t0 = time.perf_counter()
            page.fill("#filter-text", "ball")
            filter_s = time.perf_counter() - t0
            sample = _open(page, (report / "samples" / "0001.html").as_uri())
            browser.close()
        maps_bytes = _folder_bytes(run_dir / "images", "*_maps.png")
        figures = {
            "samples": summary.samples,
            "by_status": summary.by_status,
            "run_s": round(run_s, 2),
            "write_report_s": round(write_s, 2),
            "rewrite_report_s": round(rewrite_s, 2),
            "report_bytes": _folder_bytes(report),
            "report_own_bytes": _folder_bytes(report, own=True),
            "thumbs": len(list((report / "thumb").iterdir())),
            "index_html_bytes": (report / "index.html").stat().st_size,
            "thumb_bytes": _folder_bytes(report / "thumb"),
            "run_image_bytes": run_image_bytes,
            "gate_maps_bytes": maps_bytes,
            "gate_maps_share_of_run_images": round(maps_bytes / run_image_bytes, 4),
            "index": {k: round(v, 3) if isinstance(v, float) else v for k, v in index.items()},
            "index_image_bytes_share_of_run_images": round(index["image_bytes"] / run_image_bytes, 4),
            "filter_s": round(filter_s, 3),
            "sample_page": {k: round(v, 3) if isinstance(v, float) else v for k, v in sample.items()},
        }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
