"""Versions in Debian's Chromium at phone, laptop and projector sizes, as a user makes and
switches them: retry twice and switch between the three answers (mouse and keyboard), edit an
earlier message and come back to the first branch, with the inspector following."""

from __future__ import annotations

import itertools

import pytest
from conftest import screenshot, start_app
from replay import ReplayEngine
from test_browser import no_horizontal_scroll, open_app

SIZES = {"phone": (390, 844), "laptop": (1366, 768), "projector": (1920, 1080)}
HISTORY = "document.querySelector('#chat-history').innerText"


@pytest.fixture()
def numbered_server(processor):
    """Each reply says which it is: Answer 1, Answer 2, ..."""
    counter = itertools.count(1)
    server = start_app(ReplayEngine(processor, lambda prompt: f"Answer {next(counter)}.<turn|>"))
    yield server
    server.demo.close()


def wait_at_rest(page) -> None:
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=30_000)


def send(page, text: str, answer: str) -> None:
    """Send `text` and wait for its reply: one more `answer` in the history than before (an
    earlier reply may hold the same words, so their presence alone would not wait)."""
    shown = f"{HISTORY}.split({answer!r}).length"
    before = page.evaluate(f"() => {shown}")
    page.fill("#composer textarea", text)
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => {shown} > {before}", timeout=30_000)
    wait_at_rest(page)


def shows(page, *texts: str, count: str | None = None) -> None:
    """The history shows `texts` (and the bar `count`), and the inspector the same branch: the
    switch and what follows it have landed (a click while they run is not taken: each of
    Gradio's events takes one click at a time)."""
    conditions = [f"{HISTORY}.includes({t!r})" for t in texts]
    conditions += [f"document.querySelector('#template-messages').innerText.includes({t!r})"
                   for t in texts if t.startswith(("Answer", "first", "second"))]
    if count is not None:
        conditions.append(f"document.querySelector('#branch-count')?.innerText.trim() === {count!r}")
    page.wait_for_function(f"() => {' && '.join(conditions)}", timeout=30_000)
    page.wait_for_timeout(200)  # the event's end reaches the page just after its outputs


def within_the_window(page, selector: str) -> bool:
    return page.evaluate(f"""() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();
                                      return r.left >= 0 && r.right <= window.innerWidth + 1; }}""")


@pytest.mark.parametrize("size", list(SIZES))
def test_retry_edit_and_switch_between_versions(numbered_server, page, size):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    open_app(page, numbered_server.url)
    send(page, "first question", "Answer 1")
    assert not page.is_visible("#branch-bar"), "no versions yet: no bar"

    # Retry twice: three answers, the last one shown.
    for answer in ("Answer 2", "Answer 3"):
        page.locator("#chat-history button[aria-label='Retry']").last.click()
        page.wait_for_function(f"() => {HISTORY}.includes('{answer}')", timeout=30_000)
        wait_at_rest(page)
    shows(page, "‹ 3/3 ›", count="3 / 3")
    assert "Answer 1" not in page.evaluate(f"() => {HISTORY}")
    assert page.is_disabled("#branch-next")

    # Switch by mouse (or finger), then by keyboard.
    page.click("#branch-previous")
    shows(page, "Answer 2", "‹ 2/3 ›", count="2 / 3")
    page.click("#branch-previous")
    shows(page, "Answer 1", "‹ 1/3 ›", count="1 / 3")
    page.focus("#branch-next")
    page.keyboard.press("Enter")
    shows(page, "Answer 2", count="2 / 3")

    # The next message continues the branch shown.
    send(page, "second question", "Answer 4")
    history = page.evaluate(f"() => {HISTORY}")
    assert history.index("Answer 2") < history.index("second question") < history.index("Answer 4")
    assert "second question" in page.inner_text("#template-messages"), "the inspector follows the branch"

    # Edit the first question: a new branch, without what followed the first.
    page.locator("#chat-history button[aria-label='Edit']").first.click()
    page.fill("#chat-history textarea.edit-textarea", "first question, edited")
    page.locator("#chat-history button[aria-label='Submit']").click()
    shows(page, "first question, edited", "Answer 5", "‹ 2/2 ›", count="2 / 2")
    wait_at_rest(page)
    assert "second question" not in page.evaluate(f"() => {HISTORY}")
    page.wait_for_function("() => !document.querySelector('#template-messages').innerText.includes('second question')",
                           timeout=30_000)

    # Back to the first branch, its whole continuation.
    page.click("#branch-previous")
    shows(page, "first question", "Answer 2", "second question", "Answer 4", count="1 / 2")
    page.wait_for_function("() => document.querySelector('#template-messages').innerText.includes('Answer 4')",
                           timeout=30_000)
    # The list picks the message whose versions the arrows step through: the reply's three.
    page.click("#branch-pick input")
    page.fill("#branch-pick input", "Reply 2")  # the list filters by what is typed
    page.get_by_role("option", name="Reply 2: Answer 2.").click()
    shows(page, count="2 / 3")
    page.click("#branch-previous")
    shows(page, "Answer 1", "‹ 1/3 ›", count="1 / 3")
    assert "second question" not in page.evaluate(f"() => {HISTORY}"), "Answer 1 had no continuation"

    assert no_horizontal_scroll(page)
    for part in ("#branch-bar", "#branch-previous", "#branch-next"):
        assert within_the_window(page, part), f"{part} overflows at {size} size"
    screenshot(page, f"branches-{size}")


def test_undo_and_new_conversation_with_versions(numbered_server, page):
    """Undo takes back the message shown, its versions with it; New conversation starts
    without any version."""
    open_app(page, numbered_server.url)
    send(page, "first question", "Answer")
    send(page, "second question", "Answer")
    page.locator("#chat-history button[aria-label='Retry']").last.click()
    shows(page, "‹ 2/2 ›", count="2 / 2")
    wait_at_rest(page)
    page.locator("#chat-history button[aria-label='Undo']").last.click()
    page.wait_for_function("() => document.querySelector('#composer textarea').value === 'second question'",
                           timeout=30_000)
    page.wait_for_selector("#branch-bar", state="hidden", timeout=30_000)
    assert "second question" not in page.evaluate(f"() => {HISTORY}")

    page.locator("#chat-history button[aria-label='Retry']").last.click()
    shows(page, "‹ 2/2 ›", count="2 / 2")
    wait_at_rest(page)
    page.click("#new-chat")
    page.wait_for_selector("#branch-bar", state="hidden", timeout=30_000)
    send(page, "a new start", "Answer")
    assert not page.is_visible("#branch-bar") and "‹" not in page.evaluate(f"() => {HISTORY}")
