"""The annotation page in a real headless Chromium against the real uvicorn server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.audit_runs import HOSTILE_ID, HOSTILE_TEXTS, make_hostile
from support.browser import watched_page
from support.hang_guard import hang_limit

from edct_task.annotation.app import AnnotationSession, create_app
from edct_task.annotation.interventions import draw, judgeable_interventions
from edct_task.annotation.labels import LabelLog
from edct_task.annotation.server import serving
from edct_task.run.outputs import LoadedRun, load_run

pytestmark = pytest.mark.slow  # a real browser and the app server: make test, not make test-fast


def _session(loaded: LoadedRun, labels: Path, items=None, n: int = 8) -> AnnotationSession:
    population = items if items is not None else judgeable_interventions(loaded.records)
    return AnnotationSession(
        "run", draw(population, n, 0), LabelLog(labels, "alice"), loaded.image_path, n, 0
    )


@pytest.fixture
def page(browser):
    yield from watched_page(browser, 1400, 1000)


def _settled(page, position: int) -> None:
    """Wait until intervention ``position`` (1-based) is shown and no request is in flight."""
    try:
        page.wait_for_function(
            "p => document.body.dataset.pending === '0' && "
            "document.getElementById('position').textContent === String(p)",
            arg=position,
            timeout=hang_limit(10) * 1000,
        )
    except Exception as exc:
        state = page.evaluate(
            "[document.body.dataset.pending, document.getElementById('position').textContent, "
            "document.getElementById('hint').textContent]"
        )
        raise AssertionError(f"intervention {position} not shown: pending, position, hint = {state}") from exc


def _press(page, keys: str, then_position: int) -> None:
    for key in keys:
        page.keyboard.press(key)
    _settled(page, then_position)


KEYED = [  # keys pressed → the label they give
    ("v13", ("valid", 1, 1)),
    ("i", ("invalid", None, None)),
    ("n", ("not_assessable", None, None)),
    ("v24", ("valid", 0, 0)),
    ("v14", ("valid", 1, 0)),
]


def test_five_keyboard_labels_then_reload_resumes_at_the_sixth(page, loaded: LoadedRun, tmp_path: Path):
    labels = tmp_path / "alice.jsonl"
    session = _session(loaded, labels)
    ids = [i.id for i in session.draw]
    with serving(create_app(session)) as url:
        page.goto(url + "/")
        _settled(page, 1)
        assert page.text_content("#annotator") == "alice"
        assert page.text_content("#progress-text") == "0 / 8 labelled"
        page.wait_for_function(
            "['img-before', 'img-after'].every(id => document.getElementById(id).complete)"
        )
        sizes = page.eval_on_selector_all("#img-before, #img-after", "imgs => imgs.map(i => i.naturalWidth)")
        assert sizes[0] > 0 and sizes[1] > 0, sizes

        page.keyboard.press("1")  # AC before the edit is marked valid: refused, nothing written
        assert "press V first" in page.text_content("#hint")
        assert not labels.exists()

        for k, (keys, _) in enumerate(KEYED):
            assert page.text_content("#intervention-id") == ids[k]
            _press(page, keys, k + 2)
        assert page.text_content("#progress-text") == "5 / 8 labelled"
        latest = LabelLog(labels, "alice").latest
        assert {iid: (lab.edit_valid, lab.ac, lab.ef) for iid, lab in latest.items()} == {
            ids[k]: want for k, (_, want) in enumerate(KEYED)
        }
        assert len(labels.read_text().splitlines()) == sum(len(keys) for keys, _ in KEYED)
        for line in labels.read_text().splitlines():
            assert list(json.loads(line)) == ["intervention", "annotator", "edit_valid", "ac", "ef", "time"]

        page.reload()
        _settled(page, 6)
        assert page.text_content("#intervention-id") == ids[5]
        assert page.text_content("#progress-text") == "5 / 8 labelled"
        _press(page, "v13", 7)
        assert len(LabelLog(labels, "alice").latest) == 6

        page.keyboard.press("ArrowLeft")  # back to the sixth: its label is shown
        _settled(page, 6)
        assert page.get_attribute("#btn-valid", "aria-pressed") == "true"
        assert page.get_attribute("#btn-ac1", "aria-pressed") == "true"
        assert page.get_attribute("#btn-ef0", "aria-pressed") == "false"
        page.keyboard.press("4")  # change EF: one more line, the last one wins
        page.wait_for_function("document.body.dataset.pending === '0'")
        assert LabelLog(labels, "alice").latest[ids[5]].ef == 0

        page.keyboard.press("t")  # flip view: one image at a time
        assert page.is_visible("#pane-before") and not page.is_visible("#pane-after")
        page.keyboard.press("t")
        assert page.is_visible("#pane-after") and not page.is_visible("#pane-before")
        page.keyboard.press("s")
        assert page.is_visible("#pane-before") and page.is_visible("#pane-after")
        page.keyboard.press("+")
        assert page.text_content("#zoom-level") == "125%"
    assert page.errors == [] and page.dialogs == []


def test_the_page_never_shows_edcts_verdicts(page, loaded: LoadedRun, tmp_path: Path):
    session = _session(loaded, tmp_path / "a.jsonl", n=3)
    with serving(create_app(session)) as url:
        page.goto(url + "/")
        _settled(page, 1)
        for k, iv in enumerate(session.draw):
            if k:
                _press(page, "ArrowRight", k + 1)
            text = page.text_content("body")
            assert iv.step.requery.answer in text
            if iv.step.binary is not None:
                assert iv.step.binary.ac_reason not in text and iv.step.binary.ef_reason not in text
            for word in ("r_in", "r_out", "verified", "scored", "CCS"):
                assert word not in text


def test_hostile_text_on_the_annotation_page_is_shown_literally(page, run_dir: Path, tmp_path: Path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("cache"))
    make_hostile(copy)
    loaded = load_run(copy)
    hostile = [i for i in judgeable_interventions(loaded.records) if i.record.sample.id == HOSTILE_ID]
    assert hostile
    session = _session(loaded, tmp_path / "a.jsonl", items=hostile, n=1)
    with serving(create_app(session)) as url:
        page.goto(url + "/")
        _settled(page, 1)
        shown = session.draw[0]
        assert page.text_content("#intervention-id") == f"{HOSTILE_ID}#{shown.step.index}"
        assert page.text_content("#orig-answer") == loaded.records[0].baseline.answer
        assert HOSTILE_TEXTS["script"] in page.text_content("#new-answer")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#injected").count() == 0 and page.locator("main img[onerror]").count() == 0
        page.keyboard.press("n")
        page.wait_for_function("document.body.dataset.pending === '0'")
        (line,) = (tmp_path / "a.jsonl").read_text().splitlines()
        assert json.loads(line)["intervention"] == shown.id
    assert page.dialogs == [] and page.errors == []


def test_the_page_works_under_its_content_security_policy(browser, loaded: LoadedRun, tmp_path: Path):
    context = browser.new_context()  # CSP enforced: no inline script or style may be needed
    page = context.new_page()
    violations = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    session = _session(loaded, tmp_path / "a.jsonl", n=2)
    with serving(create_app(session)) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready='1'][data-pending='0']")
        assert (
            page.text_content("#position") == "1"
            and page.text_content("#intervention-id") == session.draw[0].id
        )
        page.keyboard.press("i")
        page.wait_for_selector("body[data-ready='1'][data-pending='0'] #position:text-is('2')")
    context.close()
    assert violations == []
    assert LabelLog(tmp_path / "a.jsonl", "alice").latest[session.draw[0].id].edit_valid == "invalid"
