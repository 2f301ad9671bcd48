"""A page at rest asks Chromium for no frames: after loading, and after a turn. Gradio's status
tracker left its timer asking for one 60 times a second once the loading indicator had gone
(gemma4_ui/status_timer_fix.py says why and how it is fixed)."""

from __future__ import annotations

from gemma4_ui import status_timer_fix
from test_browser import open_app

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


def test_the_fix_applies_to_this_gradio():
    source = status_timer_fix.patched_chunk()
    assert source is not None and source.count(status_timer_fix.GUARDED) == 1
    assert [route.path for route in status_timer_fix.routes()] == [f"/assets/{status_timer_fix.CHUNK}"]


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
