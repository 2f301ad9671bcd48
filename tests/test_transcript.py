"""Conversations saved as JSON and loaded back: calls, results, thoughts and media survive."""

from __future__ import annotations

import json

import pytest

from gemma4_ui import transcript
from gemma4_ui.chat import ChatOptions
from gemma4_ui.conversation import AssistantTurn, Conversation, ToolRound, UserTurn, to_gemma_messages
from gemma4_ui.events import ReplyStats, ToolCall
from gemma4_ui.media import MediaLimits, load_media
from gemma4_ui.tools import ToolResult

from conftest import ROOT

OPTIONS = ChatOptions(system_prompt="Be brief.", thinking=True, enabled_tools=["get_current_weather"])


def sample_conversation() -> Conversation:
    image = load_media(str(ROOT / "assets" / "examples" / "shapes.png"))
    audio = load_media(str(ROOT / "assets" / "examples" / "speech.wav"))
    call = ToolCall("get_current_weather", {"location": "Lima"}, id="call_0")
    result = ToolResult("get_current_weather", "call_0", "ok", {"temperature": 19, "weather": "cloudy"}, 0.01)
    return Conversation([
        UserTurn("What is this?", [image, audio]),
        AssistantTurn(content="Shapes and a voice.", reasoning="Look at it.", raw="Shapes and a voice.<turn|>",
                      stats=ReplyStats(10, 5, 0.1, 0.5, "stop")),
        UserTurn("Weather in Lima?"),
        AssistantTurn(rounds=[ToolRound([call], [result], reasoning="Call the tool.")], content="19 and cloudy."),
    ])


def test_round_trip_keeps_turns_calls_and_media():
    original = sample_conversation()
    loaded, settings = transcript.load(transcript.dumps(original, OPTIONS), MediaLimits())
    assert settings["system_prompt"] == "Be brief." and settings["enabled_tools"] == ["get_current_weather"]
    assert len(loaded.turns) == 4
    first = loaded.turns[0]
    assert [m.kind for m in first.media] == ["image", "audio"] and first.media[0].data.size == (640, 480)
    round_ = loaded.turns[3].rounds[0]
    assert round_.calls[0].arguments == {"location": "Lima"} and round_.results[0].response["temperature"] == 19
    assert loaded.turns[3].content == "19 and cloudy." and round_.reasoning == "Call the tool."

    def comparable(conversation):
        return json.dumps(to_gemma_messages(conversation), default=lambda o: type(o).__name__, sort_keys=True)

    assert comparable(loaded) == comparable(original)


def test_the_file_shows_the_gemma_messages_without_bytes():
    document = json.loads(transcript.dumps(sample_conversation(), OPTIONS))
    assert document["format"] == transcript.FORMAT
    assert document["messages"][0] == {"role": "system", "content": "Be brief."}
    assert document["messages"][1]["content"][0] == {"type": "image"}


@pytest.mark.parametrize("text,message", [
    ("{not json", "not JSON"),
    ('{"format": "something else"}', "not a Gemma 4 UI conversation"),
    (json.dumps({"format": transcript.FORMAT, "version": 99, "turns": []}), "version"),
    (json.dumps({"format": transcript.FORMAT, "version": 1, "turns": [{"role": "robot"}]}), "role"),
    (json.dumps({"format": transcript.FORMAT, "version": 1, "turns": [{"role": "assistant", "content": "hi"}]}),
     "must follow a user turn"),
    (json.dumps({"format": transcript.FORMAT, "version": 1, "turns": [
        {"role": "user", "text": "x", "media": [{"name": "a.png", "data": "data:image/png;base64,AAAA"}]}]}),
     "a.png"),
])
def test_bad_files_are_refused_with_a_clear_message(text, message):
    with pytest.raises(transcript.TranscriptError, match=message):
        transcript.load(text, MediaLimits())


def test_last_reply_shows_raw_parsed_and_stats():
    stats, raw, parsed = transcript.last_reply(Conversation(sample_conversation().turns[:2]))
    assert stats["generations"][0]["prompt_tokens"] == 10
    assert raw == "Shapes and a voice.<turn|>"
    assert parsed["content"] == "Shapes and a voice." and parsed["reasoning_content"] == "Look at it."
