"""What every engine offers the chat: one streaming method that turns a request into typed
events. The UI does not know which engine runs."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

from .events import Event
from .loading import ModelStatus
from .media import MediaItem
from .prompt import PromptSpec


@dataclass
class GenerationRequest:
    spec: PromptSpec
    max_new_tokens: int = 1024
    temperature: float = 1.0  # 0 means greedy decoding
    top_p: float = 0.95
    top_k: int = 64
    # The conversation's uploads, in order: remote engines send a video as its original file.
    media: list[MediaItem] = field(default_factory=list)
    # Record each generated token's probability and top alternatives (costs a little per token).
    token_probabilities: bool = False


class Engine(ABC):
    """A backend: capabilities as attributes, generation as one stream of events."""

    modalities: frozenset[str] = frozenset({"text", "image", "audio", "video"})
    status: ModelStatus
    # The processor that renders and counts prompts for the inspector, or None when the
    # model's own processor is not available (then counts are not shown as exact).
    processor = None
    # Why replies carry no token probabilities, where they cannot (empty: they can).
    token_probabilities_note: str = ""

    @abstractmethod
    def stream(self, request: GenerationRequest, cancel: threading.Event) -> Iterator[Event]:
        """Yield ThinkingDelta / TextDelta / ToolCallStarted / ToolCall events, then exactly one
        Done (or one EngineError). Setting `cancel` stops generation; the stream then ends
        with a Done whose stop_reason is "cancelled"."""

    @property
    def context_length(self) -> int | None:
        return self.status.context_length
