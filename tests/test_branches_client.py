"""Versions through `gradio_client`, as a script uses them: /chat, /retry, /branches and
/choose_branch on a real Gradio server running the bundled tiny Gemma 4; two clients at once
keep their own trees."""

from __future__ import annotations

from tests.conftest import chat_messages

FAST = dict(max_new_tokens=4, temperature=0)


def versions(data: dict) -> list[tuple[int, int]]:
    return [(m["version"], m["versions"]) for m in data["messages"]]


def test_retry_then_choose_a_branch_from_a_script(app_server):
    alice, bob = app_server.client(), app_server.client()
    alice.predict({"text": "Hello", "files": []}, **FAST, api_name="/chat")
    bob.predict({"text": "Bonjour", "files": []}, **FAST, api_name="/chat")
    alice.predict(**FAST, api_name="/retry")
    alice.predict(**FAST, api_name="/retry")
    data = alice.predict(api_name="/branches")
    assert versions(data) == [(0, 1), (2, 3)] and data["messages"][0]["text"] == "Hello"
    assert versions(bob.predict(api_name="/branches")) == [(0, 1), (0, 1)], "Bob's chat has no versions"

    history, live, pick, count, chosen = alice.predict(1, 0, api_name="/choose_branch")
    assert versions(chosen) == [(0, 1), (0, 3)] and count == "1 / 3"
    shown = [part.get("text", "") for m in chat_messages([history]) for part in m["content"]]
    assert sum("‹ 1/3 ›" in text for text in shown) == 1, "the reply says which version it is"
    assert versions(alice.predict(api_name="/branches")) == [(0, 1), (0, 3)], "the choice holds"

    # The next message continues the branch shown.
    alice.predict({"text": "And then?", "files": []}, **FAST, api_name="/chat")
    data = alice.predict(api_name="/branches")
    assert versions(data) == [(0, 1), (0, 3), (0, 1), (0, 1)] and data["messages"][2]["text"] == "And then?"


def test_a_branch_that_does_not_exist_is_refused_and_nothing_changes(app_server):
    client = app_server.client()
    client.predict({"text": "Hello", "files": []}, **FAST, api_name="/chat")
    *_, chosen = client.predict(1, 7, api_name="/choose_branch")
    assert versions(chosen) == [(0, 1), (0, 1)]
    *_, chosen = client.predict(9, 0, api_name="/choose_branch")
    assert len(chosen["messages"]) == 2
