"""The whole app with the bundled model, which is trained to speak the Gemma 4 protocol:
thinking, tool calls and the tool loop, media acknowledgements — through gradio_client and
Chromium, greedy decoding."""

from __future__ import annotations

import pytest
from conftest import ROOT, screenshot
from gradio_client import handle_file

from gemma4_ui.config import BUNDLED_TRAINED
from tests.conftest import chat_messages

# Acceptance tests of the trained bundle. They run once scripts/train_tiny_gemma4.py has trained
# its weights (it writes training.json beside them); the committed weights are random so far.
pytestmark = pytest.mark.skipif(not BUNDLED_TRAINED, reason="the bundled model is not trained yet")

EXAMPLES = ROOT / "assets" / "examples"
GREEDY = dict(temperature=0, max_new_tokens=256)


def text_of(message) -> str:
    return "".join(part.get("text", "") for part in message["content"])


def panels(chat, prefix):
    return [m for m in chat if (m.get("metadata") or {}).get("title", "").startswith(prefix)]


def test_thinking_panel_with_thinking_on_and_none_with_it_off(client):
    chat = chat_messages(client.predict({"text": "Hello! Who are you?", "files": []}, thinking=True, api_name="/chat", **GREEDY))
    (thought,) = panels(chat, "💭")
    assert thought["metadata"]["status"] == "done" and thought["metadata"]["duration"] >= 0
    assert text_of(thought).strip(), "the thought has text"
    assert chat[-1]["metadata"] is None and text_of(chat[-1]).strip(), "the answer follows the thought"
    assert chat.index(thought) < len(chat) - 1

    off = chat_messages(client.predict({"text": "Hello again!", "files": []}, thinking=False, api_name="/chat", **GREEDY))
    assert len(panels(off, "💭")) == 1, "only the first turn's thought; none for this one"
    assert off[-1]["metadata"] is None and text_of(off[-1]).strip()


def test_tool_loop_call_run_answer(client):
    chat = chat_messages(client.predict({"text": "What's the weather in Ouagadougou?", "files": []}, thinking=True,
                          enabled_tools=["get_current_weather"], api_name="/chat", **GREEDY))
    (call,) = panels(chat, "🛠️")
    assert call["metadata"]["title"] == "🛠️ get_current_weather" and call["metadata"]["status"] == "done"
    assert '"location": "Ouagadougou"' in text_of(call)
    thought = panels(chat, "💭")[0]
    assert call["metadata"]["parent_id"] == thought["metadata"]["id"], "the call nests under the thought"

    from gemma4_ui.tools.builtin import get_current_weather

    sample = get_current_weather("Ouagadougou")
    answer = text_of(chat[-1])
    assert str(sample["temperature"]) in answer and sample["weather"] in answer


def test_the_model_acknowledges_the_media_it_received(client):
    one = chat_messages(client.predict({"text": "What did I send?", "files": [handle_file(str(EXAMPLES / "shapes.png"))]},
                         api_name="/chat", **GREEDY))
    assert "one image" in text_of(one[-1])
    clip = chat_messages(client.predict({"text": "What did I send?", "files": [handle_file(str(EXAMPLES / "speech.wav"))]},
                          api_name="/chat", **GREEDY))
    assert "audio" in text_of(clip[-1])


def test_stop_a_long_reply_in_the_browser(app_server, page):
    from test_browser import open_app
    from test_browser_turns import stop_once_the_reply_is_long

    open_app(page, app_server.url)
    page.fill("#composer textarea", "Tell me a long story.")
    page.keyboard.press("Enter")
    stop_once_the_reply_is_long(page, timeout=60_000)
    screenshot(page, "stopped")


def test_tool_loop_in_the_browser(app_server, page):
    from test_browser import open_app
    from test_browser_turns import open_the_call_panel, send_the_tool_call_example

    open_app(page, app_server.url)
    send_the_tool_call_example(page, timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    assert '"location": "Ouagadougou"' in open_the_call_panel(page)
    screenshot(page, "tool-loop")
