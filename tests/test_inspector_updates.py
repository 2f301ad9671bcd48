"""The inspector sends a page only what it lacks (inspector_updates, tail_patched_html), on the
real tiny model and processor: the page's side of the patches is tested in Chromium
(test_browser_what_the_model_sees.py)."""

from __future__ import annotations

import re

import gradio as gr
import pytest

from gemma4_ui.config import Settings
from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.inspector.pieces import SEPARATOR
from gemma4_ui.web.handlers.shared import SharedChatHandlers
from gemma4_ui.web.inspector_updates import LAYERS, PATCHED, PLAIN_TEXT
from gemma4_ui.web.tail_patched_html import HEADER_PATTERN

OPTIONS = ChatOptions(max_new_tokens=8, temperature=0)


def view_of(patch: str) -> tuple[int, int, int, list[str]]:
    """(version, base, keep, pieces) of a patch, as the page reads it."""
    head = re.match(HEADER_PATTERN, patch)
    rest = patch[head.end():]
    return int(head[2]), int(head[3]), int(head[4]), rest.split(SEPARATOR) if rest else []
ANSWER = """Here is step {n}:

```python
def count_words(path: str) -> dict[str, int]:
    counts: dict[str, int] = {{}}
    with open(path, encoding="utf-8") as handle:
        for word in handle.read().split():
            counts[word] = counts.get(word, 0) + 1
    return counts
```

It reads the file **once**; `split()` cuts at any whitespace."""


@pytest.fixture()
def handlers(tiny_engine):
    return SharedChatHandlers(tiny_engine, Settings(model="tiny"))


def long_chat(messages: int) -> Conversation:
    turns = []
    for n in range(messages // 2):
        turns += [UserTurn(f"Question {n}: how do I count words?"), AssistantTurn(content=ANSWER.format(n=n))]
    return Conversation(turns)


def refresh(handlers, session, conversation, draft: str) -> dict:
    return dict(zip(LAYERS, handlers.inspector.refresh({"text": draft, "files": []}, conversation, session, False,
                                                       OPTIONS), strict=True))


def full_view(handlers, session, conversation, draft: str) -> dict:
    view = handlers.inspector.inspect({"text": draft, "files": []}, conversation, session, False, OPTIONS)
    return {"messages": view.messages, "template": view.template, "expanded_colour": view.expanded_colour,
            "messages_text": view.messages_text, "template_text": view.template_text, "expanded": view.expanded}


def skipped(value) -> bool:
    return value == gr.skip()


def size(sent: dict) -> int:
    return sum(len(str(value)) for value in sent.values() if not skipped(value))


def test_a_keystroke_in_a_long_chat_sends_only_the_end_of_each_layer(handlers):
    session, chat = handlers.new_session(), long_chat(40)
    first = refresh(handlers, session, chat, "Show me")
    views = full_view(handlers, session, chat, "Show me")
    for name in PATCHED:  # a new page gets each coloured layer whole
        version, base, keep, pieces = view_of(first[name])
        assert (base, keep) == (-1, 0) and SEPARATOR.join(pieces) == views[name]
    assert all(skipped(first[name]) for name in PLAIN_TEXT), "closed: not sent"

    second = refresh(handlers, session, chat, "Show me more")
    after = full_view(handlers, session, chat, "Show me more")
    for name in PATCHED:  # the next keystroke: the end only, applied to what the page has
        version, base, keep, pieces = view_of(second[name])
        old = views[name].split(SEPARATOR)
        assert base == view_of(first[name])[0] and version > base
        assert keep > 0.9 * len(old), f"{name}: {keep} of {len(old)} pieces kept"
        assert SEPARATOR.join(old[:keep] + pieces) == after[name]
    assert skipped(second["maps"]) and skipped(second["note"]), "what did not change is not sent"
    assert size(first) > 100_000 and size(second) < 0.02 * size(first), (size(first), size(second))
    assert all(skipped(value) for value in refresh(handlers, session, chat, "Show me more").values())


def test_a_plain_text_is_sent_while_its_accordion_is_open(handlers):
    session, chat = handlers.new_session(), long_chat(4)
    refresh(handlers, session, chat, "Hi")
    assert handlers.inspector.show_plain_text("template_text", True, session) == gr.skip()
    sent = refresh(handlers, session, chat, "Hi")
    assert sent["template_text"] == full_view(handlers, session, chat, "Hi")["template_text"]
    assert skipped(sent["messages_text"]) and skipped(sent["expanded"]), "the others stay closed"
    assert sent["template_text"].rstrip().endswith("Hi<turn|>\n<|turn>model")

    assert refresh(handlers, session, chat, "Hello")["template_text"].rstrip().endswith("Hello<turn|>\n<|turn>model")
    assert handlers.inspector.show_plain_text("template_text", False, session) == "", "closed, it empties"
    assert skipped(refresh(handlers, session, chat, "Hello there")["template_text"])
    handlers.inspector.show_plain_text("template_text", True, session)
    assert "Hello there" in refresh(handlers, session, chat, "Hello there")["template_text"], "reopened: current"


def test_a_page_that_lost_track_gets_the_whole_inspector_again(handlers):
    session, chat = handlers.new_session(), long_chat(4)
    refresh(handlers, session, chat, "Hi")
    handlers.inspector.resend(session)
    again = refresh(handlers, session, chat, "Hi")
    assert all(view_of(again[name])[1:3] == (-1, 0) for name in PATCHED)
    assert not skipped(again["counts"]) and not skipped(again["maps"])


def test_each_page_has_its_own_record_and_its_own_series_of_patches(handlers):
    """Another tab, or the same tab given a new UserSession after its time to live, gets the
    whole view, in a series of patches of its own: the page, which may still hold the old
    series, takes it whole (test_a_page_that_cannot_apply_a_patch_asks_for_the_whole_view)."""
    chat = long_chat(4)
    one, other = handlers.new_session(), handlers.new_session()
    first = refresh(handlers, one, chat, "Hi")
    fresh = refresh(handlers, other, chat, "Hi")
    assert all(view_of(fresh[name])[1] == -1 for name in PATCHED), "the whole view"
    assert first["template"].split()[1] != fresh["template"].split()[1], "another series"
