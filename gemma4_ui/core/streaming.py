"""The state of a reply while it streams: what the display shows before the turn settles."""

from __future__ import annotations

from dataclasses import dataclass, field

from gemma4_ui.core.events import ToolCall


@dataclass
class Live:
    """What is streaming right now, for the display: the partial thought and answer of the
    round in progress, when thinking started, and the calls already announced."""

    reasoning: str = ""
    content: str = ""
    thinking_started: float | None = None
    thinking_seconds: float | None = None
    calls: list[ToolCall] = field(default_factory=list)
    calls_started: int = 0
    running_call: int | None = None  # index into the last round's calls while a tool runs
