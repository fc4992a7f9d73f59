"""Debian's chromium driven by Playwright, for the tests of every page the project serves.

``playwright install`` is never used (it downloads browser builds): the browser is the system's
``/usr/bin/chromium`` (the Makefile's ``browser`` target installs it). Without it the browser tests
skip on a developer's machine, and fail in CI (``CI`` set), where they must run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.hang_guard import hang_limit

CHROMIUM = Path(os.environ.get("EDCT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> Path:
    """The browser to drive; skips the test when it is missing outside CI, fails in CI."""
    path = CHROMIUM if CHROMIUM.is_file() else Path(shutil.which("chromium") or CHROMIUM)
    if not path.is_file():
        message = f"{CHROMIUM} is missing: install Debian's chromium package (make browser)"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run the browser tests)")
        pytest.skip(message)
    return path


def browser_fixture() -> Iterator[object]:
    """A launched headless chromium (Playwright ``Browser``), closed afterwards."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed (pip install -e '.[test]')")
        pytest.skip("playwright is not installed")
    path = chromium_path()
    with sync_playwright() as p:
        launch_ms = hang_limit(30) * 1000  # Playwright's 30 s, as a hang guard
        browser = p.chromium.launch(executable_path=str(path), args=CHROMIUM_ARGS, timeout=launch_ms)
        try:
            yield browser
        finally:
            browser.close()


def watched_page(browser: object, width: int, height: int) -> Iterator[object]:
    """A fresh page that records page errors, requests and dialogs (dismissed) on itself.

    ``bypass_csp``: Playwright's waits evaluate strings, which the pages' CSP forbids; without the
    CSP the hostile-text tests also show that the escaping alone keeps model text inert. Every wait,
    action and navigation has Playwright's 30 s as a hang guard (``support.hang_guard``): a busy
    machine renders slowly, but it renders.
    """
    context = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True)  # type: ignore[attr-defined]
    context.set_default_timeout(hang_limit(30) * 1000)
    context.set_default_navigation_timeout(hang_limit(30) * 1000)
    page = context.new_page()
    page.errors, page.requests, page.dialogs = [], [], []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("request", lambda req: page.requests.append(req.url))
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    yield page
    context.close()
