"""Typed events that an engine's stream carries to the chat loop and the UI.

The UI never searches text for protocol markers: it receives these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    """The model opened a tool call; its name and arguments arrive with `ToolCall`."""


@dataclass
class ToolCall:
    """One call as the model wrote it. `arguments` is None when they could not be parsed;
    `error` then says why, and the raw text is kept for the user and the model."""

    name: str
    arguments: dict[str, Any] | None
    raw: str = ""
    error: str | None = None
    id: str = ""


@dataclass
class ToolResult:
    name: str
    call_id: str
    # "ok" | "error" | "timeout" | "client" (awaiting the user) | "cancelled" (set by the UI
    # when the user gives up on a client tool)
    status: str
    response: Any  # goes back to the model: the return value, or {"error": "..."} on failure
    duration: float  # seconds
    error: str | None = None  # same text as response["error"] for failures


@dataclass
class TokenProbability:
    id: int | None  # None where the server names tokens by text only
    text: str
    probability: float
    kind: str = "answer"  # "thought", "answer", "call" or "control"
    alternatives: list[tuple[str, float]] = field(default_factory=list)  # best first


@dataclass
class ReplyStats:
    prompt_tokens: int = 0
    generated_tokens: int = 0
    time_to_first_token: float | None = None  # seconds
    duration: float = 0.0  # seconds, request to last token
    stop_reason: str = ""  # "stop", "tool_call", "length", "cancelled", "error"
    # Speculative decoding: tokens an MTP drafter proposed, and how many of them the model kept.
    drafted_tokens: int | None = None
    accepted_tokens: int | None = None

    @property
    def tokens_per_second(self) -> float | None:
        if self.generated_tokens < 2 or self.time_to_first_token is None:
            return None
        decode_time = self.duration - self.time_to_first_token
        return (self.generated_tokens - 1) / decode_time if decode_time > 0 else None

    def as_dict(self) -> dict:
        tps = self.tokens_per_second
        return {
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "time_to_first_token_s": None if self.time_to_first_token is None else round(self.time_to_first_token, 3),
            "tokens_per_second": None if tps is None else round(tps, 1),
            "duration_s": round(self.duration, 3),
            "stop_reason": self.stop_reason,
        } | self._drafting()

    def _drafting(self) -> dict:
        if self.drafted_tokens is None:
            return {}
        rate = self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None
        return {"drafted_tokens": self.drafted_tokens, "accepted_tokens": self.accepted_tokens,
                "acceptance_rate": None if rate is None else round(rate, 3)}


@dataclass
class Done:
    """End of one generation round. `raw` is the model's output decoded with special tokens;
    `incomplete` names what was cut off (a thought, a call, a string) when the output stopped early."""

    stats: ReplyStats
    raw: str = ""
    reasoning: str = ""
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    incomplete: str | None = None
    token_probabilities: list | None = None  # TokenProbability per generated token, when asked for


@dataclass(frozen=True)
class EngineError:
    """A failure the user can act on (server down, auth, a rejected modality...)."""

    message: str


Event = ThinkingDelta | TextDelta | ToolCallStarted | ToolCall | Done | EngineError
