"""Conversations saved as JSON and loaded back: calls, results, thoughts and media survive."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from gemma4_ui.config import MediaLimits
from gemma4_ui.core import transcript
from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn, to_gemma_messages
from gemma4_ui.core.events import ReplyStats, ToolCall
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.media.decoding import load_media
from gemma4_ui.tools.registry import ToolResult

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
    result = transcript.load(transcript.dumps(original, OPTIONS), MediaLimits())
    loaded, settings = result.conversation, result.settings
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


def _with_media(entries_per_turn: list[list[dict]]) -> str:
    turns = [{"role": "user", "text": "", "media": entries} for entries in entries_per_turn]
    return json.dumps({"format": transcript.FORMAT, "version": transcript.VERSION, "turns": turns})


def test_a_file_nested_too_deeply_is_refused_with_a_message():
    with pytest.raises(transcript.TranscriptError, match="nested too deeply"):
        transcript.load('{"turns": ' + "[" * 100_000 + "]" * 100_000 + "}", MediaLimits())


def test_media_counts_are_limited_before_anything_is_decoded():
    """The limits a composer message has, and one per conversation: checked first, so these
    (undecodable) entries are never read."""
    junk = {"name": "x.png", "data": "not a data URL"}
    with pytest.raises(transcript.TranscriptError, match=r"turns\[0\] has 9 files; a message holds at most 8"):
        transcript.load(_with_media([[junk] * 9]), MediaLimits())
    with pytest.raises(transcript.TranscriptError, match="the conversation has 40 files; a conversation holds at most 32"):
        transcript.load(_with_media([[junk] * 8] * 5), MediaLimits())


def test_loaded_media_are_held_to_the_decoded_limits():
    text = transcript.dumps(sample_conversation(), OPTIONS)  # a 640×480 image: 0.9 MB decoded
    with pytest.raises(transcript.TranscriptError, match=r"turns\[0\].media\[0\]: 'shapes.png' is 640×480 pixels"):
        transcript.load(text, MediaLimits(max_image_pixels=100_000))
    with pytest.raises(transcript.TranscriptError, match=r"turns\[0\].media\[0\]: .* at most 0.5 MB once decoded"):
        transcript.load(text, MediaLimits(max_conversation_media_mb=0.5))
    with pytest.raises(transcript.TranscriptError, match="the conversation has 2 files; a conversation holds at most 1"):
        transcript.load(text, MediaLimits(max_files_per_conversation=1))


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


def same_named_media(tmp_path):
    """Two different images both called photo.png, from two folders (two uploads)."""
    from PIL import Image

    items = []
    for colour in ("red", "blue"):
        folder = tmp_path / colour
        folder.mkdir()
        Image.new("RGB", (32, 24), colour).save(folder / "photo.png")
        items.append(load_media(str(folder / "photo.png")))
    return items


def test_drafting_stats_and_every_setting_survive_a_round_trip():
    call = ToolCall("get_current_weather", {"location": "Lima"}, id="call_0")
    drafted = ReplyStats(42, 7, 0.03, 0.45, "stop", drafted_tokens=12, accepted_tokens=9)
    conversation = Conversation([
        UserTurn("Weather in Lima?"),
        AssistantTurn(rounds=[ToolRound([call], [], stats=ReplyStats(50, 9, 0.02, 0.3, "tool_call", 6, 0))],
                      content="19 degrees.", stats=drafted),
    ])
    options = ChatOptions(system_prompt="Be brief.", thinking=True, max_new_tokens=77, temperature=0.3, top_p=0.8,
                          top_k=11, image_budget=560, enabled_tools=["get_current_weather"], max_tool_rounds=3)
    loaded = transcript.load(transcript.dumps(conversation, options), MediaLimits())
    turn = loaded.conversation.turns[1]
    assert turn.stats == drafted and turn.rounds[0].stats == ReplyStats(50, 9, 0.02, 0.3, "tool_call", 6, 0)
    assert ChatOptions(**loaded.settings) == options


def test_export_import_export_is_byte_for_byte(tmp_path):
    red, blue = same_named_media(tmp_path)
    call = ToolCall("get_current_weather", {"location": "Lima"}, raw="call:get_current_weather{}", id="call_0")
    result = ToolResult("get_current_weather", "call_0", "ok", {"temperature": 19}, 0.0123456)
    conversation = Conversation([
        UserTurn("Which is red?", [red, blue]),
        AssistantTurn(content="The first.", reasoning="Compare them.", raw="raw<turn|>", thinking_seconds=1.23456789,
                      stats=ReplyStats(42, 7, 0.0312345, 0.4567891, "stop")),
        UserTurn("Weather in Lima?"),
        AssistantTurn(rounds=[ToolRound([call], [result], reasoning="Call it.", raw="r1", thinking_seconds=0.5,
                                        stats=ReplyStats(50, 9, 0.02, 0.3, "tool_call"))],
                      content="19 degrees.", stats=ReplyStats(60, 4, 0.01, 0.2, "stop"), notice="Cut off."),
    ])
    declared = [{"type": "function", "function": {"name": "lookup_order", "description": "Finds an order.",
                                                  "parameters": {"type": "object", "properties": {}}}}]
    first = transcript.dumps(conversation, OPTIONS, declared)
    loaded = transcript.load(first, MediaLimits())
    second = transcript.dumps(loaded.conversation, ChatOptions(**loaded.settings), loaded.declared)
    assert second == first

    images = loaded.conversation.turns[0].media
    assert [m.name for m in images] == ["photo.png", "photo.png"]
    assert images[0].path != images[1].path, "two media of the same name do not overwrite each other"
    assert images[0].data.getpixel((0, 0)) == (255, 0, 0) and images[1].data.getpixel((0, 0)) == (0, 0, 255)
    answer, tools = loaded.conversation.turns[1], loaded.conversation.turns[3]
    assert answer.thinking_seconds == 1.23456789 and tools.rounds[0].thinking_seconds == 0.5
    assert answer.stats == conversation.turns[1].stats and tools.rounds[0].stats.stop_reason == "tool_call"


def test_loaded_thoughts_are_done_not_pending(tmp_path):
    from gemma4_ui.web.display import render

    conversation = Conversation([UserTurn("Hi"), AssistantTurn(content="Hello.", reasoning="Greet.",
                                                               thinking_seconds=2.0)])
    loaded = transcript.load(transcript.dumps(conversation, OPTIONS), MediaLimits()).conversation
    (thought,) = [m for m in render(loaded) if m.get("metadata")]
    assert thought["metadata"]["status"] == "done" and thought["metadata"]["duration"] == 2.0


def test_imported_media_files_are_deleted_with_their_conversation(tmp_path):
    import gc
    import os

    red, blue = same_named_media(tmp_path)
    text = transcript.dumps(Conversation([UserTurn("Two", [red, blue])]), OPTIONS)
    loaded = transcript.load(text, MediaLimits())
    paths = [m.path for m in loaded.conversation.turns[0].media]
    assert all(os.path.exists(p) for p in paths)
    del loaded
    gc.collect()
    assert not any(os.path.exists(os.path.dirname(p)) for p in paths), "the import's folders are gone"


def test_sent_media_outlive_gradios_upload(session_handlers, tmp_path):
    """Gradio deletes uploads after a while; the conversation's media keep their own files, so
    the chat still shows them and Export still works."""
    from PIL import Image

    from gemma4_ui.web.session import Draft

    upload = tmp_path / "gradio-upload" / "cat.png"
    upload.parent.mkdir()
    Image.new("RGB", (16, 16), "green").save(upload)
    user = session_handlers.new_session()
    turn = session_handlers.user_turn(Draft("A cat", [str(upload)]), user)
    upload.unlink()  # what Gradio's delete_cache does
    text = transcript.dumps(Conversation([turn]), OPTIONS)
    (item,) = transcript.load(text, MediaLimits()).conversation.turns[0].media
    assert item.name == "cat.png" and item.data.getpixel((0, 0)) == (0, 128, 0)


# -- versions (format 2) ----------------------------------------------------------------------------

def branched_conversation():
    """A retry kept two answers, an edit two questions (the edit's branch with an image)."""
    from gemma4_ui.core.branches import Branches

    image = load_media(str(ROOT / "assets" / "examples" / "shapes.png"))
    tree = Branches()
    tree.settle(Conversation([UserTurn("Q1"), AssistantTurn(content="A1"), UserTurn("Q2"), AssistantTurn(content="A2")]))
    tree.settle(Conversation(tree.conversation().turns[:3] + [AssistantTurn(content="A2 again")]), fork_at=3)
    tree.settle(Conversation([UserTurn("Q1 edited", [image]), AssistantTurn(content="B1")]), fork_at=0)
    tree.choose(0, 0)
    return tree


def test_versions_round_trip_byte_for_byte():
    tree = branched_conversation()
    text = transcript.dumps(tree.conversation(), OPTIONS, branches=tree)
    loaded = transcript.load(text, MediaLimits())
    assert [t.text if isinstance(t, UserTurn) else t.content for t in loaded.conversation.turns] == [
        "Q1", "A1", "Q2", "A2 again"]
    assert loaded.branches.versions() == [(0, 2), (0, 1), (0, 1), (1, 2)]
    assert transcript.dumps(loaded.conversation, OPTIONS, branches=loaded.branches) == text
    edited = loaded.branches.choose(0, 1)
    assert edited.turns[0].text == "Q1 edited" and edited.turns[0].media[0].data.size == (640, 480)
    assert json.loads(text)["version"] == 2 and json.loads(text)["turns"][0]["text"] == "Q1"


def test_a_version_1_file_loads_as_a_conversation_without_alternatives():
    turns = [{"role": "user", "text": "Hi", "media": []}, {"role": "assistant", "content": "Hello."}]
    loaded = transcript.load(json.dumps({"format": transcript.FORMAT, "version": 1, "turns": turns}), MediaLimits())
    assert loaded.branches.versions() == [(0, 1), (0, 1)] and loaded.conversation.turns[1].content == "Hello."
    saved = json.loads(transcript.dumps(loaded.conversation, OPTIONS, branches=loaded.branches))
    assert saved["version"] == 2 and saved["branches"] == {
        "chosen": 0, "nodes": [{"parent": None, "chosen": 0, "turn": 0}, {"parent": 0, "chosen": None, "turn": 1}]}


@pytest.mark.parametrize("change,message", [
    (lambda b: b["nodes"][0].update(parent=3), r"nodes\[0\].parent is out of range"),
    (lambda b: b["nodes"][1].update(turn=0), r"turns\[0\] is in the tree twice"),
    (lambda b: b.update(chosen=5), "branches.chosen is out of range"),
    (lambda b: b.update(chosen=1), "the chosen versions are not the turns"),
    (lambda b: b["nodes"].append({"parent": None, "turn": {"role": "assistant", "content": "x"}}),
     "must follow a user turn"),
    (lambda b: b.update(nodes=7), "branches.nodes must be a list"),
])
def test_bad_versions_are_refused_with_a_clear_message(change, message):
    tree = branched_conversation()
    document = json.loads(transcript.dumps(tree.conversation(), OPTIONS, branches=tree))
    change(document["branches"])
    with pytest.raises(transcript.TranscriptError, match=message):
        transcript.load(json.dumps(document), MediaLimits())
