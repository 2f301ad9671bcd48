"""Gradio's page code as the app serves it (gemma4_ui/web/gradio_compat/build_files.py says why and how it is
fixed): a page at rest asks Chromium for no frames, after loading and after a turn (Gradio's
status tracker left its timer asking for one 60 times a second once the loading indicator had
gone); a streamed update reads back only the streaming event's components, and a turn only
the properties the page keeps; a value that is not an object is not cloned to be read back."""

from __future__ import annotations

import statistics
from pathlib import Path

from gradio.route_utils import BUILD_PATH_LIB
from test_browser import open_app

from gemma4_ui.web.gradio_compat import build_files as gradio_fixes

# Installed before the page's own scripts, so Gradio's modules keep this function as
# their requestAnimationFrame: it counts every frame asked for.
COUNT_FRAME_REQUESTS = """(() => {
  const ask = window.requestAnimationFrame.bind(window);
  window.__frameRequests = 0;
  window.requestAnimationFrame = (callback) => { window.__frameRequests += 1; return ask(callback); };
})()"""
# Frames asked for in each second, until a second with none (or 20 seconds).
QUIET_SECONDS = """async () => {
  const counts = [];
  while (counts.length < 20) {
    const before = window.__frameRequests;
    await new Promise((done) => setTimeout(done, 1000));
    counts.push(window.__frameRequests - before);
    if (counts[counts.length - 1] === 0) break;
  }
  return counts;
}"""


def test_the_fixes_apply_to_this_gradio():
    for fix in gradio_fixes.FIXES:
        source = fix.patched()
        assert source is not None, fix.chunk
        assert all(source.count(new) == 1 for _, new in fix.edits), fix.chunk
    assert [route.path for route in gradio_fixes.routes()] == [f"/assets/{fix.chunk}" for fix in gradio_fixes.FIXES]


def test_a_build_the_fix_does_not_know_is_served_unchanged(caplog):
    unknown = gradio_fixes.ChunkFix(gradio_fixes.STATUS_TIMER.chunk, (("no such code", "x"),), "a test's fix")
    assert unknown.patched() is None
    assert "left as it is" in caplog.text


def test_a_page_at_rest_asks_for_no_frames(app_server, page):
    page.add_init_script(COUNT_FRAME_REQUESTS)
    open_app(page, app_server.url)
    counts = page.evaluate(QUIET_SECONDS)
    assert counts[-1] == 0, f"frames asked for each second after loading: {counts}"
    assert page.evaluate("document.querySelector('[data-testid=status-tracker]') !== null")

    page.fill("#composer textarea", "Hello")
    page.keyboard.press("Enter")
    page.wait_for_selector("#chat-history .bot-row", timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=60_000)
    counts = page.evaluate(QUIET_SECONDS)
    assert counts[-1] == 0, f"frames asked for each second after a turn: {counts}"


# Installed after loading: Svelte's $state.snapshot, with which Gradio reads a component's
# state back into its tree, clones each value with the global structuredClone.
COUNT_READ_BACKS = """() => {
  const clone = window.structuredClone;
  window.__clones = 0;
  window.structuredClone = (...args) => { window.__clones += 1; return clone(...args); };
  window.__clonesAtChange = [];  // at each frame that shows a change of the live chat
  let asked = false;
  new MutationObserver(() => {
    if (asked) return;
    asked = true;
    requestAnimationFrame(() => { window.__clonesAtChange.push(window.__clones); asked = false; });
  }).observe(document.querySelector('#chat-live'), {subtree: true, childList: true, characterData: true});
}"""


def read_backs_per_update(page, message: str) -> float:
    """Values Gradio reads back per visible update while the reply to `message` streams: the
    median update's (the start and end of an event, this turn's or the inspector's refresh
    beside it, read everything back, as they should)."""
    page.evaluate(COUNT_READ_BACKS)
    page.fill("#composer textarea", message)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#composer textarea').disabled", timeout=30_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    at_change = page.evaluate("window.__clonesAtChange")
    assert len(at_change) >= 10, f"the reply streamed in {len(at_change)} visible updates"
    return statistics.median(b - a for a, b in zip(at_change, at_change[1:]))


def svelte_snapshot_as_gradio_ships_it(page) -> None:
    """The page gets Gradio's own chunk in place of fix 4's, so that structuredClone sees every
    value read back, as it did before fix 4 (it counts them for the tests of fixes 2 and 3)."""
    chunk = gradio_fixes.SNAPSHOT_PRIMITIVES.chunk
    page.route(f"**/assets/{chunk}", lambda route: route.fulfill(
        path=str(Path(BUILD_PATH_LIB) / chunk), content_type="text/javascript"))


def a_used_session(page, url: str, tmp_path, gradio_snapshot: bool = True) -> None:
    """A page whose session has used the settings, the composer and "Load a conversation"."""
    from conftest import CHAT_FILE_INPUT

    from bench.scripted_reply import long_chat

    if gradio_snapshot:
        svelte_snapshot_as_gradio_ships_it(page)
    open_app(page, url)
    page.get_by_role("tab", name="Settings").click()
    field = page.locator("#max-new-tokens input[type=number]")
    field.fill("150")
    field.press("Enter")
    page.locator("#thinking input").check()
    page.get_by_role("tab", name="Inspector").click()
    saved = tmp_path / "chat.json"
    saved.write_text(long_chat(6), encoding="utf-8")
    page.get_by_role("tab", name="Save / load").click()
    page.set_input_files(CHAT_FILE_INPUT, str(saved))
    page.wait_for_function("() => document.querySelectorAll('#chat-history .message-row').length == 6",
                           timeout=60_000)
    page.wait_for_timeout(1500)  # the inspector's refresh after loading


def test_a_streamed_update_reads_back_only_the_streaming_event(app_server, page, tmp_path):
    """Gradio read back, at each streamed message, every component that a finished event had
    as an input or progress target: here ~250 values per update (the settings, the composer,
    the loaded conversation's inputs), more the more a session had used. The live Chatbot's
    own state, what the streaming event changes, is ~40."""
    a_used_session(page, app_server.url, tmp_path)
    per_update = read_backs_per_update(page, "Plan a day trip to Lisbon in three steps.")
    assert per_update < 100, per_update


def a_whole_turn(page) -> None:
    """Send a message and wait until its turn, and the statuses after it, are over."""
    page.fill("#composer textarea", "Plan a day trip to Lisbon in three steps.")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#composer textarea').disabled", timeout=30_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    page.wait_for_timeout(1000)  # the last statuses


def test_a_turn_reads_back_only_what_the_page_keeps(app_server, page, tmp_path):
    """At each start and end of an event (a turn has several: the message staged, the reply,
    the settling, the inspector's refreshes), Gradio read every component with a loading
    status back into its tree, all its properties cloned to keep its value, `open` and
    `selected`: 8,815 values in this turn. Now those three alone are read: 2,259."""
    a_used_session(page, app_server.url, tmp_path)
    page.evaluate(COUNT_READ_BACKS)
    a_whole_turn(page)
    clones = page.evaluate("window.__clones")
    assert clones < 4_000, clones


# Counts the values that are not objects (null included) handed to structuredClone.
COUNT_PLAIN_CLONES = """() => {
  const clone = window.structuredClone;
  window.__plainClones = 0;
  window.structuredClone = (value, ...rest) => {
    if (typeof value !== 'object' || value === null) window.__plainClones += 1;
    return clone(value, ...rest);
  };
}"""


def plain_values_cloned_in_a_turn(page) -> int:
    page.evaluate(COUNT_PLAIN_CLONES)
    a_whole_turn(page)
    return page.evaluate("window.__plainClones")


def test_a_snapshot_gives_values_that_are_not_objects_back_without_cloning(app_server, browser, tmp_path):
    """Svelte's snapshot handed every string, number, boolean and null to structuredClone (a
    turn of this chat: thousands), which serialized each one to give back the same value. With
    the fix none reaches it, and the turn reads back and shows the same."""
    replies = {}
    for gradio_snapshot in (True, False):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            a_used_session(page, app_server.url, tmp_path, gradio_snapshot=gradio_snapshot)
            plain = plain_values_cloned_in_a_turn(page)
            replies[gradio_snapshot] = page.locator("#chat-history .message-row").count()
        finally:
            context.close()
        if gradio_snapshot:
            assert plain > 1_000, plain
        else:
            assert plain == 0, plain
    assert replies[True] == replies[False] == 8, replies  # the 6 loaded, the message and its reply
