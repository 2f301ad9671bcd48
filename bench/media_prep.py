"""Media preparation: from an uploaded file to processor-ready tensors.

Ours is `gemma4_ui.media.decoding.load_media` (checks, decoding, resampling, frame sampling) then the
processor; theirs is transformers' own loader for the medium then the same processor call:
`image_utils.load_image`, `audio_utils.load_audio` (soundfile + soxr, as librosa), and
`video_utils.load_video` with the one backend installed here (OpenCV; PyAV, decord and
torchcodec are not). Both sides sample the same 32 video frames count.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

from .context import Context
from .harness import Figure, Section, Target, interleaved, paired

PROMPT = "Describe this."


def to_tensors(processor, kind: str, data, video_metadata=None):
    """The processor call the app makes for one user message holding one medium."""
    processor_kwargs: dict = {"images_kwargs": {"max_soft_tokens": 280}}
    if video_metadata is not None:
        processor_kwargs.update(video_metadata=[video_metadata], do_sample_frames=False)
    content = [{"type": kind, kind: data}, {"type": "text", "text": PROMPT}]
    return processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                         tokenize=True, return_dict=True, return_tensors="pt",
                                         processor_kwargs=processor_kwargs)


def ours(processor, path: Path) -> float:
    from gemma4_ui.media.decoding import load_media

    started = time.perf_counter()
    item = load_media(path)
    to_tensors(processor, item.kind, item.data, item.video_metadata)
    return time.perf_counter() - started


def transformers_image(processor, path: Path) -> float:
    from transformers.image_utils import load_image

    started = time.perf_counter()
    to_tensors(processor, "image", load_image(str(path)))
    return time.perf_counter() - started


def transformers_audio(processor, path: Path) -> float:
    from transformers.audio_utils import load_audio

    started = time.perf_counter()
    to_tensors(processor, "audio", load_audio(str(path), sampling_rate=16_000))
    return time.perf_counter() - started


def transformers_video(processor, path: Path, frames: int) -> float:
    from transformers.video_utils import load_video

    started = time.perf_counter()
    video, metadata = load_video(str(path), num_frames=frames, backend="opencv")
    to_tensors(processor, "video", video, metadata)
    return time.perf_counter() - started


def unavailable_video_backends() -> list[str]:
    modules = {"pyav": "av", "decord": "decord", "torchcodec": "torchcodec"}
    return [name for name, module in modules.items() if importlib.util.find_spec(module) is None]


def media_preparation(ctx: Context) -> Section:
    from gemma4_ui.config import MediaLimits

    processor = ctx.engine.processor
    frames = MediaLimits().max_video_frames
    photo, audio, video = ctx.photo, ctx.audio, ctx.video  # generated before timing starts
    sides = {
        "ours image": lambda: ours(processor, photo),
        "theirs image": lambda: transformers_image(processor, photo),
        "ours audio": lambda: ours(processor, audio),
        "theirs audio": lambda: transformers_audio(processor, audio),
        "ours video": lambda: ours(processor, video),
        "theirs video": lambda: transformers_video(processor, video, frames),
    }
    for side in sides.values():  # warm-up: librosa and OpenCV initialise on first use
        side()
    seconds = interleaved(sides, ctx.runs)
    ratio = lambda a, b: a / b  # noqa: E731
    width, height = ctx.sizes.photo
    image = f"{width}×{height} JPEG ({width * height / 1e6:.0f} MP)"
    clip = f"{ctx.sizes.audio_seconds:g} s 44.1 kHz stereo WAV"
    film = f"{ctx.sizes.video_seconds:g} s {ctx.sizes.video_size[1]}p MP4"
    missing = ", ".join(unavailable_video_backends())
    return Section("media", [
        Figure(f"{image} → tensors, ours", seconds["ours image"], "s", digits=3),
        Figure(f"{image}: ours ÷ load_image", paired(seconds["ours image"], seconds["theirs image"], ratio),
               target=Target("≤", 1.0)),
        Figure(f"{clip} → features, ours", seconds["ours audio"], "s", digits=3),
        Figure(f"{clip}: ours ÷ load_audio", paired(seconds["ours audio"], seconds["theirs audio"], ratio),
               target=Target("≤", 1.0)),
        Figure(f"{film} → {frames} frames' tensors, ours", seconds["ours video"], "s", Target("<", 2.0), digits=3),
        Figure(f"{film}: ours ÷ load_video(opencv)", paired(seconds["ours video"], seconds["theirs video"], ratio),
               target=Target("≤", 1.0),
               note=f"transformers' other video backends are not available here ({missing or 'none missing'})"),
    ])
