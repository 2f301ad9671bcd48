"""Declared ("client") tools through gradio_client: the user declares a schema, the model calls
it, the user types the result, the model answers. The model's two outputs are recorded Gemma 4
text replayed through the real template and parser (see replay.py)."""

from __future__ import annotations

import json

import pytest
from conftest import start_app
from replay import ReplayEngine

from tests.conftest import chat_messages

SCHEMA = {"name": "lookup_order", "description": "Finds an order.",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]}}
CALL = "<|tool_call>call:lookup_order{order_id:7}<tool_call|><|tool_response>"


@pytest.fixture()
def replay_server(processor):
    engine = ReplayEngine(processor, [CALL, "Your order has shipped.<turn|>", CALL, "It was cancelled.<turn|>"])
    server = start_app(engine)
    yield server, engine
    server.demo.close()


def text_of(message) -> str:
    """The message's text without the stats line under an answer."""
    text = "".join(part.get("text", "") for part in message["content"])
    return text.split("\n\n<div class='reply-stats'>")[0]


def test_declare_call_answer_resume(replay_server):
    server, engine = replay_server
    client = server.client()
    client.predict(json.dumps(SCHEMA), api_name="/declare_tool")

    chat = chat_messages(client.predict({"text": "Where is order 7?", "files": []}, enabled_tools=["lookup_order"],
                          api_name="/chat"))
    panel = chat[-1]
    assert panel["metadata"]["title"] == "🛠️ lookup_order" and panel["metadata"]["status"] == "pending"
    assert "Waiting for you" in text_of(panel)

    chat = chat_messages(client.predict('{"status": "shipped"}', enabled_tools=["lookup_order"], api_name="/tool_result"))
    assert chat[-2]["metadata"]["status"] == "done" and '"shipped"' in text_of(chat[-2])
    assert not chat[-2]["metadata"].get("duration"), "a result the user typed has no run time (no '0s')"
    assert text_of(chat[-1]) == "Your order has shipped."
    assert 'response:lookup_order{status:<|"|>shipped<|"|>}' in engine.prompts[1]


def test_cancel_a_client_call(replay_server):
    server, engine = replay_server
    engine.outputs = [CALL, "It was cancelled.<turn|>"]
    client = server.client()
    client.predict(json.dumps(SCHEMA), api_name="/declare_tool")
    chat_messages(client.predict({"text": "Where is order 7?", "files": []}, enabled_tools=["lookup_order"], api_name="/chat"))
    chat = chat_messages(client.predict(enabled_tools=["lookup_order"], api_name="/cancel_tool"))
    assert "cancelled" in chat[-2]["metadata"]["title"]
    assert "The user cancelled this call." in engine.prompts[1]
    assert text_of(chat[-1]) == "It was cancelled."


def test_a_bad_schema_is_refused_with_a_clear_message(replay_server):
    server, _ = replay_server
    client = server.client()
    bad = {"name": "bad tool", "parameters": {"type": "object"}}
    *_, notice = client.predict(json.dumps(bad), api_name="/declare_tool")
    assert notice.startswith("⚠️ The tool was not added") and "name" in notice
    *_, notice = client.predict("{not json", api_name="/declare_tool")
    assert "JSON" in notice
    *_, notice = client.predict(json.dumps(SCHEMA), api_name="/declare_tool")
    assert notice.startswith("✅ Added lookup_order")


def test_the_calculator_round_through_the_app(processor):
    """The calculator scenario: "what's 17.5% of 2,340?" with the calculator on. The model's call and
    answer are recorded Gemma 4 text; the app parses the call, checks it, runs the real
    calculator, shows the call with its result in a panel, feeds the result back, and shows the
    answer."""
    call = '<|tool_call>call:calculator{expression:<|"|>17.5% of 2,340<|"|>}<tool_call|><|tool_response>'
    engine = ReplayEngine(processor, [call, "17.5% of 2,340 is 409.5.<turn|>"])
    server = start_app(engine)
    try:
        chat = chat_messages(server.client().predict({"text": "What's 17.5% of 2,340?", "files": []},
                                                     enabled_tools=["calculator"], api_name="/chat"))
    finally:
        server.demo.close()
    (panel,) = [m for m in chat if (m.get("metadata") or {}).get("title", "").startswith("🛠️")]
    assert panel["metadata"]["title"] == "🛠️ calculator" and panel["metadata"]["status"] == "done"
    assert '"expression": "17.5% of 2,340"' in text_of(panel) and "409.5" in text_of(panel)
    assert text_of(chat[-1]) == "17.5% of 2,340 is 409.5." and chat[-1]["metadata"] is None
    assert 'response:calculator{expression:<|"|>17.5 / 100 * 2340<|"|>,result:409.5}' in engine.prompts[-1]


def test_a_declared_tool_can_be_removed(replay_server):
    server, _ = replay_server
    client = server.client()
    enabled, docs, *_ = client.predict(json.dumps(SCHEMA), [], api_name="/declare_tool")
    assert enabled["value"] == ["lookup_order"] and "lookup_order" in docs
    assert ("lookup_order", "lookup_order") in [tuple(choice) for choice in enabled["choices"]], "named once"
    enabled, docs, *_ = client.predict("lookup_order", ["lookup_order", "calculator"], api_name="/remove_tool")
    assert enabled["value"] == ["calculator"] and "lookup_order" not in docs and "calculator" in docs


def test_new_conversation_clears_the_exported_files(replay_server):
    server, _ = replay_server
    client = server.client()
    chat_messages(client.predict({"text": "Hello", "files": []}, api_name="/chat"))
    assert len(client.predict(api_name="/export")) == 2
    assert client.predict(api_name="/new_conversation")[-1] is None



def test_the_export_holds_the_conversation_and_the_template_the_model_read(processor):
    """The exported template is the conversation's own (not the draft's, nor the inspector's
    plain text, which is filled only while open), with the tools of the turn declared."""
    engine = ReplayEngine(processor, ["Order 42 has shipped.<turn|>"])
    server = start_app(engine)
    try:
        client = server.client()
        chat_messages(client.predict({"text": "Where is order 42?", "files": []}, enabled_tools=["calculator"],
                                     api_name="/chat"))
        saved, template = client.predict(enabled_tools=["calculator"], api_name="/export")
    finally:
        server.demo.close()
    turns = json.loads(open(saved, encoding="utf-8").read())["turns"]
    assert [turn["role"] for turn in turns] == ["user", "assistant"]
    written = open(template, encoding="utf-8").read()
    assert written.startswith(engine.prompts[0].removesuffix("<|turn>model\n")), "the prompt the model read..."
    assert "Order 42 has shipped." in written and "declaration:calculator" in written, "...and the reply"
