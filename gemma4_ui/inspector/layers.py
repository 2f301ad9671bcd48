"""The inspector: the three protocol layers and exact per-modality token counts.

Counts come from the processor's real output (`input_ids`, `mm_token_type_ids`,
`num_frames_per_video`), never from estimates: a soft token is an id whose type is image,
video or audio; a control token is an id of one of the tokenizer's special tokens; text is
the rest.
"""

from __future__ import annotations

import copy
import functools
import html
import json
import re
import sys
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gemma4_ui.core import model_family
from gemma4_ui.core.prompt import PromptSpec
from gemma4_ui.inspector.pieces import joined
from gemma4_ui.media.decoding import MediaItem

# mm_token_type_ids values (processing_gemma4 / the protocol doc).
TEXT, IMAGE, VIDEO, AUDIO = 0, 1, 2, 3

# Highlight categories for the raw template, by control token.
TOKEN_KINDS = {
    "turn": ("<|turn>", "<turn|>", "<bos>", "<eos>"),
    "thinking": ("<|think|>", "<|channel>", "<channel|>"),
    "tool": ("<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>"),
    "string": ('<|"|>',),
    "media": ("<|image|>", "<|audio|>", "<|video|>", "<|image>", "<image|>", "<|audio>", "<audio|>"),
}
HIGHLIGHT_COLORS = {"turn": "#3b82f6", "thinking": "#a855f7", "tool": "#f59e0b", "string": "#10b981",
                    "media": "#ef4444", "other": "#6b7280"}


@dataclass
class ImageCount:
    name: str
    soft_tokens: int
    original: tuple[int, int]  # width, height
    resized: tuple[int, int]


@dataclass
class AudioCount:
    name: str
    soft_tokens: int
    seconds: float
    warning: str | None


@dataclass
class VideoCount:
    name: str
    frames: int
    tokens_per_frame: int
    soft_tokens: int
    seconds: float
    # The frames' `mm:ss` timestamps as the prompt carries them, and the tokens the video
    # adds besides its soft tokens (timestamps, the spaces between frames, boundary tokens).
    timestamps: list[str] = field(default_factory=list)
    markers: int = 0

    @property
    def tokens(self) -> int:
        return self.soft_tokens + self.markers


@dataclass
class TokenCounts:
    total: int
    text: int
    control: int
    images: list[ImageCount] = field(default_factory=list)
    audio: list[AudioCount] = field(default_factory=list)
    videos: list[VideoCount] = field(default_factory=list)
    context_length: int | None = None
    # The app's own limit on one request's prompt, below the context (--max-prompt-tokens).
    prompt_limit: int | None = None

    @property
    def image_tokens(self) -> int:
        return sum(i.soft_tokens for i in self.images)

    @property
    def audio_tokens(self) -> int:
        return sum(a.soft_tokens for a in self.audio)

    @property
    def video_tokens(self) -> int:
        return sum(v.soft_tokens for v in self.videos)


def spans_of(types: list[int], kind: int) -> list[tuple[int, int]]:
    """(start, end) of each consecutive run of `kind` (one run per image, frame or clip)."""
    spans, start = [], None
    for index, t in enumerate([*types, None]):
        if t == kind and start is None:
            start = index
        elif t != kind and start is not None:
            spans.append((start, index))
            start = None
    return spans


@dataclass
class VideoSpan:
    """Where one video sits in the expanded prompt: from its first timestamp to its last
    frame's closing boundary token, and each frame's timestamp and soft-token run."""

    start: int
    end: int  # exclusive
    timestamps: list[str]
    frame_runs: list[tuple[int, int]]  # (start, end) of each frame's soft tokens


# The processor writes each frame as `mm:ss <|image>…<image|>`, frames joined by a space.
_TIMESTAMP_BEFORE_FRAME = re.compile(r"(\d+:\d\d) ?$")


def video_spans(tokenizer, ids: list[int], types: list[int], frames_per_video: list[int]) -> list[VideoSpan]:
    """Each video's span in `ids`, found from the processor's own output: the video soft-token
    runs (`mm_token_type_ids` 2) and the timestamp text written before each of them."""
    pieces = {i: tokenizer.decode([i], skip_special_tokens=False) for i in set(ids)}
    frame_runs = spans_of(types, VIDEO)
    spans: list[VideoSpan] = []
    for frames in frames_per_video:
        runs, frame_runs = frame_runs[:frames], frame_runs[frames:]
        if not runs:
            continue
        timestamps, start = [], runs[0][0] - 1
        for index, (run_start, _) in enumerate(runs):
            boundary = run_start - 1  # the frame's opening <|image>
            before = "".join(pieces[i] for i in ids[max(0, boundary - 12):boundary])
            match = _TIMESTAMP_BEFORE_FRAME.search(before)
            timestamps.append(match.group(1) if match else "")
            if index == 0 and match:  # walk back over the tokens that spell the first timestamp
                covered = 0
                while start > 0 and covered < len(match.group(0)):
                    start -= 1
                    covered += len(pieces[ids[start]])
        spans.append(VideoSpan(max(start, 0), min(runs[-1][1] + 1, len(ids)), timestamps, runs))
    return spans


def count_tokens(processor, inputs, media: list[MediaItem], image_budget: int,
                 context_length: int | None = None, prompt_limit: int | None = None) -> TokenCounts:
    ids = inputs["input_ids"][0].tolist()
    types = inputs["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in inputs else [TEXT] * len(ids)
    frames_per_video = [int(n) for n in inputs.get("num_frames_per_video", [])]
    spans = video_spans(processor.tokenizer, ids, types, frames_per_video) if frames_per_video else []
    # A video's timestamps and frame boundaries are counted on its own row, not as text.
    in_video = set()
    for span in spans:
        in_video.update(range(span.start, span.end))
    special = set(processor.tokenizer.all_special_ids)
    control = sum(1 for n, (i, t) in enumerate(zip(ids, types)) if t == TEXT and i in special and n not in in_video)
    text = sum(1 for n, t in enumerate(types) if t == TEXT and n not in in_video) - control
    counts = TokenCounts(total=len(ids), text=text, control=control, context_length=context_length,
                         prompt_limit=prompt_limit)

    images = [m for m in media if m.kind == "image"]
    for item, (start, end) in zip(images, spans_of(types, IMAGE)):
        run = end - start
        width, height = item.data.size
        counts.images.append(ImageCount(item.name, run, (width, height), _resized(processor, width, height, image_budget)))

    for item, (start, end) in zip([m for m in media if m.kind == "audio"], spans_of(types, AUDIO)):
        run = end - start
        warning = "; ".join(filter(None, [item.warning, model_family.late_audio_warning(processor, start)])) or None
        counts.audio.append(AudioCount(item.name, run, item.describe().get("seconds", 0.0), warning))

    for item, frames, span in zip([m for m in media if m.kind == "video"], frames_per_video, spans):
        runs = [end - start for start, end in span.frame_runs]
        counts.videos.append(VideoCount(item.name, frames, runs[0] if runs else 0, sum(runs),
                                        item.describe().get("seconds", 0.0), span.timestamps,
                                        span.end - span.start - sum(runs)))
    return counts


def _resized(processor, width: int, height: int, budget: int) -> tuple[int, int]:
    """The size the image processor resizes to: its own module's function (Gemma4's or
    Gemma4Unified's), with the arguments it passes."""
    ip = processor.image_processor
    resize = sys.modules[type(ip).__module__].get_aspect_ratio_preserving_size
    h, w = resize(height, width, ip.patch_size, budget * ip.pooling_kernel_size**2, ip.pooling_kernel_size)
    return w, h


# -- counting without re-processing the media -------------------------------------------------

class SingleFlight:
    """One computation per key at a time. The composer fires its change event twice for one
    attached file, and two threads processing the same 12 MP photo at once each take twice
    as long: the second caller waits for the first, then finds the result in its cache."""

    def __init__(self):
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextmanager
    def __call__(self, key: Hashable) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        try:
            with lock:
                yield
        finally:
            with self._guard:
                if self._locks.get(key) is lock and not lock.locked():
                    del self._locks[key]


class ExpansionCache:
    """Values computed from decoded media, by the identity of the media objects (a PIL image,
    an audio or video array: the conversation keeps the same objects from turn to turn) and
    the settings used. An entry is dropped when any of its objects is garbage collected, so
    the cache never keeps media alive."""

    def __init__(self):
        self._entries: dict[tuple, object] = {}
        self._lock = threading.Lock()
        self._single_flight = SingleFlight()

    def get(self, objects: tuple, settings: Hashable, compute: Callable[[], object]):
        key = (tuple(id(o) for o in objects), settings)
        with self._single_flight(key):
            with self._lock:
                if key in self._entries:
                    return self._entries[key]
            value = compute()
            try:
                for o in objects:
                    weakref.finalize(o, self._forget, key)
            except TypeError:  # not weak-referenceable: its id could be reused, so don't keep it
                return value
            with self._lock:
                self._entries[key] = value
            return value

    def _forget(self, key: tuple) -> None:
        with self._lock:
            self._entries.pop(key, None)


# The processor's private steps that counting_processor replaces on its copy (transformers
# 5.23's Gemma4Processor); web/workarounds.py checks at start-up that they are there.
PROCESSOR_STEPS = ("_process_images", "_process_videos", "_process_audio")


def processor_steps_present() -> bool:
    import transformers

    processors = [getattr(transformers, name) for name in ("Gemma4Processor", "Gemma4UnifiedProcessor")
                  if hasattr(transformers, name)]
    return bool(processors) and all(callable(getattr(processor, step, None))
                                    for processor in processors for step in PROCESSOR_STEPS)


def counting_processor(processor):
    """A copy of `processor` for counting tokens: the same template, tokenizer and placeholder
    expansion, so its `input_ids` and `mm_token_type_ids` equal the real ones, but each
    medium's expansion is computed once instead of on every keystroke. Its outputs hold no
    pixel or audio features.

    Exact by construction, for Gemma4Processor and Gemma4UnifiedProcessor alike: their image
    and video processors handle each image and video on its own (one at a time gives the same
    expansion as in a batch), while audio features are padded to the longest clip (mel frames,
    or the Unified model's 40 ms waveform frames), so the audio clips are cached together.
    """
    from transformers.image_utils import make_flat_list_of_images
    from transformers.video_utils import make_batched_videos

    cache = ExpansionCache()
    counting = copy.copy(processor)

    def process_images(images, **kwargs):
        settings = _settings(kwargs)
        return {}, [cache.get((image,), settings, functools.partial(_one_image, processor, image, kwargs))
                    for image in make_flat_list_of_images(images)]

    def process_videos(videos, **kwargs):
        settings = _settings(kwargs, ignore="video_metadata")  # each video's own goes with it
        metadata = kwargs.get("video_metadata")
        expanded = []
        for index, video in enumerate(make_batched_videos(videos)):
            one = {**kwargs, "video_metadata": [metadata[index]]} if metadata else kwargs
            expanded.append(cache.get((video,), settings, functools.partial(_one_video, processor, video, one)))
        return {"num_frames_per_video": [frames for _, frames in expanded]}, [text for text, _ in expanded]

    def process_audio(audio, **kwargs):
        return {}, cache.get(tuple(audio), _settings(kwargs), lambda: processor._process_audio(audio, **kwargs)[1])

    counting._process_images, counting._process_videos, counting._process_audio = (
        process_images, process_videos, process_audio)
    return counting


def _one_image(processor, image, kwargs: dict) -> str:
    return processor._process_images([image], **kwargs)[1][0]


def _one_video(processor, video, kwargs: dict) -> tuple[str, int]:
    processed, (replacement,) = processor._process_videos([video], **kwargs)
    return replacement, int(processed["num_frames_per_video"][0])


def _settings(kwargs: dict, ignore: str = "") -> str:
    return repr(sorted((k, repr(v)) for k, v in kwargs.items() if k != ignore))


# -- layer 1: the message data ---------------------------------------------------------------

def messages_layer(spec: PromptSpec, media: list[MediaItem]) -> str:
    """The exact data given to apply_chat_template, with media as short descriptors."""
    by_data = {id(m.data): m for m in media}

    def describe(value):
        if isinstance(value, dict):
            if value.get("type") in ("image", "audio", "video") and id(value.get(value["type"])) in by_data:
                return {"type": value["type"], value["type"]: by_data[id(value[value["type"]])].describe()}
            return {k: describe(v) for k, v in value.items()}
        if isinstance(value, list):
            return [describe(v) for v in value]
        return value

    data = {"messages": describe(spec.messages), "enable_thinking": spec.enable_thinking,
            "add_generation_prompt": True}
    if spec.tools:
        data["tools"] = spec.tools
    data["processor_kwargs"] = {"images_kwargs": {"max_soft_tokens": spec.image_budget}}
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


# JSON token kinds (pygments' names) and the class each is coloured by; punctuation stays plain.
_JSON_CLASSES = {"Name.Tag": "jk", "Literal.String.Double": "js", "Literal.Number.Integer": "jn",
                 "Literal.Number.Float": "jn", "Keyword.Constant": "jc"}


def messages_html(text: str) -> str:
    """Layer 1's JSON as pieces for `tail_patched_html`: one line each (a draft being typed
    changes only the last lines), coloured by pygments' JSON lexer."""
    from pygments.lexers.data import JsonLexer

    lines, line = [], []
    for kind, value in JsonLexer().get_tokens(text):
        css = _JSON_CLASSES.get(str(kind).removeprefix("Token."))
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append(line)
                line = []
            if part:
                line.append(f"<span class='{css}'>{html.escape(part)}</span>" if css else html.escape(part))
    if line:
        lines.append(line)
    return joined([f"<div class='jl'>{''.join(parts)}</div>" for parts in lines])


MESSAGES_CSS = """
.jv-lines { word-break: break-word; line-height: 1.5; }
.jv-lines .jk { color: #3b82f6; } .jv-lines .js { color: #059669; } .jv-lines .jn { color: #d97706; }
.jv-lines .jc { color: #a855f7; }
"""


# -- layer 2: the raw template, highlighted ----------------------------------------------------

def _token_kind(token: str) -> str:
    for kind, tokens in TOKEN_KINDS.items():
        if token in tokens:
            return kind
    return "other"


def template_spans(processor, spec: PromptSpec, raw: str) -> list[tuple[str, str | None]]:
    """The raw template in (text, kind) pieces, control tokens told apart by token id:
    a control token the user typed (`<|turn>` in a message) is encoded as text, exactly as
    the model receives it, and is shown as text. Joining the pieces gives back `raw`.

    The template is rendered and encoded the way `apply_chat_template(...,
    sanitize_control_tokens=True)` does it (transformers' own marking of the strings that
    came from the user), without the media expansion, so each id lines up with the text."""
    from transformers.utils.chat_template_utils import (
        _get_control_token_patterns,
        encode_marked_chat,
        mark_control_tokens,
    )

    tokenizer = processor.tokenizer
    control_re, _ = _get_control_token_patterns(tokenizer._get_control_tokens(processor.chat_template))
    marked = processor.apply_chat_template(mark_control_tokens(spec.messages, control_re), tokenize=False,
                                           **mark_control_tokens(spec.template_kwargs(), control_re))
    ids = encode_marked_chat(tokenizer, marked)
    special = set(tokenizer.all_special_ids) | {tokenizer.convert_tokens_to_ids(t) for kind in TOKEN_KINDS.values()
                                                for t in kind}
    spans: list[tuple[str, str | None]] = []
    run: list[int] = []
    for token_id in [*ids, None]:
        if token_id is not None and token_id not in special:
            run.append(token_id)
            continue
        if run:  # decoded together: one character can span several byte tokens
            spans.append((tokenizer.decode(run, skip_special_tokens=False), None))
            run = []
        if token_id is not None:
            token = tokenizer.convert_ids_to_tokens(token_id)
            spans.append((token, _token_kind(token)))
    if "".join(text for text, _ in spans) != raw:  # a tokenizer that does not decode back exactly
        return [(raw, None)]
    return spans


def template_html(spans: list[tuple[str, str | None]]) -> str:
    """The raw template's spans as pieces for `tail_patched_html`: each control token in its
    kind's colour, the text between them plain."""
    return joined([f"<span class='tv'>{html.escape(text)}</span>" if kind is None else
                   f"<span class='tv tv-{kind}' title='{kind} token'>{html.escape(text)}</span>"
                   for text, kind in spans])


TEMPLATE_LEGEND = "<div class='tv-legend'>" + "".join(
    f"<span class='tv tv-{kind}'>{kind}</span> " for kind in HIGHLIGHT_COLORS) + "</div>"
TEMPLATE_CSS = """
.tv-tokens { word-break: break-word; }
.tv-legend { margin-bottom: 4px; } .tv-legend .tv { font-size: 0.8em; padding: 0 4px; }
""" + "".join(f".tv-{kind} {{ background: {colour}40; border-radius: 3px; padding: 0 2px; }}\n"
                for kind, colour in HIGHLIGHT_COLORS.items())


# -- layer 3: the expanded ids ---------------------------------------------------------------

def expanded_layer(processor, inputs, show_ids: bool = False) -> str:
    """The processor's input_ids decoded token by token, soft-token runs collapsed
    (`<|image|> × 266`); boundary tokens and video timestamps stay visible."""
    tokenizer = processor.tokenizer
    ids = inputs["input_ids"][0].tolist()
    soft = {processor.image_token_id, processor.audio_token_id, processor.video_token_id}
    # Decoded once per distinct id: a conversation repeats most of its ids many times.
    decoded = {i: tokenizer.decode([i], skip_special_tokens=False) for i in set(ids)}
    pieces: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        if ids[i] in soft:
            while j + 1 < len(ids) and ids[j + 1] == ids[i]:
                j += 1
        if j > i:
            label = f"{tokenizer.convert_ids_to_tokens(ids[i])} × {j - i + 1}"
            pieces.append(f"[{label} | id {ids[i]}]" if show_ids else f"[{label}]")
        else:
            piece = decoded[ids[i]]
            pieces.append(f"{piece}⟨{ids[i]}⟩" if show_ids else piece)
        i = j + 1
    return "".join(pieces)


# -- the counts panel -------------------------------------------------------------------------

def counts_html(counts: TokenCounts) -> str:
    rows = [("Text tokens", counts.text, ""), ("Control tokens", counts.control, "")]
    for image in counts.images:
        rows.append((f"🖼️ {image.name}", image.soft_tokens,
                     f"{image.original[0]}×{image.original[1]} → {image.resized[0]}×{image.resized[1]} px"))
    for clip in counts.audio:
        note = f"{clip.seconds:.1f} s" + (f" — ⚠️ {clip.warning}" if clip.warning else "")
        rows.append((f"🔊 {clip.name}", clip.soft_tokens, note))
    for video in counts.videos:
        rows.append((f"🎞️ {video.name}", video.tokens,
                     f"{video.frames} frames × {video.tokens_per_frame} soft tokens + {video.markers} for the "
                     f"timestamps and frame markers, {video.seconds:.1f} s"))
    # A details column only when a part has details (media): an empty column reads as missing data.
    detailed = any(note for _, _, note in rows)

    def cell(note: str) -> str:
        return f"<td>{html.escape(note)}</td>" if detailed else ""

    body = "".join(
        f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>{value:,}</td>{cell(note)}</tr>"
        for name, value, note in rows
    )
    totals = [("Image soft tokens", f"{counts.image_tokens:,}"), ("Audio soft tokens", f"{counts.audio_tokens:,}"),
              ("Video soft tokens", f"{counts.video_tokens:,}"), ("Total", f"<b>{counts.total:,}</b>")]
    summary = "".join(f"<tr><td><b>{name}</b></td><td style='text-align:right'>{value}</td>{cell('')}</tr>"
                      for name, value in totals)
    meter = ""
    limit = counts.prompt_limit or counts.context_length
    if limit:
        share = counts.total / limit
        where = (f"of this app's prompt limit; the model's context is {counts.context_length:,}"
                 if counts.prompt_limit else "of context")
        meter = (f"<div class='ctx-meter' title='{html.escape(f'{share:.2%} {where}')}'>"
                 f"<div style='width:{min(100.0, share * 100):.2f}%'></div></div>"
                 f"<div class='ctx-label'>{counts.total:,} / {limit:,} tokens ({share:.2%}) {html.escape(where)}</div>")
    return (f"<div class='token-counts'>{meter}<table><thead><tr><th>Part</th><th>Tokens</th>"
            f"{'<th>Details</th>' if detailed else ''}</tr>"
            f"</thead><tbody>{body}{summary}</tbody></table></div>")
