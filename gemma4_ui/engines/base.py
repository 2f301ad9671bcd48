"""What every engine offers the chat: `load()`, then one streaming method that turns a request
into typed events. The UI does not know which engine runs.

Engines are registered in `ENGINES`, by the name `--backend` takes; each builds itself from
the settings (`from_settings`), so adding one is one class and one line here.
"""

from __future__ import annotations

import importlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

from gemma4_ui.config import BACKENDS, BUNDLED_TRAINED
from gemma4_ui.core import model_family
from gemma4_ui.core.events import Event
from gemma4_ui.core.prompt import PromptSpec
from gemma4_ui.media.decoding import MediaItem

# How the status names the bundled model, so that no one takes its replies for an assistant's.
BUNDLED_NOTE = ("a tiny protocol demo model trained on synthetic data, not an assistant: its built-in tools start "
                "on, so ask it the weather somewhere, a sum, a unit conversion or the time, or send it media"
                if BUNDLED_TRAINED else
                "a tiny model with random weights that shows the protocol's plumbing: its replies are noise")


class ModelLoadError(RuntimeError):
    """The model cannot be served; the message says why and what to do."""


@dataclass
class ModelStatus:
    """What is live, for the status line and the log."""

    requested: str
    name: str  # the model actually running
    source: str  # "bundled" | "local" | "hub" | "cache" | "remote"
    device: str = "cpu"
    dtype: str = ""
    notice: str = ""  # e.g. why we fell back to the bundled model
    context_length: int | None = None
    assistant: str = ""  # the MTP drafter that speeds up generation, when one runs

    @property
    def is_bundled(self) -> bool:
        return self.source == "bundled"

    def describe(self) -> str:
        """The whole status, as plain text (the server log, the status line's details)."""
        where = f"on {self.device}" + (f" ({self.dtype})" if self.dtype else "")
        line = f"{self.name} {where}"
        if self.assistant:
            line += f", drafting with {self.assistant}"
        if self.is_bundled:
            line += f" — the bundled tiny Gemma 4, {BUNDLED_NOTE}"
        if self.notice:
            line += f". ⚠️ {self.notice}"
        return line

    def headline(self) -> str:
        """The status in a few words, for one line on a phone: the model, where it runs, and
        a flag when its replies are not to be trusted or a notice waits in the details."""
        parts = [self.name, self.device]
        if self.is_bundled:
            parts.append("demo model" if BUNDLED_TRAINED else "random weights")
        return " · ".join(parts) + (" ⚠️" if self.notice else "")


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
    # Stop when the output's end repeats one piece this many times (core/repetition.py); 0: never.
    repetition_guard: int = 0
    # The sampling seed (None: whatever the generator's state is), for a reply sampled again.
    seed: int | None = None


class Engine(ABC):
    """A backend: capabilities as attributes, generation as one stream of events."""

    modalities: frozenset[str] = frozenset({"text", "image", "audio", "video"})
    status: ModelStatus
    # The processor that renders and counts prompts for the inspector, or None when the
    # model's own processor is not available (then counts are not shown as exact).
    processor = None
    # Why replies carry no token probabilities, where they cannot (empty: they can).
    token_probabilities_note: str = ""

    @classmethod
    def from_settings(cls, settings) -> "Engine":
        """The engine the settings describe, not loaded yet (cheap: nothing is read)."""
        return cls(settings)

    @abstractmethod
    def load(self) -> "Engine":
        """Make the engine ready to stream (read weights, reach the server); returns self.
        Raises ModelLoadError with a message the user can act on."""

    @abstractmethod
    def stream(self, request: GenerationRequest, cancel: threading.Event) -> Iterator[Event]:
        """Yield ThinkingDelta / TextDelta / ToolCallStarted / ToolCall events, then exactly one
        Done (or one EngineError). Setting `cancel` stops generation; the stream then ends
        with a Done whose stop_reason is "cancelled"."""

    @property
    def context_length(self) -> int | None:
        return self.status.context_length

    @property
    def prompt_limit(self) -> int | None:
        """The most prompt tokens one request may send, where this app limits it below the
        context (the local engine's --max-prompt-tokens); None: the context alone."""
        return None

    @property
    def audio_first(self) -> bool:
        """Whether a message's audio goes before its images and text (core/model_family.py)."""
        return self.processor is not None and model_family.audio_first(self.processor)


# --backend NAME → the engine class, as "module:Class" so that choosing one imports only it.
ENGINES: dict[str, str] = {
    "local": "gemma4_ui.engines.local.engine:LocalEngine",
    "openai": "gemma4_ui.engines.openai:OpenAIEngine",
}
assert set(ENGINES) == set(BACKENDS), "every --backend name in config.BACKENDS has an engine here, and only those"


def import_path(path: str):
    """The object named "module:name" (an engine class, a preparation function)."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def engine_class(backend: str) -> type[Engine]:
    if backend not in ENGINES:
        raise ModelLoadError(f"Unknown backend {backend!r}: choose one of {', '.join(sorted(ENGINES))}")
    return import_path(ENGINES[backend])


def build_engine(settings) -> Engine:
    return engine_class(settings.backend).from_settings(settings)
