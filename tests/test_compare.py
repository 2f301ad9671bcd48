"""Compare: one turn answered under two settings, on the real tiny model, and what differed
in what the model received (token counts per modality, the raw template's diff)."""

from __future__ import annotations

import pytest
from conftest import ROOT

from gemma4_ui.config import Settings
from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.prompt import build_spec
from gemma4_ui.inspector import prompt_diff
from gemma4_ui.inspector.layers import counting_processor
from gemma4_ui.media.decoding import load_media
from gemma4_ui.tools.registry import default_registry
from gemma4_ui.web.handlers.shared import SharedChatHandlers

OPTIONS = ChatOptions(max_new_tokens=4, temperature=0)
SHAPES = ROOT / "assets" / "examples" / "shapes.png"


def side(processor, conversation, options):
    spec = build_spec(conversation, options, default_registry())
    return prompt_diff.prompt_side(processor, counting_processor(processor), spec, conversation.media(),
                                   options.image_budget)


def test_thinking_shows_in_the_template_diff_and_the_counts(processor):
    conversation = Conversation([UserTurn("Why is the sky blue?")])
    a, b = side(processor, conversation, OPTIONS), side(processor, conversation, ChatOptions(thinking=True))
    difference = prompt_diff.difference(a, b)
    added = [line for line in difference["template_diff"].splitlines() if line.startswith("+") and "+++" not in line]
    assert added and any("<|think|>" in line for line in added), difference["template_diff"]
    assert difference["counts"]["b"]["control"] > difference["counts"]["a"]["control"]
    assert difference["counts"]["a"]["image"] == difference["counts"]["b"]["image"] == 0


def test_image_budgets_differ_in_soft_tokens_not_in_the_template(processor):
    conversation = Conversation([UserTurn("What is this?", [load_media(str(SHAPES))])])
    a = side(processor, conversation, ChatOptions(image_budget=70))
    b = side(processor, conversation, ChatOptions(image_budget=1120))
    difference = prompt_diff.difference(a, b)
    assert difference["template_diff"] == ""
    assert difference["counts"]["a"]["image"] <= 70 < difference["counts"]["b"]["image"] <= 1120
    html = prompt_diff.counts_table_html(a.counts, b.counts)
    assert "class='differs'><td>Image" in html and "<td>Text" in html
    assert "the same" in prompt_diff.diff_html("")


def test_the_diff_is_escaped():
    diff = prompt_diff.template_diff("<b>x</b>\n", "<script>y</script>\n")
    html = prompt_diff.diff_html(diff)
    assert "<script>" not in html and "&lt;script&gt;" in html and "diff-added" in html


@pytest.fixture()
def handlers(tiny_engine):
    return SharedChatHandlers(tiny_engine, Settings(model="tiny"))


def run(handlers, user, conversation, message, **b):
    side_b = {"b_thinking": "same", "b_image_budget": "same", "b_temperature": None, "b_system_prompt": "",
              "b_tools": "same", "b_seed": "same", **b}
    *_, final = handlers.compare.compare_data(message, *side_b.values(), conversation, user, OPTIONS)
    return final


def test_compare_a_new_message_keeps_both_replies_as_versions(handlers):
    user = handlers.new_session()
    data, conversation = run(handlers, user, Conversation(), {"text": "Hello", "files": []}, b_thinking="on")
    assert data["differs"] == ["thinking on"] and data["a"]["done"] and data["b"]["done"]
    assert data["message_index"] == 1 and data["versions"] == {"a": 0, "b": 1}
    assert any("<|think|>" in line for line in data["prompt"]["template_diff"].splitlines() if line.startswith("+"))
    assert [type(t) for t in conversation.turns] == [UserTurn, AssistantTurn]
    assert user.branches.versions() == [(0, 1), (0, 2)], "the chat continues with A; B is a version beside it"
    kept = handlers.compare.keep("b", conversation, user)
    assert user.branches.versions() == [(0, 1), (1, 2)] and kept.conversation.turns[1] is not conversation.turns[1]


def test_compare_the_last_message_again_adds_two_versions(handlers):
    user = handlers.new_session()
    *_, first = handlers.turns.respond({"text": "Hello", "files": []}, Conversation(), user, OPTIONS)
    data, conversation = run(handlers, user, first.conversation, None, b_temperature=0.7)
    assert data["differs"] == ["temperature 0.7"] and data["versions"] == {"a": 1, "b": 2}
    assert user.branches.versions() == [(0, 1), (1, 3)] and conversation.turns[0].text == "Hello"


def test_compare_with_nothing_to_answer_warns(handlers):
    user = handlers.new_session()
    with pytest.warns(UserWarning, match="Type a message"):
        data, conversation = run(handlers, user, Conversation(), None)
    assert data["a"] is None and conversation.turns == []


def test_a_refused_file_is_said_and_nothing_is_compared(handlers, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    user = handlers.new_session()
    with pytest.warns(UserWarning, match="broken.png"):
        data, conversation = run(handlers, user, Conversation(), {"text": "Look", "files": [str(broken)]})
    assert data["a"]["notices"] and "broken.png" in data["a"]["notices"][0] and data["b"] is None
    assert conversation.turns == [] and data["message_index"] is None


def test_the_same_seed_samples_the_same_reply_and_compare_can_change_it(handlers):
    """At temperature 2 (the tiny model writes something else each time) a seed makes the
    sampled reply reproducible (one reply generating at a time)."""
    user = handlers.new_session()
    sampled = ChatOptions(max_new_tokens=12, temperature=2.0, seed=5)
    *_, first = handlers.turns.respond({"text": "Hello", "files": []}, Conversation(), user, sampled)
    *_, retried = handlers.turns.retry(first.conversation, user, sampled)
    assert retried.conversation.turns[1].raw == first.conversation.turns[1].raw
    *_, (data, _) = handlers.compare.compare_data(None, "same", "same", "same", "", "same", "6",
                                                  retried.conversation, user, sampled)
    assert data["differs"] == ["seed 6"] and data["a"]["text"] == first.conversation.turns[1].content
