"""The one canonical conversation type, and its rendering to Gemma 4 message dicts.

A conversation is a list of turns: `UserTurn` (text and decoded media) and `AssistantTurn`
(tool rounds, then the answer). The display and remote payloads are rendered from it at the
edges; nothing is ever re-parsed from the display. Thoughts are kept for display only: they
reach the prompt solely inside the exchange that produced them (the template drops them
once a later user message exists, as Gemma 4 expects).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from gemma4_ui.core.events import ReplyStats, ToolCall, ToolResult
from gemma4_ui.media.decoding import MediaItem


@dataclass
class UserTurn:
    text: str
    media: list[MediaItem] = field(default_factory=list)


@dataclass
class ToolRound:
    """One model output that called tools, and what the calls returned."""

    calls: list[ToolCall]
    results: list[ToolResult] = field(default_factory=list)
    reasoning: str = ""
    content: str = ""  # text the model wrote next to its calls (rare)
    raw: str = ""
    stats: ReplyStats | None = None
    thinking_seconds: float | None = None
    token_probabilities: list | None = None  # TokenProbability per generated token, if recorded

    @property
    def answered(self) -> bool:
        return len(self.results) == len(self.calls) and all(r.status != "client" for r in self.results)


@dataclass
class AssistantTurn:
    rounds: list[ToolRound] = field(default_factory=list)
    reasoning: str = ""
    content: str = ""
    raw: str = ""
    stats: ReplyStats | None = None
    thinking_seconds: float | None = None
    notice: str = ""  # e.g. "stopped", "cut off mid-thought", "round limit reached"
    token_probabilities: list | None = None  # of the answering round, if recorded


Turn = UserTurn | AssistantTurn


@dataclass
class Conversation:
    turns: list[Turn] = field(default_factory=list)

    def copy(self) -> "Conversation":
        """A copy safe to modify: turns and rounds are new objects, media are shared
        (they are never modified, and can be large)."""
        clone = Conversation()
        for turn in self.turns:
            if isinstance(turn, UserTurn):
                clone.turns.append(UserTurn(turn.text, list(turn.media)))
            else:
                new = copy.copy(turn)
                new.rounds = [copy.copy(r) for r in turn.rounds]
                for r in new.rounds:
                    r.calls, r.results = list(r.calls), list(r.results)
                clone.turns.append(new)
        return clone

    @property
    def last_user_index(self) -> int | None:
        for i in range(len(self.turns) - 1, -1, -1):
            if isinstance(self.turns[i], UserTurn):
                return i
        return None

    def media(self) -> list[MediaItem]:
        return [m for t in self.turns if isinstance(t, UserTurn) for m in t.media]


# -- Gemma 4 message dicts ------------------------------------------------------------------

def media_part(item: MediaItem) -> dict:
    """A content part the processor's apply_chat_template understands, holding decoded data."""
    return {"type": item.kind, item.kind: item.data}


def user_content(turn: UserTurn, audio_first: bool = False) -> list[dict] | str:
    """Images and videos before the text, audio after it (Gemma 4's guidance); with
    `audio_first` (Gemma 4 Unified, see core/model_family.py) audio before everything."""
    if not turn.media:
        return turn.text
    visual = [media_part(m) for m in turn.media if m.kind in ("image", "video")]
    audio = [media_part(m) for m in turn.media if m.kind == "audio"]
    text = [{"type": "text", "text": turn.text}] if turn.text else []
    return audio + visual + text if audio_first else visual + text + audio


def _round_message(r: ToolRound, with_reasoning: bool) -> dict:
    message: dict[str, Any] = {
        "role": "assistant",
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or {}}}
            for c in r.calls
        ],
        "tool_responses": [{"name": res.name, "response": res.response} for res in r.results],
    }
    if r.content:
        message["content"] = r.content
    if with_reasoning and r.reasoning:
        message["reasoning"] = r.reasoning
    return message


def to_gemma_messages(conversation: Conversation, system_prompt: str = "", audio_first: bool = False) -> list[dict]:
    """Render to Gemma 4's message dicts: a tool round is one assistant message with
    `tool_calls` + `tool_responses`; the answer rides on the last round's message."""
    messages: list[dict] = []
    if system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt})
    last_user = conversation.last_user_index
    for index, turn in enumerate(conversation.turns):
        if isinstance(turn, UserTurn):
            messages.append({"role": "user", "content": user_content(turn, audio_first)})
            continue
        current = last_user is not None and index > last_user
        for r in turn.rounds:
            messages.append(_round_message(r, with_reasoning=current))
        if turn.content or not turn.rounds:
            if turn.rounds and "content" not in messages[-1]:
                messages[-1]["content"] = turn.content
            elif turn.content:
                messages.append({"role": "assistant", "content": turn.content})
    return messages


def video_metadata(conversation_media: list[MediaItem]) -> list:
    """Per-video metadata in prompt order (the processor needs real fps and frame indices)."""
    return [m.video_metadata for m in conversation_media if m.kind == "video"]
