"""The app end to end through `gradio_client`: a real Gradio server on loopback running the
bundled tiny Gemma 4 through the real transformers classes."""

from __future__ import annotations

import threading
import time

from conftest import ROOT
from gradio_client import handle_file

from tests.conftest import chat_messages

EXAMPLES = ROOT / "assets" / "examples"


def texts(messages):
    out = []
    for m in messages:
        for part in m["content"]:
            if part.get("type") == "text":
                out.append(part["text"])
    return out


def test_api_is_documented_with_named_parameters(client):
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    chat = api["/chat"]
    names = [p["parameter_name"] for p in chat["parameters"]]
    assert names[:3] == ["message", "system_prompt", "thinking"]
    assert "enabled_tools" in names and "/stop" in api and "/tool_result" in api


def test_reply_streams(client):
    job = client.submit({"text": "Hello!", "files": []}, max_new_tokens=48, temperature=0, api_name="/chat")
    updates = [update for update in job]
    final = chat_messages(job.result())
    assert len(updates) >= 3, "the reply arrives in several updates"
    assert final[0]["role"] == "user" and texts([final[0]]) == ["Hello!"]
    assert final[-1]["role"] == "assistant"


def test_history_is_kept_between_turns_and_sessions_are_isolated(app_server):
    alice, bob = app_server.client(), app_server.client()
    results = {}

    def chat(name, client, text):
        results[name] = chat_messages(client.predict({"text": text, "files": []}, max_new_tokens=16, temperature=0,
                                       api_name="/chat"))

    threads = [threading.Thread(target=chat, args=("alice", alice, "I am Alice.")),
               threading.Thread(target=chat, args=("bob", bob, "I am Bob."))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    second = chat_messages(alice.predict({"text": "Who am I?", "files": []}, max_new_tokens=16, temperature=0, api_name="/chat"))
    user_texts = [texts([m])[0] for m in second if m["role"] == "user"]
    assert user_texts == ["I am Alice.", "Who am I?"]
    assert [texts([m])[0] for m in results["bob"] if m["role"] == "user"] == ["I am Bob."]


def test_image_message_shows_the_file_then_the_reply(client):
    result = chat_messages(client.predict({"text": "What is this?", "files": [handle_file(str(EXAMPLES / "shapes.png"))]},
                            max_new_tokens=8, temperature=0, api_name="/chat"))
    assert result[0]["role"] == "user" and result[0]["content"][0]["type"] == "file"
    assert texts([result[1]]) == ["What is this?"]


def test_corrupt_file_leaves_the_history_intact(client, tmp_path):
    chat_messages(client.predict({"text": "First message", "files": []}, max_new_tokens=8, temperature=0, api_name="/chat"))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 10)
    result = chat_messages(client.predict({"text": "Look", "files": [handle_file(str(broken))]}, api_name="/chat"))
    user_texts = [texts([m])[0] for m in result if m["role"] == "user"]
    assert user_texts == ["First message"], "the bad message was not added"
    assert "broken.png" in texts([result[-1]])[0], "the chat says which file was refused"
    again = chat_messages(client.predict({"text": "Second message", "files": []}, max_new_tokens=8, temperature=0,
                           api_name="/chat"))
    assert [texts([m])[0] for m in again if m["role"] == "user"] == ["First message", "Second message"]


def test_stop_ends_generation(app_server):
    # Greedy, the bundle writes a long story of hundreds of tokens (test_tiny_model checks it);
    # sampled, it may end the story after a dozen, before Stop is pressed.
    client = app_server.client()
    job = client.submit({"text": "Tell me a long story.", "files": []}, max_new_tokens=4000, temperature=0,
                        api_name="/chat")
    deadline = time.time() + 60
    while not job.outputs() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    stopped_at = time.time()
    client.predict(api_name="/stop")
    final = chat_messages(job.result(timeout=30))
    assert time.time() - stopped_at < 10
    assert "Stopped" in texts([final[-1]])[-1]
    for _ in range(50):  # the generate thread ends, nothing keeps running
        if not any(t.name == "gemma4-generate" for t in threading.enumerate()):
            break
        time.sleep(0.1)
    assert not any(t.name == "gemma4-generate" for t in threading.enumerate())


def test_every_gallery_example_runs_offline(app_server):
    """A presenter clicks through the examples gallery: each one (its media, thinking and
    tools) gets a reply on the bundled model, none an error, each in a fresh conversation."""
    from gemma4_ui.web.examples import examples

    rows, labels = examples([])  # each example with only the tools it needs
    assert len(rows) == len(labels) == 7
    for label, (message, thinking, tools) in zip(labels, rows):
        client = app_server.client()
        files = [handle_file(path) for path in message["files"]]
        chat = chat_messages(client.predict({"text": message["text"], "files": files}, thinking=thinking, enabled_tools=tools,
                              max_new_tokens=16, temperature=0, api_name="/chat"))
        sent = [m for m in chat if m["role"] == "user"]
        assert texts(sent)[-1] == message["text"], label
        assert len(sent) == len(message["files"]) + 1, f"{label}: every file is shown"
        assert chat[-1]["role"] == "assistant", label
        # With random weights and 16 tokens a reply may be cut short; anything else is a failure.
        notices = [t for t in texts(chat) if t.startswith("⚠️")]
        assert all(t.startswith(("⚠️ Cut off", "⚠️ The reply ended")) for t in notices), (label, notices)
