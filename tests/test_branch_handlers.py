"""Branches through the chat's handlers on the real tiny model: Retry and Edit keep every
version, the branch bar and /choose_branch switch, Undo, New conversation and export follow."""

from __future__ import annotations

import gradio as gr
import pytest

from gemma4_ui.config import MediaLimits, Settings
from gemma4_ui.core import transcript
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.web.display import render
from gemma4_ui.web.handlers.shared import SharedChatHandlers

OPTIONS = ChatOptions(max_new_tokens=4, temperature=0)


@pytest.fixture()
def handlers(tiny_engine):
    return SharedChatHandlers(tiny_engine, Settings(model="tiny"))


def last(outputs):
    *_, final = outputs
    return final


def send(handlers, conversation, user, text):
    return last(handlers.turns.respond({"text": text, "files": []}, conversation, user, OPTIONS)).conversation


def edit(handlers, conversation, user, turn, text):
    position = len(render(Conversation(conversation.turns[:turn])))  # a text-only message
    data = gr.EditData(None, {"index": position, "value": text, "previous_value": ""})
    return last(handlers.turns.edit(data, conversation, user, OPTIONS))


def shown_text(history) -> str:
    return "\n".join(m["content"] for m in history if isinstance(m["content"], str))


def questions(conversation):
    return [t.text for t in conversation.turns if isinstance(t, UserTurn)]


def test_retry_twice_keeps_three_answers_and_each_can_be_shown(handlers):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "Hello")
    answers = [conv.turns[1]]
    for _ in range(2):
        outputs = last(handlers.turns.retry(conv, user, OPTIONS))
        conv = outputs.conversation
        answers.append(conv.turns[1])
    assert "‹ 3/3 ›" in shown_text(outputs.history), "the reply says which version it is"
    bar = handlers.branches.pick(1, conv, user)
    assert bar.count == "3 / 3" and bar.row["visible"] and bar.next["interactive"] is False
    first = handlers.branches.choose(1, 0, conv, user)
    assert first.conversation.turns[1] is answers[0] and first.count == "1 / 3"
    assert first.data["messages"][1] == {"index": 1, "role": "assistant", "text": answers[0].content,
                                         "version": 0, "versions": 3}
    second = handlers.branches.step(1, 1, first.conversation, user)
    assert second.conversation.turns[1] is answers[1] and "‹ 2/3 ›" in shown_text(second.history)


def test_edit_an_earlier_message_then_come_back_to_the_first_branch(handlers):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "First")
    conv = send(handlers, conv, user, "Second")
    original = conv
    edited = edit(handlers, conv, user, 0, "First, edited")
    assert questions(edited.conversation) == ["First, edited"] and len(edited.conversation.turns) == 2
    assert "‹ 2/2 ›" in edited.history[0]["content"]
    further = send(handlers, edited.conversation, user, "Third")  # the next message continues the branch shown
    assert questions(further) == ["First, edited", "Third"]
    back = handlers.branches.choose(0, 0, further, user)
    assert back.conversation.turns == original.turns, "the first branch, its whole continuation"
    again = handlers.branches.choose(0, 1, back.conversation, user)
    assert questions(again.conversation) == ["First, edited", "Third"]


def test_editing_keeps_the_text_without_the_version_mark(handlers):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "Hi")
    conv = edit(handlers, conv, user, 0, "Hi there").conversation
    shown = render(conv, versions=user.branches.versions())[0]["content"]
    assert shown.endswith("‹ 2/2 ›</span>")
    data = gr.EditData(None, {"index": 0, "value": shown.replace("Hi there", "Hello there"), "previous_value": shown})
    conv = last(handlers.turns.edit(data, conv, user, OPTIONS)).conversation
    assert questions(conv) == ["Hello there"] and user.branches.versions()[0] == (2, 3)


def test_a_branch_that_does_not_exist_warns_and_changes_nothing(handlers):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "Hello")
    with pytest.warns(UserWarning, match="no version 4"):
        out = handlers.branches.choose(1, 4, conv, user)
    assert out.conversation is conv
    with pytest.warns(UserWarning, match="whole number"):
        assert handlers.branches.choose(1.5, 0, conv, user).conversation is conv


def test_undo_and_new_conversation_with_branches(handlers):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "First")
    conv = send(handlers, conv, user, "Second")
    conv = edit(handlers, conv, user, 2, "Second, edited").conversation
    undone = handlers.turns.undo(conv, user)
    assert questions(undone.conversation) == ["First"] and undone.composer["value"]["text"] == "Second, edited"
    conv = send(handlers, undone.conversation, user, "Second, again")
    assert user.branches.versions()[2] == (1, 2), "the undone version went; the other stays beside the new one"
    assert questions(handlers.branches.choose(2, 0, conv, user).conversation) == ["First", "Second"]
    handlers.turns.reset(user)
    assert user.branches.versions() == [] and handlers.branches.data(Conversation(), user) == {"messages": []}


def test_export_keeps_every_version_and_loads_back(handlers, tmp_path):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "Hello")
    conv = last(handlers.turns.retry(conv, user, OPTIONS)).conversation
    chat_path, _ = handlers.files.export_files(conv, user, OPTIONS)
    text = open(chat_path, encoding="utf-8").read()
    other = handlers.new_session()
    loaded = handlers.files.load_chat(chat_path, other)
    assert other.branches.versions() == [(0, 1), (1, 2)] and "‹ 2/2 ›" in shown_text(loaded.history)
    again, _ = handlers.files.export_files(loaded.conversation, other, OPTIONS)
    assert open(again, encoding="utf-8").read() == text
    assert transcript.load(text, MediaLimits()).branches.versions() == [(0, 1), (1, 2)]


def test_an_arrow_with_no_message_picked_says_so(handlers):
    user = handlers.new_session()
    conv = send(handlers, Conversation(), user, "Hello")
    with pytest.warns(UserWarning, match="Pick a message"):
        out = handlers.branches.step(1, None, conv, user)
    assert out.conversation is conv
