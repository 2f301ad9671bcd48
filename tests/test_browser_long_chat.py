"""What keeps a long chat cheap to update in Chromium (web/gradio_compat/narrow_selection_rules.js,
skip_unchanged_dir.js and web.app.CSS say why): no style rule that makes a class change on the
chat's ancestors restyle all of it, no restyle of every message for a `dir` written unchanged,
and, while a reply streams, no rendering of the messages out of view. Checked for what they
do, in a chat with code blocks; what they save is measured in `bench` (long chat)."""

from __future__ import annotations

import pytest
from conftest import CHAT_FILE_INPUT, screenshot
from test_browser import open_app
from test_browser_turns import story_server

from bench.scripted_reply import long_chat  # a chat about code, as the bench loads it

# Rules whose selector has a descendant combinator after an attribute selector and ends in a
# bare pseudo-element, the shape that made Chromium restyle whole subtrees.
WIDE_RULES = """() => { const found = [];
  const walk = (rules) => { for (const rule of rules) {
    if (rule.cssRules && !rule.selectorText) walk(rule.cssRules);
    else if (rule.selectorText && /\\]\\s+::selection/.test(rule.selectorText)) found.push(rule.selectorText); } };
  for (const sheet of document.styleSheets) { try { walk(sheet.cssRules); } catch (e) {} }
  return found; }"""
SELECTION_RULES = """() => { const found = [];
  const walk = (rules) => { for (const rule of rules) {
    if (rule.cssRules && !rule.selectorText) walk(rule.cssRules);
    else if (rule.selectorText && rule.selectorText.includes('language-') && rule.selectorText.includes('::selection'))
      found.push(rule.selectorText); } };
  for (const sheet of document.styleSheets) { try { walk(sheet.cssRules); } catch (e) {} }
  return found; }"""
# Attribute changes of the chat's message elements while `dir` is written: unchanged, then
# to another direction.
DIR_WRITES = """async () => {
  const message = document.querySelector('#chat-history [dir]');
  const seen = [];
  const observer = new MutationObserver((records) => records.forEach((r) => seen.push(r.attributeName)));
  observer.observe(message, {attributes: true});
  message.dir = message.dir;
  await new Promise((done) => setTimeout(done, 0));
  const unchanged = seen.length;
  const before = message.dir;
  message.dir = 'rtl';
  await new Promise((done) => setTimeout(done, 0));
  const after = message.dir;
  message.dir = before;
  observer.disconnect();
  return {unchanged, changed: seen.length - unchanged, before, after};
}"""


def open_a_chat_with_code(page, url: str, tmp_path) -> None:
    """The app at `url` with a 12-message chat about code loaded, its code highlighted."""
    saved = tmp_path / "chat.json"
    saved.write_text(long_chat(12), encoding="utf-8")
    open_app(page, url)
    page.get_by_role("tab", name="Save / load").click()
    page.set_input_files(CHAT_FILE_INPUT, str(saved))
    page.wait_for_function("() => document.querySelectorAll('#chat-history .message-row').length >= 12",
                           timeout=60_000)
    page.wait_for_selector("#chat-history pre code[class*='language-'] .token", timeout=30_000)


def test_a_long_chat_with_code_has_no_style_rule_that_restyles_it_all(app_server, page, tmp_path):
    open_a_chat_with_code(page, app_server.url, tmp_path)

    assert page.evaluate(WIDE_RULES) == [], "the highlighter's descendant ::selection rule is narrowed"
    narrowed = page.evaluate(SELECTION_RULES)
    assert narrowed and all("code" in s or "pre" in s for s in narrowed), "the code's own selection rule stays"
    code, token = page.evaluate("""() => { const token = document.querySelector('#chat-history code .token');
        const code = token.closest('code');
        return [code, token].map((e) => getComputedStyle(e, '::selection').backgroundColor); }""")
    assert token == code and code not in ("", "rgba(0, 0, 0, 0)"), "the code's spans are selected in its colours"
    writes = page.evaluate(DIR_WRITES)
    assert writes == {"unchanged": 0, "changed": 1, "before": "ltr", "after": "rtl"}, \
        "a dir written unchanged changes nothing; a new direction goes through"
    # The inspector's layers, patched a slice at a time, end up holding the whole chat.
    page.wait_for_function("() => document.querySelector('#template-messages').innerText.includes('Question 6')",
                           timeout=60_000)
    page.get_by_role("radio", name="Expanded").check()
    page.wait_for_function("""() => document.querySelector('#template-expanded-colour .tph-body')
                                  .innerText.includes('step 6')""", timeout=60_000)
    screenshot(page, "long-chat-with-code")


# Each message of the history: its height, whether its content is rendered (the row itself
# stays: what is skipped is what it holds) and the length of its innerText (none when skipped).
HISTORY_ROWS = """() => [...document.querySelectorAll('#chat-history .message-row')].map((row) => ({
    height: row.getBoundingClientRect().height,
    rendered: row.firstElementChild.checkVisibility({contentVisibilityAuto: true}),
    text: row.innerText.length}))"""
HISTORY_HEIGHT = "() => document.querySelector('#chat-history').getBoundingClientRect().height"


def test_while_a_reply_streams_the_history_out_of_view_is_skipped_and_keeps_its_size(processor, page, tmp_path):
    server = story_server(processor, 400, 0.02)
    try:
        # A window the whole page fits in: the message just above the reply stays in view.
        page.set_viewport_size({"width": 1400, "height": 1800})
        open_a_chat_with_code(page, server.url, tmp_path)
        before, height = page.evaluate(HISTORY_ROWS), page.evaluate(HISTORY_HEIGHT)
        assert all(row["rendered"] and row["text"] for row in before), "between turns every message is rendered"

        page.fill("#composer textarea", "Tell me a story.")
        page.keyboard.press("Enter")
        # Skipping follows the layout a frame later, and a loaded machine may look late: so wait, frame by
        # frame, for the moment the reply has grown and the history is in the state it should reach.
        streaming = page.wait_for_function(f"""() => {{
            const bots = document.querySelectorAll('#chat-live [data-testid="bot"]');
            if (!bots.length || bots[bots.length - 1].innerText.length <= 200) return null;
            const rows = ({HISTORY_ROWS})();
            const far_skipped = !rows[0].rendered, near_rendered = rows[rows.length - 1].rendered;
            return far_skipped && near_rendered ? rows : null; }}""", timeout=60_000).json_value()
        assert page.evaluate("() => document.querySelector('#composer textarea').disabled"), \
            "while the reply streams, the first message (far above it) is skipped and the one just above it is not"
        assert [row["height"] for row in streaming] == pytest.approx([row["height"] for row in before], abs=0.5)
        assert page.evaluate(HISTORY_HEIGHT) == pytest.approx(height, abs=0.5), "the history keeps its height"

        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
        after = page.evaluate(HISTORY_ROWS)
        assert len(after) >= len(before) + 2 and all(row["rendered"] and row["text"] for row in after), \
            "once the turn has settled every message is rendered again"
    finally:
        server.demo.close()
