"""Pictures of the soft tokens: which part of an image, which 40 ms of a clip and which video
frames, at which timestamps, become the tokens the model reads.

The geometry is the processor's: an image's size is the image processor's own resize function
with its own patch and pooling sizes; a clip's frame length and cap are the processor's
`audio_ms_per_token` and `audio_seq_length`; a video's frames are those the processor was
given, with the timestamps and runs found in its expanded prompt (`inspector.video_spans`).
Every count drawn is the count of the processor's `input_ids`.

The pictures are SVG built from numbers and escaped names only (file names are untrusted).
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass

import numpy as np

from gemma4_ui.inspector.layers import ExpansionCache, TokenCounts
from gemma4_ui.media.decoding import AUDIO_SAMPLING_RATE, MediaItem

MAX_PICTURE_SIDE = 720  # px of the embedded picture: the map is seen at most this wide
THUMBNAIL_HEIGHT = 72  # px of a video frame in the strip
WAVEFORM_BINS = 600

_pictures = ExpansionCache()  # resized, encoded pictures by image (or video) and size


# -- images ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ImageGrid:
    """How the image processor cuts one image: resized to `resized` (width, height) px,
    into `patch`-px patches, each `pool` × `pool` patches pooled into one soft token."""

    resized: tuple[int, int]
    patch: int
    pool: int

    @property
    def patch_columns(self) -> int:
        return self.resized[0] // self.patch

    @property
    def patch_rows(self) -> int:
        return self.resized[1] // self.patch

    @property
    def columns(self) -> int:
        return self.patch_columns // self.pool

    @property
    def rows(self) -> int:
        return self.patch_rows // self.pool

    @property
    def soft_tokens(self) -> int:
        return self.columns * self.rows


def image_grid(processor, width: int, height: int, budget: int) -> ImageGrid:
    """The grid for a `width` × `height` image at `budget` soft tokens at most, from the
    image processor's own resize function called with its own settings."""
    from transformers.models.gemma4.image_processing_gemma4 import get_aspect_ratio_preserving_size

    ip = processor.image_processor
    pool, patch = ip.pooling_kernel_size, ip.patch_size
    h, w = get_aspect_ratio_preserving_size(height, width, patch, budget * pool**2, pool)
    return ImageGrid((w, h), patch, pool)


def _jpeg_data_url(image, size: tuple[int, int]) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    image.resize(size, Image.Resampling.BILINEAR).save(buffer, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _picture(image, resized: tuple[int, int]) -> str:
    """The image as the processor resized it, at most MAX_PICTURE_SIDE px (cached: the
    inspector redraws on every keystroke)."""
    scale = min(1.0, MAX_PICTURE_SIDE / max(resized))
    size = (max(1, round(resized[0] * scale)), max(1, round(resized[1] * scale)))
    return _pictures.get((image,), ("map", size), lambda: _jpeg_data_url(image, size))


def image_map_svg(image, grid: ImageGrid) -> str:
    """The resized image, its patch grid (thin lines) and its pooled cells (thick lines), in
    the processor's pixel coordinates; hovering a cell names its soft token."""
    w, h = grid.resized
    step = grid.patch * grid.pool
    thin = "".join(f"M{x} 0V{h}" for x in range(grid.patch, w, grid.patch)) + "".join(
        f"M0 {y}H{w}" for y in range(grid.patch, h, grid.patch))
    thick = "".join(f"M{x} 0V{h}" for x in range(step, w, step)) + "".join(f"M0 {y}H{w}" for y in range(step, h, step))
    cells = "".join(
        f"<rect x='{c * step}' y='{r * step}' width='{step}' height='{step}'><title>soft token {r * grid.columns + c + 1}"
        f" of {grid.soft_tokens}: row {r + 1}, column {c + 1}</title></rect>"
        for r in range(grid.rows) for c in range(grid.columns))
    return (f"<svg class='stm-image' viewBox='0 0 {w} {h}' role='img' preserveAspectRatio='xMidYMid meet'>"
            f"<image href='{_picture(image, grid.resized)}' width='{w}' height='{h}'/>"
            f"<path d='{thin}' class='stm-patch'/><path d='{thick}' class='stm-cell'/>"
            f"<g class='stm-cells'>{cells}</g></svg>")


# -- audio ----------------------------------------------------------------------------------------

def _envelope(samples: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin minimum and maximum of the samples: the waveform's outline."""
    usable = len(samples) // bins * bins
    if usable == 0:
        padded = np.zeros(bins, dtype=np.float32)
        padded[: len(samples)] = samples
        return padded, padded
    shaped = samples[:usable].reshape(bins, -1)
    return shaped.min(axis=1), shaped.max(axis=1)


def audio_map_svg(samples: np.ndarray, soft_tokens: int, ms_per_token: int, cap_seconds: float,
                  original_seconds: float) -> str:
    """The clip's waveform with one band per soft token (`ms_per_token` each), and where the
    model stops listening (`cap_seconds`) when the clip was longer."""
    kept = len(samples) / AUDIO_SAMPLING_RATE
    span = max(original_seconds, kept, 1e-3)
    width, height, mid = 600.0, 80.0, 40.0
    x_per_second = width / span
    kept_width = kept * x_per_second
    bins = max(1, min(WAVEFORM_BINS, round(kept_width)))
    low, high = _envelope(samples, bins)
    peak = float(max(np.abs(low).max(), np.abs(high).max(), 1e-6))
    bin_width = kept_width / bins
    wave = "".join(f"M{i * bin_width:.2f} {mid - high[i] / peak * (mid - 4):.1f}V{mid - low[i] / peak * (mid - 4):.1f}"
                   for i in range(bins))
    frame = ms_per_token / 1000 * x_per_second
    bands = "".join(f"M{i * frame:.2f} 0h{frame:.2f}V{height}h{-frame:.2f}Z" for i in range(0, soft_tokens, 2))
    parts = [f"<svg class='stm-audio' viewBox='0 0 {width:.0f} {height:.0f}' preserveAspectRatio='none' role='img'>",
             f"<path d='{bands}' class='stm-frame'/>",
             f"<path d='{wave}' class='stm-wave' vector-effect='non-scaling-stroke'/>"]
    if original_seconds > cap_seconds:
        cut = cap_seconds * x_per_second
        parts.append(f"<rect x='{cut:.2f}' y='0' width='{width - cut:.2f}' height='{height:.0f}' class='stm-unheard'>"
                     f"<title>not heard: after {cap_seconds:g} s</title></rect>"
                     f"<line x1='{cut:.2f}' x2='{cut:.2f}' y1='0' y2='{height:.0f}' class='stm-cut' "
                     "vector-effect='non-scaling-stroke'/>")
    parts.append("</svg>")
    return "".join(parts)


# -- video ----------------------------------------------------------------------------------------

def _thumbnail(frames: np.ndarray, index: int) -> str:
    from PIL import Image

    frame = frames[index]
    height, width = frame.shape[:2]
    size = (max(1, round(width * THUMBNAIL_HEIGHT / height)), THUMBNAIL_HEIGHT)
    return _pictures.get((frames,), ("thumb", index, size), lambda: _jpeg_data_url(Image.fromarray(frame), size))


def video_strip_html(frames: np.ndarray, timestamps: list[str], tokens_per_frame: list[int]) -> str:
    cells = "".join(
        f"<figure class='stm-frame-thumb'><img src='{_thumbnail(frames, i)}' alt='frame {i + 1}'/>"
        f"<figcaption><b>{html.escape(stamp)}</b> · {tokens}</figcaption></figure>"
        for i, (stamp, tokens) in enumerate(zip(timestamps, tokens_per_frame)))
    return f"<div class='stm-strip'>{cells}</div>"


# -- the panel ------------------------------------------------------------------------------------

NO_MEDIA = ("<p class='inspector-empty'>Attach an image, a clip or a video: this shows which part of it "
            "becomes which soft token.</p>")


def maps_html(processor, media: list[MediaItem], counts: TokenCounts | None, budget: int,
              shown: list[MediaItem] | None = None) -> str:
    """One figure per medium of `shown` (default: all of `media`). `media` is every medium of
    the prompt in order, as `counts` counted them: each is matched to its own row."""
    if not media or counts is None:
        return NO_MEDIA
    rows = {"image": iter(counts.images), "audio": iter(counts.audio), "video": iter(counts.videos)}
    wanted = {id(item) for item in (media if shown is None else shown)}
    figures = []
    for item in media:
        row = next(rows[item.kind], None)
        if row is None or id(item) not in wanted:
            continue
        name = html.escape(item.name)
        if item.kind == "image":
            grid = image_grid(processor, *item.data.size, budget)
            figures.append(
                f"<figure class='stm-figure' data-kind='image' data-soft-tokens='{grid.soft_tokens}'>"
                f"{image_map_svg(item.data, grid)}<figcaption>🖼️ <b>{name}</b>: {item.data.width}×{item.data.height} px "
                f"resized to {grid.resized[0]}×{grid.resized[1]} px → {grid.patch_columns}×{grid.patch_rows} patches "
                f"of {grid.patch} px → {grid.columns}×{grid.rows} cells of {grid.pool}×{grid.pool} patches = "
                f"<b class='stm-count'>{grid.soft_tokens}</b> soft tokens (budget {budget})</figcaption></figure>")
        elif item.kind == "audio":
            ms = int(processor.audio_ms_per_token)
            cap = processor.audio_seq_length * ms / 1000
            original = item.original_seconds or len(item.data) / AUDIO_SAMPLING_RATE
            cut = (f"; cut at {cap:g} s of {original:.1f} s, the rest is not heard" if original > cap else "")
            figures.append(
                f"<figure class='stm-figure' data-kind='audio' data-soft-tokens='{row.soft_tokens}'>"
                f"{audio_map_svg(item.data, row.soft_tokens, ms, cap, original)}<figcaption>🔊 <b>{name}</b>: "
                f"{len(item.data) / AUDIO_SAMPLING_RATE:.2f} s heard, one band = {ms} ms = one soft token → "
                f"<b class='stm-count'>{row.soft_tokens}</b> soft tokens{cut}</figcaption></figure>")
        else:
            per_frame = [row.tokens_per_frame] * row.frames
            figures.append(
                f"<figure class='stm-figure' data-kind='video' data-soft-tokens='{row.soft_tokens}'>"
                f"{video_strip_html(item.data, row.timestamps, per_frame)}<figcaption>🎞️ <b>{name}</b>: "
                f"{row.frames} frames sampled of {row.seconds:.1f} s, timestamps as the prompt writes them · "
                f"soft tokens per frame → <b class='stm-count'>{row.soft_tokens}</b> soft tokens + {row.markers} for "
                f"timestamps and frame markers</figcaption></figure>")
    if not figures:
        return NO_MEDIA
    return f"<div class='soft-token-maps'>{''.join(figures)}</div>"


CSS = """
.soft-token-maps { display: flex; flex-direction: column; gap: 12px; }
.stm-source { font-size: 0.85em; margin: 0 0 6px; opacity: 0.8; }
.stm-figure { margin: 0; }
.stm-figure figcaption { font-size: 0.85em; margin-top: 4px; }
.stm-image { width: 100%; max-height: 420px; display: block; background: #111; }
.stm-patch { stroke: rgba(255,255,255,0.35); stroke-width: 0.6; fill: none; }
.stm-cell { stroke: #facc15; stroke-width: 1.6; fill: none; }
.stm-cells rect { fill: transparent; }
.stm-cells rect:hover { fill: rgba(250,204,21,0.35); }
.stm-audio { width: 100%; height: 80px; display: block; background: var(--block-background-fill); }
.stm-frame { fill: rgba(59,130,246,0.18); }
.stm-wave { stroke: var(--body-text-color); stroke-width: 1; fill: none; }
.stm-unheard { fill: rgba(239,68,68,0.18); }
.stm-cut { stroke: #ef4444; stroke-width: 2; }
.stm-strip { display: flex; gap: 4px; overflow-x: auto; padding-bottom: 4px; }
.stm-frame-thumb { margin: 0; flex: none; text-align: center; }
.stm-frame-thumb img { height: 72px; display: block; border-radius: 3px; }
.stm-frame-thumb figcaption { font-size: 0.75em; font-family: var(--font-mono); }
"""
