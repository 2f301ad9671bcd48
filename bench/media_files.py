"""Realistic uploads, generated on the spot (no downloads): a 12-megapixel camera JPEG, 30 s
of CD-quality stereo WAV, a 60 s 720p MP4 with motion, plus smaller images for histories.

Content has real detail (noise, edges, moving objects), because decode cost depends on it: a
flat-colour JPEG or a static video decodes much faster than a photo or a film.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def photo_jpeg(path: Path, width: int = 4000, height: int = 3000, seed: int = 0) -> Path:
    """A camera-sized JPEG: smooth gradients, hard-edged shapes and sensor-like noise."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x / width * 200, y / height * 200, (x + y) / (width + height) * 255], axis=-1)
    noise = rng.normal(0, 18, size=(height, width, 1)).astype(np.float32)
    image = Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(60):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        size = int(rng.integers(width // 40, width // 6))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape([x0, y0, x0 + size, y0 + size], fill=colour, outline=(0, 0, 0), width=6)
    image.save(path, quality=90)
    return path


def screenshot_png(path: Path, width: int = 1920, height: int = 1080, seed: int = 1) -> Path:
    """A UI-like picture: flat panels and lines of 'text' (what PNG uploads usually are)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (width, height), (245, 245, 248))
    draw = ImageDraw.Draw(image)
    for row in range(40, height - 40, 28):
        length = int(rng.integers(width // 4, width - 80))
        draw.rectangle([40, row, 40 + length, row + 12], fill=(40, 40, 60))
    draw.rectangle([width * 2 // 3, 80, width - 60, height // 2], fill=(70, 130, 220))
    image.save(path)
    return path


def speech_like_wav(path: Path, seconds: float = 30.0, rate: int = 44_100, seed: int = 2) -> Path:
    """Stereo 16-bit WAV at 44.1 kHz (a typical recording), so loading must also mix and
    resample to Gemma 4's 16 kHz mono: syllable-like bursts of harmonics over noise."""
    import soundfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 140 + 40 * np.sin(2 * np.pi * 0.3 * t)
    voice = sum(np.sin(2 * np.pi * k * np.cumsum(pitch) / rate) / k for k in range(1, 6))
    syllables = (np.sin(2 * np.pi * 4 * t) > 0).astype(np.float32)
    mono = 0.3 * voice * syllables + 0.02 * rng.normal(size=t.size)
    stereo = np.stack([mono, 0.9 * mono], axis=1)
    soundfile.write(path, stereo.astype(np.float32), rate, subtype="PCM_16")
    return path


def moving_video(path: Path, seconds: float = 60.0, width: int = 1280, height: int = 720, fps: int = 30,
                 seed: int = 3) -> Path:
    """An MP4 (mp4v) with a panning textured background and objects moving across it, so
    every frame differs from the last as in real footage."""
    import cv2

    rng = np.random.default_rng(seed)
    texture = rng.integers(0, 256, size=(height, width * 2, 3), dtype=np.uint8)
    texture = cv2.GaussianBlur(texture, (0, 0), 3)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    assert writer.isOpened(), "OpenCV's FFmpeg cannot write mp4v here"
    try:
        for frame_index in range(int(seconds * fps)):
            shift = (frame_index * 4) % width
            frame = np.ascontiguousarray(texture[:, shift:shift + width])
            for k in range(5):
                x = int((frame_index * (3 + k) + k * 200) % width)
                y = int(height / 2 + height / 3 * np.sin(frame_index / (20 + 7 * k) + k))
                cv2.circle(frame, (x, y), 40 + 10 * k, (50 * k, 255 - 40 * k, 120), -1)
            cv2.putText(frame, f"{frame_index / fps:6.2f} s", (40, 80), cv2.FONT_HERSHEY_SIMPLEX, 2, (255, 255, 255), 4)
            writer.write(frame)
    finally:
        writer.release()
    return path
