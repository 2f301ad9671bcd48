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


SAME_B = dict(b_thinking="same", b_image_budget="same", b_temperature="same", b_system_prompt="", b_tools="same",
              b_seed="same")


def test_compare_returns_both_replies_as_data_and_b_can_be_chosen(app_server):
    client = app_server.client()
    data = client.predict({"text": "Hello", "files": []}, **{**SAME_B, "b_thinking": "on"}, **FAST,
                          api_name="/compare")
    assert data["differs"] == ["thinking on"] and data["a"]["done"] and data["b"]["done"]
    counts = data["prompt"]["counts"]
    assert counts["b"]["control"] == counts["a"]["control"] + 1, "B's prompt turns thinking on"
    added = [line for line in data["prompt"]["template_diff"].splitlines() if line.startswith("+")]
    assert any("<|think|>" in line for line in added), "the diff shows where B's template differs"
    assert versions(client.predict(api_name="/branches")) == [(0, 1), (0, 2)]
    *_, chosen = client.predict(data["message_index"], data["versions"]["b"], api_name="/choose_branch")
    assert versions(chosen) == [(0, 1), (1, 2)]
    assert chosen["messages"][1]["text"] == data["b"]["text"]


def test_two_sessions_comparing_at_once_keep_their_own(app_server):
    import threading

    results = {}

    def compare(name, text, change):
        client = app_server.client()
        data = client.predict({"text": text, "files": []}, **{**SAME_B, **change}, **FAST, api_name="/compare")
        results[name] = (data, client.predict(api_name="/branches"))

    threads = [threading.Thread(target=compare, args=("alice", "Hello", {"b_thinking": "on"})),
               threading.Thread(target=compare, args=("bob", "Bonjour", {"b_temperature": "0.7"}))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    (alice, alice_tree), (bob, bob_tree) = results["alice"], results["bob"]
    assert alice["differs"] == ["thinking on"] and bob["differs"] == ["temperature 0.7"]
    assert [m["text"] for m in alice_tree["messages"]][0] == "Hello" and versions(alice_tree) == [(0, 1), (0, 2)]
    assert [m["text"] for m in bob_tree["messages"]][0] == "Bonjour" and versions(bob_tree) == [(0, 1), (0, 2)]
