"""Shared, lazily built resources: the in-process tiny engine, the app in its own process,
and generated media. Each is built the first time a benchmark asks for it."""

from __future__ import annotations

import functools
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from . import media_files
from .app_server import AppProcess, tiny_engine


@dataclass(frozen=True)
class Sizes:
    """Input sizes: the real ones, or small ones for --quick (a smoke run, not a verdict)."""

    photo: tuple[int, int] = (4000, 3000)
    audio_seconds: float = 30.0
    video_seconds: float = 60.0
    video_size: tuple[int, int] = (1280, 720)
    stream_tokens: int = 500  # reply length for the tokens/s figures
    photo_chat_messages: int = 6  # two photos each
    browser_tokens: int = 2000
    memory_turns: tuple[int, int] = (5, 50)


QUICK_SIZES = Sizes(photo=(1200, 900), audio_seconds=5.0, video_seconds=4.0, video_size=(640, 360),
                    stream_tokens=120, photo_chat_messages=1, browser_tokens=200, memory_turns=(2, 4))


@dataclass
class Context:
    runs: int
    quick: bool
    workdir: Path
    stack: ExitStack = field(default_factory=ExitStack)

    @property
    def sizes(self) -> Sizes:
        return QUICK_SIZES if self.quick else Sizes()

    @functools.cached_property
    def engine(self):
        """The app's LocalEngine on the bundled model, replies fixed to max_new_tokens."""
        return tiny_engine()

    @functools.cached_property
    def app(self) -> AppProcess:
        """The app, serving in its own process (shared by the benchmarks that only read)."""
        return self.stack.enter_context(AppProcess(self.workdir))

    def fresh_app(self, env: dict[str, str] | None = None) -> AppProcess:
        """A new app process, for figures that need a clean one (memory)."""
        return self.stack.enter_context(AppProcess(self.workdir, env))

    @functools.cached_property
    def photo(self) -> Path:
        width, height = self.sizes.photo
        return media_files.photo_jpeg(self.workdir / f"photo-{width}x{height}.jpg", width, height)

    @functools.cached_property
    def audio(self) -> Path:
        return media_files.speech_like_wav(self.workdir / "speech.wav", self.sizes.audio_seconds)

    @functools.cached_property
    def video(self) -> Path:
        width, height = self.sizes.video_size
        return media_files.moving_video(self.workdir / "video.mp4", self.sizes.video_seconds, width, height)

    def close(self) -> None:
        self.stack.close()
