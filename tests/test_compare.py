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


def run(handlers, user, conversation, message, options=OPTIONS, **b):
    side_b = {"b_thinking": "same", "b_image_budget": "same", "b_temperature": None, "b_system_prompt": "",
              "b_tools": "same", "b_seed": "same", "b_model": "same", "b_no_system_prompt": False,
              "answer_message": "last", **b}
    *_, final = handlers.compare.compare_data(message, *side_b.values(), conversation, user, options)
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
    data, _ = run(handlers, user, retried.conversation, None, sampled, b_seed="6")
    assert data["differs"] == ["seed 6"] and data["a"]["text"] == first.conversation.turns[1].content


def test_an_earlier_message_answered_again_keeps_what_followed_as_a_branch(handlers):
    user = handlers.new_session()
    *_, first = handlers.turns.respond({"text": "Hello", "files": []}, Conversation(), user, OPTIONS)
    *_, second = handlers.turns.respond({"text": "What is 2 + 2?", "files": []}, first.conversation, user, OPTIONS)
    assert len(second.conversation.turns) == 4
    data, conversation = run(handlers, user, second.conversation, None, b_thinking="on", answer_message=0)
    assert data["message_index"] == 1 and data["versions"] == {"a": 1, "b": 2}
    assert [turn.text for turn in conversation.turns[::2]] == ["Hello"], "the chat continues from A's answer"
    assert user.branches.versions() == [(0, 1), (1, 3)]
    earlier = user.branches.choose(1, 0)
    assert [t.text for t in earlier.turns[::2]] == ["Hello", "What is 2 + 2?"], "what followed stays on its branch"


def test_a_message_that_is_not_the_users_is_said_and_the_last_one_is_answered(handlers):
    user = handlers.new_session()
    *_, first = handlers.turns.respond({"text": "Hello", "files": []}, Conversation(), user, OPTIONS)
    with pytest.warns(UserWarning, match="no message of yours at '1'"):
        data, _ = run(handlers, user, first.conversation, None, b_temperature=0.7, answer_message="1")
    assert data["message_index"] == 1 and data["a"]["done"]


def test_b_without_the_system_prompt_and_with_one_tool(handlers):
    user = handlers.new_session()
    options = ChatOptions(max_new_tokens=4, temperature=0, system_prompt="Answer in French.",
                          enabled_tools=["get_current_weather"])
    data, _ = run(handlers, user, Conversation(), {"text": "Hi", "files": []}, options,
                  b_no_system_prompt=True, b_tools=["calculator"])
    assert data["differs"] == ["no system prompt", "tools: calculator"]
    removed = "\n".join(line for line in data["prompt"]["template_diff"].splitlines() if line.startswith("-"))
    added = "\n".join(line for line in data["prompt"]["template_diff"].splitlines() if line.startswith("+"))
    assert "Answer in French." in removed and "get_current_weather" in removed and "calculator" in added
    with pytest.warns(UserWarning, match="no tool named 'telepathy'"):
        data, _ = run(handlers, user, Conversation(), {"text": "Hi", "files": []}, options,
                      b_tools="calculator, telepathy")
    assert data["differs"] == ["tools: calculator"]


@pytest.fixture(scope="module")
def unified(tmp_path_factory):
    """A second model of another kind: a tiny random Gemma 4 Unified (its own processor)."""
    from gemma4_ui.engines.local.engine import LocalEngine
    from scripts.build_tiny_checkpoints import build_unified

    return LocalEngine(str(build_unified(tmp_path_factory.mktemp("second") / "unified")), device="cpu").load()


def test_b_answers_with_the_second_model_and_the_prompts_differ_by_its_processor(tiny_engine, unified):
    handlers = SharedChatHandlers(tiny_engine, Settings(model="tiny"), second=unified)
    assert handlers.shared.models() == [tiny_engine.status.name, "unified"]
    user = handlers.new_session()
    message = {"text": "What is this?", "files": [str(SHAPES)]}
    data, conversation = run(handlers, user, Conversation(), message, b_model="unified")
    assert data["models"] == {"a": tiny_engine.status.name, "b": "unified"} and data["differs"] == ["model unified"]
    assert data["a"]["done"] and data["b"]["done"] and data["versions"] == {"a": 0, "b": 1}
    counts = data["prompt"]["counts"]
    assert counts["a"]["image"] > 0 and counts["b"]["image"] > 0
    # B's reply came from the other model: it is a version beside A's, and the chat goes on with A.
    kept = handlers.compare.keep("b", conversation, user)
    assert kept.conversation.turns[1].content == data["b"]["text"] and user.branches.versions()[1] == (1, 2)
    with pytest.warns(UserWarning, match="no model named 'gpt-5'"):
        data, _ = run(handlers, handlers.new_session(), Conversation(), {"text": "Hi", "files": []}, b_model="gpt-5")
    assert data["differs"] == [] and data["models"]["b"] == tiny_engine.status.name
