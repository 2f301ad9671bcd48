"""ZeroGPU support: `@spaces.GPU` with a duration computed from the request.

Off Spaces (SPACES_ZERO_GPU unset) `spaces.GPU` returns the function unchanged, and when the
`spaces` package is not installed `on_gpu` does the same, so the app behaves identically.
"""

from __future__ import annotations

import math

# Seconds of GPU time, measured on the order of an E2B in bfloat16 with headroom: ZeroGPU
# cuts a call off at its duration, and a larger request waits longer in the queue.
BASE_SECONDS = 10.0
SECONDS_PER_NEW_TOKEN = 0.04
SECONDS_PER_IMAGE = 1.0
SECONDS_PER_VIDEO_FRAME = 0.25
SECONDS_PER_AUDIO_CLIP = 1.0
MAX_SECONDS = 300


def estimate_gpu_seconds(max_new_tokens: int, images: int = 0, video_frames: int = 0, audio_clips: int = 0) -> int:
    seconds = (
        BASE_SECONDS
        + SECONDS_PER_NEW_TOKEN * max(0, max_new_tokens)
        + SECONDS_PER_IMAGE * images
        + SECONDS_PER_VIDEO_FRAME * video_frames
        + SECONDS_PER_AUDIO_CLIP * audio_clips
    )
    return min(MAX_SECONDS, math.ceil(seconds))


def gpu_duration(model_key: str, inputs, generation: dict, record_probabilities: bool = False) -> int:
    """ZeroGPU calls this with the decorated function's arguments."""
    images = int(inputs["pixel_values"].shape[0]) if "pixel_values" in inputs else 0
    frames = int(inputs["pixel_values_videos"].shape[0]) if "pixel_values_videos" in inputs else 0
    clips = int(inputs["input_features"].shape[0]) if "input_features" in inputs else 0
    return estimate_gpu_seconds(int(generation.get("max_new_tokens", 0)), images, frames, clips)


def on_gpu(duration):
    try:
        import spaces
    except ImportError:
        return lambda function: function
    return spaces.GPU(duration=duration)
