"""Many users at once on one app: two `gradio_client` sessions and a browser page. Nothing one
user does reaches another; Stop stops a turn wherever it is (queued or generating); a New
conversation in the middle of a reply stops it and the next message is answered; a client
tool left waiting is cancelled visibly when the user moves on. A page's session is forgotten
once it is closed or idle past its time to live, and a conversation the app has let go stays
on the page that shows it.

The model is scripted (recorded Gemma 4 outputs through the real template and parser, see
replay.py), paced like a slow model so that buttons can be pressed in the middle of a reply."""

from __future__ import annotations

import gc
import json
import time
import weakref

import pytest
from conftest import screenshot, start_app
from gradio_client.exceptions import AppError
from gradio_client.utils import Status
from replay import ReplayEngine
from test_browser import EXAMPLES, attach, open_app
from test_client_tools import text_of

from tests.conftest import chat_messages

ORDER_TOOL = {"name": "lookup_order", "description": "Finds an order.",
              "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}},
                             "required": ["order_id"]}}
FLIGHT_TOOL = {"name": "find_flight", "description": "Finds a flight.",
               "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}
STORY = "Once upon a time " * 150 + "<turn|>"
CALL = "<|tool_call>call:lookup_order{order_id:7}<tool_call|><|tool_response>"
MOVED_ON = "The user sent a new message instead of a result."


def scripted(prompt: str) -> str:
    """The reply to the last user message in the prompt."""
    last = prompt.rsplit("<|turn>user\n", 1)[-1]
    if "<|tool_response>" in last or "response:" in last:
        return "Your order has shipped.<turn|>"
    if "long story" in last:
        return STORY
    if "order 7" in last:
        return CALL
    return "Hello there.<turn|>"


@pytest.fixture()
def scripted_server(processor):
    engine = ReplayEngine(processor, scripted, seconds_per_chunk=0.02)
    server = start_app(engine)  # one generation at a time: the others wait in the queue
    yield server, engine
    server.demo.close()


def user_texts(chat) -> list[str]:
    return [text_of(m) for m in chat if m["role"] == "user"]


def wait_until(condition, timeout: float = 30.0, message: str = "") -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, message or "timed out"
        time.sleep(0.05)


def streaming(job) -> bool:
    outputs = job.outputs()
    return bool(outputs) and any(text_of(m).startswith("Once upon") for m in chat_messages(outputs[-1])
                                 if m["role"] == "assistant")


def test_many_users_one_app(scripted_server, page):
    server, engine = scripted_server
    alice, bob = server.client(), server.client()
    shared = [spec.name for spec in server.session.registry.specs()]

    # 1. Declarations never cross: each user sees the built-ins and their own tools only.
    *_, notice = alice.predict(json.dumps(ORDER_TOOL), [], api_name="/declare_tool")
    assert notice.startswith("✅")
    enabled, docs, *_, notice = bob.predict(json.dumps(FLIGHT_TOOL), [], api_name="/declare_tool")
    assert notice.startswith("✅") and enabled["value"] == ["find_flight"]
    offered = [value for _, value in enabled["choices"]]
    assert "find_flight" in offered and "lookup_order" not in offered
    assert "find_flight" in docs and "lookup_order" not in docs
    chat_messages(bob.predict({"text": "Hi", "files": []}, enabled_tools=["find_flight"], api_name="/chat"))
    assert "find_flight" in engine.prompts[-1] and "lookup_order" not in engine.prompts[-1]
    with pytest.raises(AppError, match="not in the list of choices"):  # Alice's tool is no choice of Bob's
        chat_messages(bob.predict({"text": "Hi", "files": []}, enabled_tools=["lookup_order"], api_name="/chat"))
    assert [spec.name for spec in server.session.registry.specs()] == shared, "the shared registry is unchanged"
    open_app(page, server.url)
    page.get_by_role("tab", name="Tools").click()
    offered = page.inner_text("#enabled-tools")
    assert "lookup_order" not in offered and "find_flight" not in offered
    page.get_by_role("tab", name="Inspector").click()

    # 2. Stop while queued: Bob's turn waits behind Alice's; his Stop stops it before it starts.
    alice_job = alice.submit({"text": "Tell me a long story, Alice", "files": []}, api_name="/chat")
    wait_until(lambda: streaming(alice_job), message="Alice's story streams")
    bob_job = bob.submit({"text": "Tell me a long story, Bob", "files": []}, api_name="/chat")
    wait_until(lambda: bob_job.status().code == Status.IN_QUEUE, message="Bob waits in the queue")
    bob.predict(api_name="/stop")
    alice.predict(api_name="/stop")
    alice_chat, bob_chat = chat_messages(alice_job.result(timeout=30)), chat_messages(bob_job.result(timeout=30))
    assert text_of(alice_chat[-1]) == "⚠️ Stopped."
    assert user_texts(bob_chat)[-1] == "Tell me a long story, Bob"
    assert text_of(bob_chat[-1]) == "⚠️ Stopped before the model wrote anything."
    assert not any("Bob" in prompt for prompt in engine.prompts), "Bob's stopped turn never reached the model"

    # 3. New conversation in the middle of a reply, in the browser: the reply stops, the chat
    #    stays empty, and the next message appears and is answered.
    page.fill("#composer textarea", "Tell me a long story, page")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Once upon')",
                           timeout=30_000)
    page.click("#new-chat")
    page.wait_for_function("() => !document.querySelector('#chatbot').innerText.includes('Once upon')",
                           timeout=10_000)
    page.wait_for_timeout(1000)  # the old reply would keep streaming in here
    assert "Once upon" not in page.inner_text("#chatbot")
    page.fill("#composer textarea", "Hello after a new conversation")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('Hello there.')",
                           timeout=30_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=30_000)
    shown = page.inner_text("#chatbot")
    assert "Hello after a new conversation" in shown and "Once upon" not in shown and "long story" not in shown
    screenshot(page, "new-conversation-during-a-reply")

    # ... and through the API: the reply ends at once, the next message starts a fresh chat.
    job = alice.submit({"text": "Tell me a long story again", "files": []}, api_name="/chat")
    wait_until(lambda: streaming(job), message="the story streams")
    alice.predict(api_name="/new_conversation")
    job.result(timeout=10)
    chat = chat_messages(alice.predict({"text": "Hello again", "files": []}, api_name="/chat"))
    assert user_texts(chat) == ["Hello again"] and text_of(chat[-1]) == "Hello there."

    # 4. A client tool left waiting is cancelled, visibly, when the user sends a new message.
    chat = chat_messages(alice.predict({"text": "Where is order 7?", "files": []}, enabled_tools=["lookup_order"],
                         api_name="/chat"))
    assert chat[-1]["metadata"]["status"] == "pending" and "Waiting for you" in text_of(chat[-1])
    chat = chat_messages(alice.predict({"text": "Never mind, hello", "files": []}, enabled_tools=["lookup_order"],
                         api_name="/chat"))
    (panel,) = [m for m in chat if (m.get("metadata") or {}).get("title", "").startswith("🛠️ lookup_order")]
    assert panel["metadata"]["status"] == "done" and panel["metadata"]["title"].endswith("cancelled")
    assert MOVED_ON in text_of(panel)
    assert MOVED_ON in engine.prompts[-1], "the model is told"
    assert text_of(chat[-1]) == "Hello there."


def held(server, kind) -> list:
    """The values of type `kind` Gradio holds in its visitors' states, one per page or client."""
    return [value for state in server.demo.server_app.state_holder.session_data.values()
            for value in state.state_data.values() if isinstance(value, kind)]


def visitor_sessions(server) -> list:
    from gemma4_ui.web.session import UserSession

    return held(server, UserSession)


def attach_and_hold(page, server):
    """Attach a picture, which the inspector decodes into the page's session; a weak
    reference to that session."""
    attach(page, EXAMPLES / "shapes.png")
    page.wait_for_function("() => /Image soft tokens\\s+[1-9]/.test(document.querySelector('#token-counts')"
                           ".innerText)", timeout=60_000)
    [session] = visitor_sessions(server)
    assert len(session.uploads._unsent) == 1, "the unsent upload, decoded"
    reference = weakref.ref(session)
    del session  # Playwright keeps its callers' frames: this one must not hold the session
    return reference


def collected(reference) -> bool:
    gc.collect()
    return reference() is None


def test_a_visitor_who_left_does_not_leave_their_session_behind(processor, browser, monkeypatch):
    """A closed page's session, with the decoded upload it held, is forgotten after Gradio's
    time to live for closed pages (an hour; a second under GRADIO_IS_E2E_TEST)."""
    monkeypatch.setenv("GRADIO_IS_E2E_TEST", "1")  # also a heartbeat every 0.25 s, which sees the close
    server = start_app(ReplayEngine(processor, lambda prompt: "Noted.<turn|>"))
    try:
        context = browser.new_context()
        page = context.new_page()
        open_app(page, server.url)
        reference = attach_and_hold(page, server)
        context.close()
        wait_until(lambda: collected(reference), timeout=15, message="the closed page's session stayed")
    finally:
        server.demo.close()


def test_an_idle_page_starts_a_new_session_after_the_time_to_live(processor, page, monkeypatch):
    """An open page's session is forgotten once the time to live has passed since the page's
    load, its draft's last change or its last turn; the page then goes on with a new one."""
    from gemma4_ui.web import layout

    # Long enough that the new session outlives its own turn and the refresh after it on a busy
    # machine (the time to live counts from the last time an event returned the state).
    monkeypatch.setattr(layout, "SESSION_SECONDS", 8)
    server = start_app(ReplayEngine(processor, lambda prompt: "Noted.<turn|>"))
    try:
        open_app(page, server.url)
        reference = attach_and_hold(page, server)
        wait_until(lambda: collected(reference), timeout=30, message="the session outlived its time to live")
        page.fill("#composer textarea", "Still there?")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#chat-history').innerText.includes('Noted.')",
                               timeout=60_000)
        page.wait_for_function("() => document.querySelector('#template-messages').innerText.includes('Noted.')",
                               timeout=30_000)  # the inspector too, shown afresh to the new session
        assert len(visitor_sessions(server)) == 1
    finally:
        server.demo.close()


def held_conversations(server) -> list:
    from gemma4_ui.core.conversation import Conversation

    return [conversation for conversation in held(server, Conversation) if conversation.turns]


def test_a_page_whose_conversation_the_app_let_go_keeps_it_on_screen(processor, page, monkeypatch):
    """Past its time to live the app forgets a conversation the page still shows: a message
    sent then, a retry or an undo says so and leaves the chat and the draft as they are; a
    New conversation goes on."""
    from gemma4_ui.web import layout

    monkeypatch.setattr(layout, "SESSION_SECONDS", 8)
    server = start_app(ReplayEngine(processor, lambda prompt: "Noted.<turn|>"))
    history = page.locator("#chat-history")
    try:
        open_app(page, server.url)
        page.fill("#composer textarea", "Remember the number 42.")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#chat-history').innerText.includes('Noted.')",
                               timeout=60_000)
        wait_until(lambda: not held_conversations(server), timeout=15, message="the conversation outlived its time")

        page.fill("#composer textarea", "What was the number?")
        page.keyboard.press("Enter")
        notice = page.locator("#chat-live", has_text="no longer holds this conversation")
        notice.wait_for(timeout=30_000)
        assert page.locator(".toast-body", has_text="no longer holds this conversation").count() >= 1
        assert "Remember the number 42." in history.inner_text() and "Noted." in history.inner_text()
        page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
        assert page.input_value("#composer textarea") == "What was the number?", "the draft stays"
        screenshot(page, "conversation-let-go")

        for action in ("Retry", "Undo"):
            page.locator(f"#chat-history button[aria-label='{action}']").last.click()
            time.sleep(1.0)
            assert "Noted." in history.inner_text(), f"{action} kept the chat on screen"
            assert notice.count() == 1

        page.click("#new-chat")
        page.wait_for_function("() => !document.querySelector('#chat-history').innerText.includes('Noted.')",
                               timeout=30_000)
        page.fill("#composer textarea", "Hello again.")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('#chat-history').innerText.includes('Noted.')",
                               timeout=60_000)
        assert "Remember the number" not in history.inner_text()
    finally:
        server.demo.close()
