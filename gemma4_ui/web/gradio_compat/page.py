"""Fixes that run in the page, for what Gradio's page code makes Chromium do (written for
gradio 6.31.0). Each is a script file beside this module, with its reason at its top; the
page's own script (web/app.py) runs them once the page has loaded."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
SCRIPTS = ("narrow_selection_rules.js", "skip_unchanged_dir.js")


def page_fixes_js() -> str:
    """The fixes' scripts, as statements for the body of the page's script."""
    return "".join((HERE / name).read_text(encoding="utf-8") for name in SCRIPTS)
