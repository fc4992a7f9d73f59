"""The audit report in a real headless Chromium, opened from file:// with no server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image
from support.audit_runs import HOSTILE_ID, HOSTILE_TEXTS
from support.browser import watched_page

from edct_task.audit.report import write_audit
from edct_task.config import calibration_config, config_from_dict
from edct_task.run.outputs import LoadedRun, load_run
from edct_task.run.runner import run

pytestmark = pytest.mark.slow  # a real browser (Chromium): make test, not make test-fast


@pytest.fixture
def page(browser):
    yield from watched_page(browser, 1280, 900)


def _shown(page) -> int:
    n = int(page.text_content("#shown"))
    assert page.locator("#samples tbody tr").count() == n
    return n


def _failed(values) -> bool:
    return any(v == 0 for v in values)


def test_index_opens_from_file_and_filters_give_the_right_counts(page, report_dir: Path, loaded: LoadedRun):
    records = loaded.records
    page.goto((report_dir / "index.html").as_uri())
    assert _shown(page) == len(records) == 12
    assert page.text_content("#count") == f"Showing {len(records)} of {len(records)} samples"

    domains = sorted({r.sample.domain for r in records})
    statuses = sorted({r.status for r in records})
    assert len(domains) == 3 and statuses == ["excluded", "scored"]  # the fixture run is mixed
    for domain in domains:
        page.select_option("#filter-domain", domain)
        assert _shown(page) == sum(r.sample.domain == domain for r in records)
        for status in statuses:
            page.select_option("#filter-status", status)
            expected = sum(r.sample.domain == domain and r.status == status for r in records)
            assert _shown(page) == expected, (domain, status)
        page.select_option("#filter-status", "")
    page.select_option("#filter-domain", "")
    for status in statuses:
        page.select_option("#filter-status", status)
        assert _shown(page) == sum(r.status == status for r in records)
        assert set(page.locator("#samples tbody tr").evaluate_all("rs => rs.map(r => r.dataset.status)")) == {
            status
        }
    page.select_option("#filter-status", "")

    ac_failed = sum(r.scores is not None and _failed(r.scores.ac) for r in records)
    ef_failed = sum(r.scores is not None and _failed(r.scores.ef) for r in records)
    assert 0 < ac_failed < len(records) and ef_failed > 0
    page.select_option("#filter-failure", "ac")
    assert _shown(page) == ac_failed
    page.select_option("#filter-failure", "ef")
    assert _shown(page) == ef_failed
    page.select_option("#filter-failure", "none")
    assert _shown(page) == sum(
        not (r.scores is not None and (_failed(r.scores.ac) or _failed(r.scores.ef))) for r in records
    )
    page.select_option("#filter-failure", "any")

    page.fill("#filter-text", "spatial-0001")
    assert _shown(page) == 1
    assert page.text_content("#samples tbody tr .sample-link") == "cal-spatial-0001"
    page.fill("#filter-text", "")
    assert _shown(page) == len(records)

    assert not page.errors
    assert all(url.startswith("file://") for url in page.requests), page.requests


def test_index_sorts_by_a_column_with_missing_values_last(page, report_dir: Path, loaded: LoadedRun):
    page.goto((report_dir / "index.html").as_uri())
    header = page.locator("#samples th", has_text="CCS binary")
    header.click()
    header.click()  # descending
    cells = page.locator("#samples tbody tr td.ccs-binary").all_text_contents()
    values = sorted(
        (r.scores.ccs_binary for r in loaded.records if r.scores and r.scores.ccs_binary is not None),
        reverse=True,
    )
    missing = sum(1 for r in loaded.records if not r.scores or r.scores.ccs_binary is None)
    assert cells == [f"{v:.3f}" for v in values] + ["—"] * missing
    assert "▼" in header.text_content()


def _load_all_images(page) -> list[dict]:
    """Scroll every image into view (they load lazily) and report what each one loaded."""
    images = page.locator("main img")
    for i in range(images.count()):
        images.nth(i).scroll_into_view_if_needed()
    page.wait_for_function("Array.from(document.querySelectorAll('main img')).every(i => i.complete)")
    return images.evaluate_all(
        "imgs => imgs.map(i => ({src: i.getAttribute('src'), w: i.naturalWidth, "
        "cls: i.closest('figure').className}))"
    )


def test_a_sample_page_shows_its_images_and_its_verification_numbers(
    page, report_dir: Path, loaded: LoadedRun
):
    position, record = next(
        (i, r) for i, r in enumerate(loaded.records) if any(len(s.attempts) > 1 for s in r.steps)
    )  # a sample with a retried edit: both attempts are shown
    page.goto((report_dir / "index.html").as_uri())
    page.click(f"#samples tbody tr:nth-child({position + 1}) .sample-link")
    assert page.text_content("#sample-id") == record.sample.id

    images = _load_all_images(page)
    attempts = [a for s in record.steps for a in s.attempts]
    checked = [a for a in attempts if a.check is not None]
    # strip: original + one per step; per attempt: before, edited, heatmap, overlay
    assert len(images) == 1 + len(record.steps) + 4 * len(checked)
    assert all(img["w"] > 0 for img in images), images
    assert sum("heatmap" in img["cls"] for img in images) == len(checked)
    assert sum("overlay" in img["cls"] for img in images) == len(checked)

    shown_in = page.locator(".attempt strong.r-in").all_text_contents()
    shown_out = page.locator(".attempt strong.r-out").all_text_contents()
    assert shown_in == [f"{a.check.r_in:.3f}" for a in checked]
    assert shown_out == [f"{a.check.r_out:.3f}" for a in checked]
    assert page.locator("table.attempts td.r-in").all_text_contents() == shown_in
    shares = page.locator(".attempt strong.mask-share").all_text_contents()
    assert shares == [f"{100 * a.check.mask_fraction:.1f}%" for a in checked]
    verdicts = page.locator("table.attempts .attempt-row .badge").all_text_contents()
    assert verdicts == [a.check.verdict for a in checked]

    # a thumbnail opens the full image
    page.locator("#strip img").first.click()
    full = page.locator("#lightbox img")
    page.wait_for_function("document.querySelector('#lightbox img').complete")
    width = full.evaluate("i => i.naturalWidth")
    with Image.open(loaded.image_path(record.sample.image)) as original:
        assert width == original.width  # the full image, not the thumbnail
    assert full.get_attribute("src").endswith(f"img/{record.sample.image}.png")
    page.keyboard.press("Escape")
    assert not page.locator("#lightbox").is_visible()
    assert not page.errors


def test_judge_votes_and_reasons_are_on_the_sample_page(page, report_dir: Path, loaded: LoadedRun):
    position, record = next(
        (i, r) for i, r in enumerate(loaded.records) if r.status == "scored" and r.steps[0].binary is not None
    )
    page.goto((report_dir / "samples" / f"{position + 1:04d}.html").as_uri())
    judged = [s for s in record.steps if s.binary is not None]
    assert page.locator(".ac-reason").all_text_contents() == [s.binary.ac_reason for s in judged]
    assert page.locator(".ef-reason").all_text_contents() == [s.binary.ef_reason for s in judged]
    assert page.locator(".graded-reason").all_text_contents() == [s.graded.reason for s in judged]
    assert page.locator(".requery-answer .text").all_text_contents() == [s.requery.answer for s in judged]
    assert page.text_content(".baseline-explanation .text") == record.baseline.explanation


def test_hostile_model_text_renders_literally_and_runs_nothing(page, hostile_report):
    report, run = hostile_report
    page.goto((report / "index.html").as_uri())
    row = page.locator("#samples tbody tr").first
    assert row.locator(".sample-link").text_content() == HOSTILE_ID
    assert HOSTILE_TEXTS["script"] in row.locator(".question").text_content()
    page.fill("#filter-text", "window.__pwned")
    assert _shown(page) == 1
    row.locator(".sample-link").click()
    page.wait_for_selector("#sample-id")
    assert page.text_content("#sample-id") == HOSTILE_ID
    _load_all_images(page)  # the hostile id renamed the image folder: the images still load

    body = page.text_content("main")
    for text in HOSTILE_TEXTS.values():
        assert text.replace("\u2028", "").replace("\u2029", "") in body.replace("\u2028", "").replace(
            "\u2029", ""
        )
    record = run.records[0]
    assert page.text_content(".baseline-answer .text") == record.baseline.answer
    assert page.locator(".ac-reason").first.text_content() == record.steps[0].binary.ac_reason
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#injected").count() == 0
    assert page.locator("main img[onerror], main script, main b").count() == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 2  # the data and audit.js
    assert page.dialogs == [] and page.errors == []
    assert page.title() == f"EDCT audit: {HOSTILE_ID}"


def test_the_pages_render_under_their_content_security_policy(browser, report_dir: Path):
    context = browser.new_context()
    page = context.new_page()
    messages = []
    page.on("console", lambda m: messages.append(m.text))
    page.goto((report_dir / "index.html").as_uri())
    page.wait_for_selector("#samples tbody tr")
    assert page.locator("#samples tbody tr").count() == 12
    page.goto((report_dir / "samples" / "0001.html").as_uri())
    page.wait_for_selector(".attempt .r-in")
    context.close()
    assert not [m for m in messages if "Content Security Policy" in m], messages


def test_every_panel_vote_is_shown_with_its_reasons(browser, tmp_path: Path):
    base = calibration_config("mixed:0.5", n=3, output_dir=tmp_path / "run").model_dump(mode="json")
    base.update(progress=False, bootstrap_resamples=100)
    base["roles"]["judge"] = [{"backend": "calibration-rules"}, {"backend": "calibration-rules"}]
    base["protocol"]["judge_samples"] = 2
    run(config_from_dict(base))
    loaded = load_run(tmp_path / "run")
    write_audit(loaded, tmp_path / "report")
    record = loaded.records[0]
    votes = [v for s in record.steps for v in s.votes]
    assert len(votes) == 4 * len([s for s in record.steps if s.votes])  # 2 judges x 2 samples per step
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.goto((tmp_path / "report" / "samples" / "0001.html").as_uri())
    rows = page.locator("table.votes tr.vote")
    assert rows.count() == len(votes)
    cells = rows.evaluate_all("rs => rs.map(r => Array.from(r.cells).map(c => c.textContent))")
    for cells_of, vote in zip(cells, votes, strict=True):
        assert cells_of[0] == f"judge {vote.member}" and cells_of[1] == str(vote.sample)
        assert cells_of[3] == vote.binary.ac_reason and cells_of[5] == vote.binary.ef_reason
        assert cells_of[7] == vote.graded.reason
    context.close()


def test_a_sample_whose_target_failed_renders_without_errors(page, run_dir: Path, tmp_path: Path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("cache"))
    lines = (copy / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record.update(status="error", reason="target failed: timeout", baseline=None, concepts=None)
    record.update(instructions=None, steps=[], scores=None)
    lines[0] = json.dumps(record)
    (copy / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_audit(load_run(copy), tmp_path / "report")
    page.goto((tmp_path / "report" / "index.html").as_uri())
    page.select_option("#filter-status", "error")
    assert _shown(page) == 1
    page.click("#samples tbody tr .sample-link")
    page.wait_for_selector("#sample-id")
    assert page.text_content("#reason") == "target failed: timeout"
    assert page.locator("#strip figure").count() == 1 and page.locator(".step").count() == 0
    assert page.errors == []


def test_the_reason_column_is_in_view_and_the_model_is_named(browser, report_dir: Path, loaded: LoadedRun):
    """At 1280 px (a laptop) every column up to the exclusion reason fits without scrolling."""
    for page in watched_page(browser, 1280, 900):
        page.goto((report_dir / "index.html").as_uri())
        headers = page.locator("#samples thead th").all_text_contents()
        assert headers.index("exclusion / reason") == 4  # beside the status
        excluded = page.locator('#samples tbody tr[data-status="excluded"] td.reason').first
        box = excluded.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280
        assert excluded.text_content() == next(r.reason for r in loaded.records if r.status == "excluded")
        assert page.text_content("#model") == "calibration-reference mixed:0.5"
        assert page.title() == "EDCT audit report: calibration-reference mixed:0.5"
        assert not page.errors
