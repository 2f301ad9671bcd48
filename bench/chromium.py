"""Debian's Chromium driven by Playwright, launched as the browser tests launch it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import CHROMIUM, CHROMIUM_ARGS


@contextmanager
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: `make setup-dev` installs Debian's chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextmanager
def app_page(chromium, url: str) -> Iterator:
    """A fresh tab (its own Gradio session) with the app loaded and ready for input."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#composer textarea", timeout=60_000)
        page.wait_for_selector("#token-counts", timeout=60_000)
        yield page
    finally:
        context.close()
