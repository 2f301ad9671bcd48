"""Scripted use: the reply as data (`/reply`), and the README's examples run against a live
app, each print checked against what its comment says it prints."""

from __future__ import annotations

import html
import re

from conftest import ROOT, chat_messages

from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn
from gemma4_ui.core.events import ReplyStats, ToolCall, ToolResult
from gemma4_ui.core.reply_data import reply_data
from gemma4_ui.core.streaming import Live


def readme_scripted_use() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Scripted use"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def squash(text: str) -> str:
    """Letters and digits only, entities decoded: what survives rendering unchanged."""
    return re.sub(r"\W", "", html.unescape(text))


def chat_texts(chat: list[dict], role: str = "assistant") -> list[str]:
    """The text of every plain bubble (no thought or tool panel) of `role` in a /chat result."""
    return [part["text"] for m in chat if m["role"] == role and not (m.get("metadata") or {}).get("title")
            for part in m["content"] if part.get("type") == "text"]


def test_the_readme_examples_print_what_their_comments_say(app_server, monkeypatch):
    code = readme_scripted_use().replace("http://127.0.0.1:7860/", app_server.url)
    printed: list[tuple] = []
    namespace = {"print": lambda *values: printed.append(values)}
    monkeypatch.chdir(ROOT)  # the example's file path is relative to the repository
    exec(compile(code, "README.md", "exec"), namespace)

    chat = namespace["chat"]
    answers, notices_shown = chat_texts(chat), [t for t in chat_texts(chat) if t.startswith("⚠️")]
    (answer,), (tokens,), (notices,) = printed[0], printed[1], printed[2]
    assert isinstance(answer, str) and not answer.startswith("⚠️"), "the answer, as plain text"
    # The chat shows the answer rendered (escaped, with its stats line); compare the words.
    assert not answer or squash(answer) in "".join(squash(text) for text in answers), "the same answer the chat shows"
    assert isinstance(tokens, int) and tokens > 0
    assert all(isinstance(n, str) for n in notices) and [f"⚠️ {n}" for n in notices] == notices_shown[:len(notices)]

    calls = namespace["reply"]["tool_calls"]
    streamed = [values[0] for values in printed[3:len(printed) - len(calls) - 1]]
    assert streamed and all(isinstance(text, str) for text in streamed)
    assert "And now in one word?" not in streamed, "the user's message is not part of the reply"
    assert all(streamed[-1].startswith(text.rstrip()) for text in streamed), "the reply grows as it streams"
    assert not streamed[-1] or squash(streamed[-1]) in "".join(squash(text) for text in answers)

    for values, call in zip(printed[len(printed) - len(calls) - 1:-1], calls):
        assert values == (call["name"], call["arguments"], "→", call["result"])
    assert printed[-1] == (len(chat),) and len(chat_texts(chat, "user")) == 4


def test_reply_data_of_a_tool_round_then_an_answer():
    call = ToolCall("calculator", {"expression": "0.175*2340"}, id="c1")
    round_ = ToolRound([call], [ToolResult("calculator", "c1", "ok", {"result": 409.5}, 0.0021)], reasoning="Use it.",
                       stats=ReplyStats(prompt_tokens=50, generated_tokens=12, time_to_first_token=0.2, duration=0.5,
                                        stop_reason="tool_call"))
    turn = AssistantTurn([round_], reasoning="Got it.", content="It is 409.5.", notice="Cut off.",
                         stats=ReplyStats(prompt_tokens=80, generated_tokens=9, time_to_first_token=0.1,
                                          duration=0.4, stop_reason="length"))
    data = reply_data(Conversation([UserTurn("What's 17.5% of 2,340?"), turn]))
    assert data["text"] == "It is 409.5." and data["thought"] == "Use it.\n\nGot it."
    assert data["tool_calls"] == [{"name": "calculator", "arguments": {"expression": "0.175*2340"}, "status": "ok",
                                   "result": {"result": 409.5}, "seconds": 0.002}]
    assert data["notices"] == ["Cut off."] and data["done"] is True
    assert data["stats"]["generated_tokens"] == 21 and data["stats"]["prompt_tokens"] == 80
    assert data["stats"]["generations"] == 2 and data["stats"]["time_to_first_token_s"] == 0.2


def test_reply_data_while_streaming_and_when_waiting_for_a_declared_tool():
    user = UserTurn("Look up order 7")
    assert reply_data(Conversation([user])) is None, "no reply yet"
    live = Live(reasoning="Thinking… ", content=" Partial ", calls=[ToolCall("lookup_order", {"id": 7})])
    data = reply_data(Conversation([user, AssistantTurn()]), live)
    assert data["done"] is False and data["text"] == "Partial" and data["thought"] == "Thinking…"
    assert data["tool_calls"][0]["status"] == "running"
    waiting = ToolRound([ToolCall("lookup_order", {"id": 7}, id="c")], [ToolResult("lookup_order", "c", "client",
                                                                                     None, 0.0)])
    data = reply_data(Conversation([user, AssistantTurn([waiting])]))
    assert data["tool_calls"][0]["status"] == "waiting" and data["tool_calls"][0]["result"] is None
    assert "/tool_result" in data["notices"][0]


def test_a_prompt_over_the_prompt_limit_is_a_notice_and_the_conversation_stays(client, tiny_engine, monkeypatch):
    """--max-prompt-tokens over the API: /reply answers the refusal as its notice, /chat shows
    it as the chat's last message; neither keeps the message, and the next one is answered."""
    monkeypatch.setattr(tiny_engine, "max_prompt_tokens", 50)
    long_message = "The lighthouse keeper counted the waves. " * 8
    tools_off = {"enabled_tools": []}  # the bundled model's tools, declared in the prompt, would not fit
    data = client.predict({"text": long_message, "files": []}, **tools_off, api_name="/reply")
    assert data["text"] == "" and data["done"] and data["stats"] is None
    assert "over this app's limit of 50 prompt tokens per request (--max-prompt-tokens" in data["notices"][0]
    chat = chat_messages(client.predict({"text": long_message, "files": []}, **tools_off, api_name="/chat"))
    assert "limit of 50 prompt tokens" in chat[-1]["content"][0]["text"]
    assert not chat_texts(chat, "user"), "the refused message is not in the conversation"
    first = client.predict({"text": "Hi", "files": []}, max_new_tokens=4, temperature=0, **tools_off,
                           api_name="/reply")
    assert first["done"] and first["stats"]["generated_tokens"] >= 1 and "limit of" not in str(first["notices"])
    chat = chat_messages(client.predict({"text": "Hello", "files": []}, max_new_tokens=4, temperature=0, **tools_off,
                                        api_name="/chat"))
    assert chat_texts(chat, "user") == ["Hi", "Hello"]


def test_a_refused_file_is_a_notice_and_the_conversation_stays(client, tmp_path):
    from gradio_client import handle_file

    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 10)
    data = client.predict({"text": "Look", "files": [handle_file(str(broken))]}, api_name="/reply")
    assert data["text"] == "" and data["done"] and "broken.png" in data["notices"][0]
    empty = client.predict({"text": " ", "files": []}, api_name="/reply")
    assert empty["notices"] == ["The message is empty: send text or a file."]
    first = client.predict({"text": "Hello", "files": []}, max_new_tokens=4, api_name="/reply")
    assert first["stats"]["generated_tokens"] <= 4 and first["done"]
