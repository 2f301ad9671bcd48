"""Stop and the tool loop in Debian's Chromium, as a user clicks them, on recorded Gemma 4
outputs (replay.py): a long story still streaming when Stop is pressed, and a tool round."""

from __future__ import annotations

import pytest
from conftest import CHAT_FILE_INPUT, screenshot, start_app
from replay import ReplayEngine
from test_browser import open_app

Q = '<|"|>'
THOUGHT_AND_CALL = ("<|channel>thought\nThe user wants the weather in Ouagadougou; call the tool.<channel|>"
                    f"<|tool_call>call:get_current_weather{{location:{Q}Ouagadougou{Q}}}<tool_call|><|tool_response>")
ANSWER = "I have the weather.<channel|>It is sunny in Ouagadougou.<turn|>"


def stop_once_the_reply_is_long(page, timeout: int) -> None:
    """Press Stop once the streaming reply holds some text; returns when the chat says so."""
    page.wait_for_function("""() => { const bots = document.querySelectorAll('#chatbot [data-testid="bot"]');
                                      return bots.length && bots[bots.length - 1].innerText.length > 80; }""",
                           timeout=timeout)
    page.click("#stop")
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Stopped')", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=30_000)


def send_the_tool_call_example(page, timeout: int) -> None:
    """Send the "🛠️ Tool call" example (it turns thinking and the weather tool on); returns
    when the thinking-and-call panel shows."""
    page.get_by_role("button", name="🛠️ Tool call", exact=True).click()
    page.wait_for_function("() => document.querySelector('#composer textarea').value.includes('Ouagadougou')")
    page.click("#composer textarea")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Thinking · 🛠️')",
                           timeout=timeout)


def open_the_call_panel(page) -> str:
    """Open the first thought-and-call panel; the chat's text with it open."""
    page.locator("#chatbot .thought-group > .title").first.click()
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('get_current_weather')")
    return page.inner_text("#chatbot")


@pytest.fixture()
def long_reply_server(processor):
    # A recorded long story, paced so that it is still streaming when Stop is pressed (random
    # weights may end a reply on a stop token at any moment).
    engine = ReplayEngine(processor, ["Once upon a time a small fox lived by the river. " * 150 + "<turn|>"],
                          seconds_per_chunk=0.02)
    server = start_app(engine)
    yield server
    server.demo.close()


def story_server(processor, repeats: int, seconds_per_chunk: float):
    """The app on a replay engine whose every reply is a long story, streamed slowly."""
    return start_app(ReplayEngine(processor, lambda prompt: "Once upon a time " * repeats + "<turn|>",
                                  seconds_per_chunk=seconds_per_chunk))


def load_conversation(page, path, conversation) -> None:
    """Save `conversation` to `path` and load it through the app's "Save / load" tab."""
    from gemma4_ui.core import transcript
    from gemma4_ui.core.options import ChatOptions

    path.write_text(transcript.dumps(conversation, ChatOptions()), encoding="utf-8")
    page.get_by_role("tab", name="Save / load").click()
    page.set_input_files(CHAT_FILE_INPUT, str(path))


def test_stop_a_long_reply_in_the_browser(long_reply_server, page):
    open_app(page, long_reply_server.url)
    page.fill("#composer textarea", "Write a long story.")
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('#stop').disabled", timeout=10_000)
    stop_once_the_reply_is_long(page, timeout=120_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
    screenshot(page, "stopped")


@pytest.fixture()
def weather_server(processor):
    engine = ReplayEngine(processor, [THOUGHT_AND_CALL, ANSWER], seconds_per_chunk=0.01)
    server = start_app(engine)
    yield server, engine
    server.demo.close()


def test_tool_loop_in_the_browser(weather_server, page):
    server, engine = weather_server
    open_app(page, server.url)
    send_the_tool_call_example(page, timeout=60_000)
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('sunny in Ouagadougou')",
                           timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=60_000)
    shown = open_the_call_panel(page)
    assert '"location": "Ouagadougou"' in shown
    assert 'response:get_current_weather{' in engine.prompts[1], "the result went back to the model"
    screenshot(page, "tool-loop")


def test_undo_and_streaming_keep_the_inspector_and_the_tool_row_current(processor, page, tmp_path):
    """Undo of a message whose tool call waits hides the tool row and shows the draft in the
    inspector; while a reply streams, the inspector shows the prompt being answered."""
    from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn
    from gemma4_ui.core.events import ToolCall, ToolResult

    call = ToolCall("lookup_order", {"order_id": 7}, id="call_0")
    waiting = Conversation([UserTurn("Where is order 7?"), AssistantTurn(rounds=[ToolRound(
        [call], [ToolResult("lookup_order", "call_0", "client", None, 0.0)])])])
    server = story_server(processor, 100, 0.03)
    try:
        open_app(page, server.url)
        load_conversation(page, tmp_path / "waiting.json", waiting)
        page.wait_for_selector("#tool-answer", state="visible", timeout=30_000)
        page.get_by_role("radio", name="Messages").click()
        page.locator("#chatbot button[aria-label='Undo']").last.click()
        page.wait_for_function("() => document.querySelector('#composer textarea').value === 'Where is order 7?'",
                               timeout=30_000)
        page.wait_for_selector("#tool-answer", state="hidden", timeout=30_000)
        page.wait_for_function("() => !document.querySelector('#template-messages').innerText.includes('call_0')",
                               timeout=30_000)
        assert "Where is order 7?" in page.inner_text("#template-messages"), "the draft, as it would be sent"

        page.fill("#composer textarea", "Tell me a story")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Once upon')",
                               timeout=30_000)
        page.wait_for_timeout(500)  # the composer was cleared: the inspector must not fall back to empty
        assert "Tell me a story" in page.inner_text("#template-messages")
        screenshot(page, "inspector-while-streaming")
        page.click("#stop")
        page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=30_000)
    finally:
        server.demo.close()


EDIT_BUTTONS = """() => [...document.querySelectorAll('#chatbot button')]
    .filter(b => b.querySelector('.feather-edit-2') && b.offsetParent !== null)
    .map(b => b.closest('.message-buttons').previousElementSibling.innerText.trim())"""


def test_every_message_sent_has_an_edit_control(processor, page):
    """An edit of any message sent makes a new version of it, so each text message has the
    control; a media-only message has none."""
    from test_browser import EXAMPLES, attach

    server = start_app(ReplayEngine(processor, lambda prompt: "Noted.<turn|>"))
    try:
        open_app(page, server.url)
        for text in ("first question", "second question"):
            page.fill("#composer textarea", text)
            page.keyboard.press("Enter")
            page.wait_for_function(f"() => document.querySelectorAll('#chatbot [data-testid=bot]').length >= "
                                   f"{1 if text.startswith('first') else 2}", timeout=30_000)
            page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
        assert page.evaluate(EDIT_BUTTONS) == ["first question", "second question"]
        screenshot(page, "edit-every-message")

        attach(page, EXAMPLES / "shapes.png")
        page.wait_for_selector("#composer img", timeout=30_000)
        page.click("#composer textarea")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelectorAll('#chatbot [data-testid=bot]').length >= 3",
                               timeout=30_000)
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
        assert page.evaluate(EDIT_BUTTONS) == ["first question", "second question"], "an image has no text to edit"
    finally:
        server.demo.close()


def test_while_a_turn_streams_no_message_has_an_edit_control(processor, page):
    """The turn settles into the conversation an edit would replace: the history's messages
    lose their edit control for the turn and have it back when the turn has settled."""
    server = story_server(processor, 60, 0.03)
    try:
        open_app(page, server.url)
        page.fill("#composer textarea", "first question")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelectorAll('#chat-history [data-testid=bot]').length >= 1",
                               timeout=30_000)
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
        assert page.evaluate(EDIT_BUTTONS) == ["first question"]

        page.fill("#composer textarea", "second question")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#chat-live [data-testid=bot]')?.innerText.length > 40",
                               timeout=30_000)
        assert page.evaluate(EDIT_BUTTONS) == []
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=60_000)
        page.wait_for_timeout(300)  # the frame after the turn's end
        assert page.evaluate(EDIT_BUTTONS) == ["first question", "second question"]
    finally:
        server.demo.close()


def test_a_reply_streams_below_a_long_chat_without_touching_it(processor, page, tmp_path):
    """The chat's history stays as it is (the same elements) while a reply streams into the
    live part below it; the box follows the reply; when it is done the whole turn is in the
    history and the live part is empty. The send uploads the draft, not the chat."""
    from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn

    turns = []
    for n in range(12):
        turns += [UserTurn(f"Question {n}"), AssistantTurn(content=f"Answer {n}.\n\n```python\nprint({n})\n```")]
    server = story_server(processor, 150, 0.02)
    try:
        open_app(page, server.url)
        load_conversation(page, tmp_path / "long.json", Conversation(turns))
        page.wait_for_function("() => document.querySelectorAll('#chat-history .message-row').length === 24",
                               timeout=60_000)
        # the box shows the loaded chat's end (the click on the tab before was not the reader's scrolling)
        page.wait_for_function("""() => { const box = document.querySelector('#chatbot');
            return box.scrollHeight - box.scrollTop - box.clientHeight < 80; }""", timeout=10_000)
        page.evaluate("document.querySelector('#chat-history .message-row').dataset.mark = 'first'")
        uploads = []
        page.on("request", lambda request: request.method == "POST" and uploads.append(request.post_data or ""))
        page.fill("#composer textarea", "One more")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#chat-live').innerText.includes('Once upon a time')",
                               timeout=60_000)
        during = page.evaluate("""() => { const box = document.querySelector('#chatbot');
            return {history: document.querySelectorAll('#chat-history .message-row').length,
                    marked: !!document.querySelector('#chat-history .message-row[data-mark=first]'),
                    live: document.querySelector('#chat-live').innerText,
                    bottom: box.scrollHeight - box.scrollTop - box.clientHeight}; }""")
        assert during["history"] == 24 and during["marked"], "the history is left alone while the reply streams"
        assert "One more" in during["live"], "the message sent and its reply stream below it"
        assert during["bottom"] < 80, "the chat follows the reply"
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=60_000)
        page.wait_for_function("() => document.querySelectorAll('#chat-history .message-row').length === 26",
                               timeout=30_000)
        assert page.locator("#chat-live .message-row").count() == 0
        assert any("One more" in body for body in uploads)
        assert not any("Question 3" in body for body in uploads), "a send uploads the draft, not the whole chat"
        page.get_by_role("radio", name="Messages").click()
        page.wait_for_function("() => document.querySelector('#template-messages').innerText.includes('Once upon')",
                               timeout=30_000)  # the inspector shows the reply too
        assert page.inner_text("#chat-history").count("Once upon a time") >= 100
        screenshot(page, "long-chat-done")
    finally:
        server.demo.close()


HISTORY_HIDDEN = "() => document.querySelector('#chat-history').getAttribute('hidden')"
HISTORY_HEIGHT = "() => document.querySelector('#chat-history').getBoundingClientRect().height"
MESSAGES_HIDDEN = "() => document.querySelectorAll('#chat-history .message-row[hidden=until-found]').length"


def test_a_history_out_of_view_rests_while_a_reply_streams_and_is_there_when_the_reader_looks(
        processor, page, tmp_path):
    """As the streaming reply pushes the history out of the box, its messages, then the whole
    history, are hidden until found (so that they cost the frames nothing), at the height they
    had; the reader scrolling up shows them at once and they stay shown while they read; back
    at the bottom they rest again; the turn's end shows the history whole."""
    from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn

    turns = []
    for n in range(12):
        turns += [UserTurn(f"Question {n}"), AssistantTurn(content=f"Answer {n}.\n\n```python\nprint({n})\n```")]
    story = "".join(f"Line {n} of the story.\n\n" for n in range(3000)) + "<turn|>"  # Stop ends it
    server = start_app(ReplayEngine(processor, lambda prompt: story, seconds_per_chunk=0.02))
    try:
        open_app(page, server.url)
        load_conversation(page, tmp_path / "long.json", Conversation(turns))
        page.wait_for_function("() => document.querySelectorAll('#chat-history .message-row').length === 24",
                               timeout=60_000)
        # its messages render (markdown, highlighting) after they arrive: the height once they have
        page.wait_for_function(f"""() => {{ const height = ({HISTORY_HEIGHT})(), same = height === window.__height;
            window.__height = height; return same; }}""", polling=500, timeout=30_000)
        height = page.evaluate(HISTORY_HEIGHT)
        page.fill("#composer textarea", "One more")
        page.keyboard.press("Enter")
        # first the messages above the box, while the last ones are still in view
        page.wait_for_function("""() => {
            const top = document.querySelector('#chatbot').getBoundingClientRect().top;
            const rows = [...document.querySelectorAll('#chat-history .message-row')], last = rows.at(-1);
            const hidden = rows.filter((row) => row.hidden);
            return hidden.length > 0 && !document.querySelector('#chat-history').hidden
                && hidden.every((row) => row.getBoundingClientRect().bottom <= top)
                && !last.hidden && last.getBoundingClientRect().bottom > top; }""", timeout=60_000)
        page.wait_for_function(f"() => ({HISTORY_HIDDEN})() === 'until-found'", timeout=60_000)
        assert page.evaluate(MESSAGES_HIDDEN) == 24, "each message first, then the history"
        assert page.evaluate(HISTORY_HEIGHT) == height, "hidden at the height it had: nothing moves"
        assert page.evaluate(BOTTOM_GAP) < 80, "the box still follows the reply"

        page.hover("#chatbot")
        page.mouse.wheel(0, -100_000)
        page.wait_for_function(f"() => ({HISTORY_HIDDEN})() === null && ({MESSAGES_HIDDEN})() === 0", timeout=5_000)
        page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Question 0')",
                               timeout=5_000)
        page.wait_for_timeout(1_500)  # more of the reply arrives below the reader
        assert page.evaluate(HISTORY_HIDDEN) is None, "shown while the reader is up there"
        assert "Question 0" in page.inner_text("#chatbot")
        assert not page.locator("#composer textarea").is_enabled(), "still streaming"

        page.mouse.wheel(0, 1_000_000)
        page.wait_for_function(f"() => ({HISTORY_HIDDEN})() === 'until-found'", timeout=10_000)
        page.click("#stop")
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
        assert page.evaluate(HISTORY_HIDDEN) is None and page.evaluate(MESSAGES_HIDDEN) == 0
        text = page.inner_text("#chat-history")
        assert all(f"Question {n}" in text and f"Answer {n}." in text for n in range(12)), "the whole history"
        assert "Line 1 of the story." in text, "and the turn that ended"
    finally:
        server.demo.close()


BOTTOM_GAP = "() => { const box = document.querySelector('#chatbot'); " \
             "return box.scrollHeight - box.scrollTop - box.clientHeight; }"


def test_the_chat_stays_where_its_reader_scrolled_up_and_follows_again_at_the_bottom(processor, page):
    """While a reply streams, scrolling up in the chat keeps it there (the reply grows below);
    scrolling back to the bottom makes it follow the reply again."""
    story = "".join(f"Line {n} of the story.\n\n" for n in range(300)) + "<turn|>"  # one line per paragraph
    server = start_app(ReplayEngine(processor, lambda prompt: story, seconds_per_chunk=0.01))
    try:
        open_app(page, server.url)
        page.fill("#composer textarea", "Tell me a story")
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => ({BOTTOM_GAP})() === 0 && document.querySelector('#chatbot').scrollTop > 300",
                               timeout=60_000)  # the reply overflows the box, which follows it
        page.hover("#chatbot")
        page.mouse.wheel(0, -250)
        page.wait_for_function(f"() => ({BOTTOM_GAP})() > 150", timeout=5_000)
        top = page.evaluate("document.querySelector('#chatbot').scrollTop")
        page.wait_for_timeout(1_500)  # more of the reply arrives below
        assert page.evaluate("document.querySelector('#chatbot').scrollTop") == top, "it stays where the reader is"
        assert page.evaluate(BOTTOM_GAP) > 300
        page.mouse.wheel(0, 100_000)
        page.wait_for_timeout(1_500)
        assert not page.locator("#composer textarea").is_enabled(), "still streaming"
        assert page.evaluate(BOTTOM_GAP) < 80, "back at the bottom, it follows again"
        page.click("#stop")
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
    finally:
        server.demo.close()
