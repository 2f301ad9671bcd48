"""Refused input in Debian's Chromium: a conversation file that is not one, and a tool schema
that is not valid. Each refusal is a message that stays on screen; every component keeps its
content (no red "Error" boxes, the chat and the tools list intact)."""

from __future__ import annotations

import pytest
from conftest import CHAT_FILE_INPUT, screenshot, start_app
from replay import ReplayEngine
from test_browser import open_app

IDLE = "() => !document.querySelector('#composer textarea').disabled"


@pytest.fixture()
def chat_page(processor, page):
    server = start_app(ReplayEngine(processor, lambda prompt: "Noted, thank you.<turn|>"))
    open_app(page, server.url)
    page.fill("#composer textarea", "Remember the blue kite.")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Noted, thank you')",
                           timeout=30_000)
    page.wait_for_function(IDLE, timeout=30_000)
    yield page
    server.demo.close()


def toast(page, text: str):
    found = page.locator(".toast-body", has_text=text)
    found.first.wait_for(timeout=30_000)
    return found.first


def no_error_boxes(page) -> bool:
    """Gradio replaces a component that raised with a red box headed "Error"."""
    return page.evaluate("""() => ![...document.querySelectorAll('.block')].some(
        b => b.offsetParent !== null && /^\\s*Error\\b/.test(b.innerText) && !b.closest('.toast-wrap'))""")


def test_a_file_that_is_not_a_conversation_is_refused_and_the_chat_stays(chat_page, tmp_path):
    page = chat_page
    bad = tmp_path / "not-a-conversation.json"
    bad.write_text('{"format": "something else", "turns": 7}', encoding="utf-8")
    page.get_by_role("tab", name="Save / load").click()
    page.set_input_files(CHAT_FILE_INPUT, str(bad))
    assert "Could not load that conversation" in toast(page, "Could not load").inner_text()
    chat = page.inner_text("#chatbot")
    assert "Remember the blue kite." in chat and "Noted, thank you." in chat, "the chat keeps its messages"
    assert no_error_boxes(page)
    page.wait_for_timeout(4_000)
    assert page.locator(".toast-body", has_text="Could not load").count() == 1, "the message stays until closed"
    screenshot(page, "refused-conversation-file")

    page.fill("#composer textarea", "And now?")  # the app goes on
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('#chatbot [data-testid=bot]').length >= 2",
                           timeout=30_000)


def test_an_invalid_tool_schema_is_refused_and_the_tools_stay(chat_page):
    page = chat_page
    page.get_by_role("tab", name="Tools").click()
    # The tab's markdown renders a moment after the click (later on a busy machine).
    page.wait_for_function("() => document.querySelector('#tool-docs')?.innerText.includes('Weather')",
                           timeout=30_000)
    tools_before = page.inner_text("#enabled-tools")
    docs_before = page.inner_text("#tool-docs")
    page.locator("#declare-schema .cm-content").fill('{"name": "lookup order", "parameters": 5}')
    page.click("#declare-tool")
    toast(page, "The tool was not added")
    page.wait_for_function("() => document.querySelector('#declare-notice').innerText.includes('not added')",
                           timeout=30_000)
    notice = page.inner_text("#declare-notice")
    assert "'lookup order' is not a valid function name" in notice and "'_', '.' or '-'" in notice, \
        "the reason reads as written (no underscore turned into emphasis)"
    assert "Weather (demo, sample data)" in docs_before and "\\" not in docs_before
    assert page.inner_text("#enabled-tools") == tools_before, "the tools list keeps every tool"
    assert page.inner_text("#tool-docs") == docs_before
    assert "lookup order" in page.inner_text("#declare-schema"), "the schema stays in the editor, to be fixed"
    assert no_error_boxes(page)
    assert "Noted, thank you." in page.inner_text("#chatbot")
    screenshot(page, "refused-tool-schema")
