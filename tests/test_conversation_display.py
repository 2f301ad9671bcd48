"""The canonical conversation rendered at its two edges: Gemma 4 message dicts and the chat."""

from __future__ import annotations

from conftest import ROOT

from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn, to_gemma_messages
from gemma4_ui.core.events import ToolCall
from gemma4_ui.media.decoding import load_media
from gemma4_ui.tools.registry import ToolResult
from gemma4_ui.turns import Live
from gemma4_ui.web.display import render, turn_of_message

EXAMPLES = ROOT / "assets" / "examples"


def media(*names):
    return [load_media(str(EXAMPLES / n)) for n in names]


def test_images_and_video_before_text_audio_after():
    turn = UserTurn("What is this?", media("speech.wav", "shapes.png", "bouncing_ball.mp4"))
    (message,) = to_gemma_messages(Conversation([turn]))
    assert [part["type"] for part in message["content"]] == ["image", "video", "text", "audio"]


def test_a_tool_round_is_one_gemma_native_message_with_the_answer():
    call = ToolCall("calculator", {"expression": "2+2"}, id="call_0")
    result = ToolResult("calculator", "call_0", "ok", {"result": 4}, 0.0)
    conversation = Conversation([UserTurn("2+2?"),
                                 AssistantTurn(rounds=[ToolRound([call], [result], reasoning="Add.")],
                                               content="4", reasoning="Done.")])
    messages = to_gemma_messages(conversation, system_prompt="Be brief.")
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[2] == {
        "role": "assistant",
        "tool_calls": [{"id": "call_0", "type": "function",
                        "function": {"name": "calculator", "arguments": {"expression": "2+2"}}}],
        "tool_responses": [{"name": "calculator", "response": {"result": 4}}],
        "content": "4",
        "reasoning": "Add.",
    }
    # Once a later user message exists, the exchange's thought is no longer sent.
    conversation.turns.append(UserTurn("thanks"))
    assert "reasoning" not in to_gemma_messages(conversation)[1]


def test_thinking_panel_is_pending_while_thinking_then_done_with_its_duration():
    conversation = Conversation([UserTurn("hi"), AssistantTurn()])
    thinking = render(conversation, Live(reasoning="Let me think", thinking_started=1.0))
    assert thinking[-1]["metadata"]["status"] == "pending" and thinking[-1]["content"] == "Let me think"
    answering = render(conversation, Live(reasoning="Let me think", thinking_started=1.0, thinking_seconds=2.04,
                                          content="Hello"))
    assert answering[-2]["metadata"] == {"title": "💭 Thinking", "id": "think-1-0", "status": "done",
                                         "duration": 2.0}
    assert answering[-1] == {"role": "assistant", "content": "Hello"}
    assert all("metadata" not in m for m in render(Conversation([UserTurn("hi"), AssistantTurn(content="Hi")])))


def test_call_panels_nest_under_the_thought_and_show_results():
    call = ToolCall("get_current_weather", {"location": "Lima"}, id="call_0")
    ok = ToolResult("get_current_weather", "call_0", "ok", {"temperature": 19}, 0.25)
    round_ = ToolRound([call], [ok], reasoning="Check the weather.", thinking_seconds=1.0)
    chat = render(Conversation([UserTurn("Weather?"), AssistantTurn(rounds=[round_], content="19.")]))
    thought, panel = chat[1], chat[2]
    assert thought["metadata"]["title"] == "💭 Thinking · 🛠️ get_current_weather"
    assert panel["metadata"]["parent_id"] == thought["metadata"]["id"]
    assert panel["metadata"]["status"] == "done" and panel["metadata"]["duration"] == 0.25
    assert '"temperature": 19' in panel["content"]


def test_failed_calls_say_so_in_their_title():
    call = ToolCall("calculator", {"expression": "1/0"}, id="call_0")
    failed = ToolResult("calculator", "call_0", "error", {"error": "division by zero"}, 0.0, "division by zero")
    timed_out = ToolResult("calculator", "call_0", "timeout", {"error": "took too long"}, 10.0, "took too long")
    for result, word in ((failed, "error"), (timed_out, "timed out")):
        chat = render(Conversation([UserTurn("?"), AssistantTurn(rounds=[ToolRound([call], [result])])]))
        assert chat[1]["metadata"]["title"].endswith(word) and "parent_id" not in chat[1]["metadata"]


def test_media_show_as_files_before_the_text():
    chat = render(Conversation([UserTurn("Look", media("shapes.png"))]))
    assert chat[0]["content"]["path"].endswith("shapes.png") and chat[1]["content"] == "Look"


def test_a_settled_answer_has_its_stats_line_under_it():
    from gemma4_ui.core.events import ReplyStats

    calling = ReplyStats(prompt_tokens=40, generated_tokens=12, time_to_first_token=0.25, duration=1.0)
    answering = ReplyStats(prompt_tokens=70, generated_tokens=21, time_to_first_token=0.1, duration=2.1)
    round_ = ToolRound([ToolCall("calculator", {"expression": "1"})], [], stats=calling)
    chat = render(Conversation([UserTurn("?"), AssistantTurn(rounds=[round_], content="Done.", stats=answering)]))
    answer = chat[-1]["content"]
    assert answer.startswith("Done.\n\n<div class='reply-stats'>")
    assert "0.25 s to first token" in answer and "10.0 tokens/s" in answer
    assert "70 tokens in, 33 out" in answer and "2 rounds" in answer
    # While it streams, and without stats, the answer is the text alone.
    assert render(Conversation([UserTurn("hi"), AssistantTurn(content="Hi")]))[-1]["content"] == "Hi"


def test_each_chat_message_knows_its_turn():
    """A click on a chat message names a message index; the turn behind it is found from the
    same rendering (media bubbles, thoughts and tool panels each count)."""
    call = ToolCall("calculator", {"expression": "2+2"}, id="call_0")
    result = ToolResult("calculator", "call_0", "ok", {"result": 4}, 0.0)
    conversation = Conversation([
        UserTurn("Look", media("shapes.png", "street.jpg")),
        AssistantTurn(content="Two images.", reasoning="They sent two."),
        UserTurn("2+2?"),
        AssistantTurn(rounds=[ToolRound([call], [result])], content="4"),
    ])
    shown = render(conversation)
    turns = [turn_of_message(conversation, i) for i in range(len(shown))]
    assert turns == sorted(turns) and set(turns) == {0, 1, 2, 3}
    assert turns.count(0) == 3, "two images and the text"
    assert [m["role"] for m, t in zip(shown, turns) if t in (1, 3)] == ["assistant"] * (turns.count(1) + turns.count(3))
    assert turn_of_message(conversation, len(shown)) is None


def test_a_streaming_turn_leaves_the_history_alone_and_renders_only_what_it_adds():
    import gradio as gr

    from gemma4_ui.web.display import StreamingRender, settled

    call = ToolCall("calculator", {"expression": "2+2"}, id="call_0")
    result = ToolResult("calculator", "call_0", "ok", {"result": 4}, 0.0)
    shown = Conversation([UserTurn("2+2?"), AssistantTurn(rounds=[ToolRound([call], [result], reasoning="Add.")],
                                                          content="4", reasoning="Done.")])
    asked = UserTurn("And `3*3`?")
    streaming = StreamingRender(shown)
    conversation = Conversation(shown.turns + [asked, AssistantTurn()])
    for live in (Live(reasoning="Multiply"), Live(reasoning="Multiply.", thinking_seconds=0.5, content="It is"),
                 Live(reasoning="Multiply.", thinking_seconds=0.5, content="It is 9.", calls_started=1)):
        history, tail = streaming(conversation, live)
        assert isinstance(history, type(gr.skip())), "the history already shows these turns"
        assert render(shown) + tail == render(conversation, live), "together they are the whole chat"
    assert streaming(conversation, None, notice="Stopped.")[1] == render(conversation, notice="Stopped.")[len(render(shown)):]
    history, live = settled(conversation, notice="Stopped.")
    assert history == render(conversation) and live == render(Conversation(), notice="Stopped.")
    assert settled(conversation)[1] == []


def test_a_stream_that_replaces_turns_sends_the_history_once():
    import gradio as gr

    from gemma4_ui.web.display import StreamingRender

    shown = Conversation([UserTurn("one"), AssistantTurn(content="1"), UserTurn("two"), AssistantTurn(content="2")])
    retried = Conversation(shown.turns[:3] + [AssistantTurn(content="deux")])  # a retry of the last reply
    streaming = StreamingRender(shown)
    history, live = streaming(retried)
    assert history == render(Conversation(shown.turns[:3])) and history + live == render(retried)
    assert isinstance(streaming(retried)[0], type(gr.skip()))
