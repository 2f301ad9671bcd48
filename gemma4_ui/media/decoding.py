"""Validate and decode the user's media: one uploaded file in, processor-ready data out.

    image → PIL RGB (EXIF orientation applied, transparency on white)
    audio → float32 mono 16 kHz, at most `max_audio_seconds` (Gemma 4 hears 30 s)
    video → evenly sampled RGB frames + the real `VideoMetadata`, because Gemma 4 prints
            each frame's `mm:ss` timestamp from frame index / fps

Every problem surfaces as `MediaError`, whose message the UI shows verbatim, so each one
names the file and says what to do. Pillow, librosa and OpenCV are imported inside the
functions that use them: importing this module stays cheap.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gemma4_ui.config import MediaLimits

if TYPE_CHECKING:
    from PIL import Image
    from transformers.video_utils import VideoMetadata

AUDIO_SAMPLING_RATE = 16_000  # what Gemma 4's audio feature extractor expects

# What Pillow decodes; HEIC (iPhone photos, through pillow-heif) is shown to the browser
# as a JPEG copy. TIFF and AVIF are refused.
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "HEIF")
# Pillow calls a camera's multi-picture JPEG "MPO"; its first picture is the photo.
PILLOW_IMAGE_FORMATS = (*IMAGE_FORMATS, "MPO")
AUDIO_FORMATS = ("WAV", "MP3", "FLAC", "M4A")
VIDEO_FORMATS = ("AVI", "FLV", "MPEG")
# These containers carry audio, video or both; only probing for a video stream tells which.
AV_CONTAINERS = ("MP4", "MATROSKA", "OGG")

IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".heic", ".heif"}
AUDIO_EXTENSIONS = {".wav", ".mp3", ".flac", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".weba", ".webm"}
VIDEO_EXTENSIONS = {".mp4", ".m4v", ".mov", ".webm", ".mkv", ".avi", ".ogv"}

SUPPORTED_TYPES = (
    "images (PNG, JPEG, WebP, GIF, BMP, HEIC), audio (WAV, MP3, FLAC, OGG, M4A, WebM) and video "
    "(MP4, WebM, MOV, MKV, AVI)"
)
SHOWN_EXTENSIONS = {"PNG": ".png", "JPEG": ".jpg", "MPO": ".jpg", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp",
                    "WAV": ".wav", "MP3": ".mp3", "FLAC": ".flac", "M4A": ".m4a", "OGG": ".ogg", "MP4": ".mp4",
                    "MATROSKA": ".webm", "AVI": ".avi", "FLV": ".flv", "MPEG": ".mpg"}
# Video codecs that Chromium, Firefox and Safari all play (in MP4 or WebM).
BROWSER_VIDEO_CODECS = {"h264", "vp8", "vp9", "av1"}
_HEAD_BYTES = 512  # enough for every signature below, including MPEG-TS's second sync byte


class MediaError(ValueError):
    """A file the app cannot use; the message is shown to the user as is."""


@dataclass
class MediaItem:
    kind: str  # "image" | "audio" | "video"
    path: str  # the uploaded file, kept for display and export
    name: str  # basename
    data: Any  # image: PIL.Image RGB; audio: float32 (n,) at 16 kHz; video: uint8 (T, H, W, 3) RGB
    video_metadata: VideoMetadata | None = None
    warning: str | None = None  # something the user should know, e.g. the audio was cut
    original_seconds: float | None = None  # audio: the file's length, before any cut
    # What the chat shows instead of `path`, when that cannot be shown as it is: a copy
    # named for what the file is, a browser-readable picture (HEIC), a video's still frame.
    shown_path: str | None = None

    def describe(self) -> dict[str, Any]:
        """A short JSON-able descriptor for the inspector; never the media bytes."""
        info: dict[str, Any] = {"type": self.kind, "name": self.name}
        if self.kind == "image":
            info.update(width=self.data.width, height=self.data.height)
        elif self.kind == "audio":
            info.update(seconds=round(len(self.data) / AUDIO_SAMPLING_RATE, 2), sampling_rate=AUDIO_SAMPLING_RATE)
        else:
            metadata = self.video_metadata
            info.update(
                seconds=round(metadata.duration, 2),
                fps=round(metadata.fps, 3),
                frames=len(metadata.frames_indices),
                width=metadata.width,
                height=metadata.height,
            )
        if self.warning:
            info["warning"] = self.warning
        return info


# ---------------------------------------------------------------------------------------
# Public API


def decoded_bytes(item: MediaItem) -> int:
    """What `item`'s decoded data takes in memory."""
    if item.kind == "image":
        return item.data.width * item.data.height * len(item.data.getbands())
    return int(item.data.nbytes)


def check_conversation_media(held: list[MediaItem], added: list[MediaItem], limits: MediaLimits) -> None:
    """Refuse `added` when a conversation that holds `held` would then be over its limits
    on the number of files or their decoded size; the message names the limit."""
    count = len(held) + len(added)
    if count > limits.max_files_per_conversation:
        raise MediaError(
            f"A conversation holds at most {limits.max_files_per_conversation} files; this one would hold {count}. "
            "Please start a new conversation for more."
        )
    total = sum(map(decoded_bytes, held)) + sum(map(decoded_bytes, added))
    if total > limits.max_conversation_media_mb * 2**20:
        raise MediaError(
            f"A conversation's media may take at most {limits.max_conversation_media_mb:g} MB once decoded; "
            f"this one's would take {total / 2**20:.0f} MB. Please send smaller files or start a new conversation."
        )


def load_media(path: str | Path, limits: MediaLimits = MediaLimits()) -> MediaItem:
    """Validate one file (size first, before any decoding) and decode it for the processor."""
    path = Path(path)
    size_mb = _require_nonempty_file(path) / 2**20
    if size_mb > limits.max_file_mb:
        raise MediaError(
            f"'{path.name}' is {size_mb:.1f} MB; the limit is {limits.max_file_mb:g} MB per file. "
            "Please upload a smaller file."
        )
    kind = detect_kind(path)
    loader = {"image": _load_image, "audio": _load_audio, "video": _load_video}[kind]
    try:
        item = loader(path, limits)
    except MediaError:
        raise
    except Exception as exc:  # damaged files make Pillow, libsndfile, PyAV, OpenCV raise all sorts
        raise MediaError(_undecodable_message(path, kind)) from exc
    _show_as_what_it_is(item, path)
    return item


def _named_kinds(path: Path) -> list[str]:
    """The kinds the file's extension names (.webm names audio and video)."""
    suffix = path.suffix.lower()
    return [k for k, names in (("image", IMAGE_EXTENSIONS), ("audio", AUDIO_EXTENSIONS), ("video", VIDEO_EXTENSIONS))
            if suffix in names]


def _show_as_what_it_is(item: MediaItem, path: Path) -> None:
    """The chat picks a player from the file's name: a file whose name says another kind (a
    JPEG called .wav) is shown through a copy named for its content, and the message says so."""
    named = _named_kinds(path)
    if item.kind in named:
        return
    if item.shown_path is None:
        with path.open("rb") as file:
            extension = SHOWN_EXTENSIONS.get(_sniff_format(file.read(_HEAD_BYTES)) or "")
        if extension:
            item.shown_path = str(_sibling(path, extension))
    if named:
        noun = {"image": "an image", "audio": "audio", "video": "a video"}
        lie = (f"'{path.name}' is named like {noun[named[0]]} but is {noun[item.kind]}; "
               f"it is shown and sent as {noun[item.kind]}.")
        item.warning = f"{lie} {item.warning}" if item.warning else lie


def _sibling(path: Path, extension: str, content: bytes | None = None) -> Path:
    """A file next to `path` (in the upload's own folder, which the app may serve) with
    `extension`: `content`, or the same bytes (a hard link when possible)."""
    target = path.with_name(f"{path.name}{extension}")
    if not target.exists():
        if content is not None:
            target.write_bytes(content)
        else:
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
    return target


def detect_kind(path: str | Path) -> str:
    """'image', 'audio' or 'video', told by the content; the extension only breaks ties."""
    path = Path(path)
    _require_nonempty_file(path)
    with path.open("rb") as file:
        head = file.read(_HEAD_BYTES)
    file_format = _sniff_format(head) or _pillow_format(path)
    if file_format is None and _starts_with_frame_sync(head) and path.suffix.lower() in AUDIO_EXTENSIONS:
        # Bare MP3 / AAC frames have only an 11-bit signature, too weak alone: the name must agree.
        file_format = "MP3"
    if file_format in IMAGE_FORMATS:
        return "image"
    if file_format in AUDIO_FORMATS:
        return "audio"
    if file_format in VIDEO_FORMATS:
        return "video"
    if file_format in AV_CONTAINERS:
        if _has_video_frames(path):
            return "video"
        # No decodable picture: an audio recording (e.g. the browser's .webm), unless the name
        # says video, in which case the codec is one OpenCV lacks and the video loader says so.
        return "video" if path.suffix.lower() in VIDEO_EXTENSIONS - AUDIO_EXTENSIONS else "audio"
    if file_format is not None:
        raise MediaError(
            f"'{path.name}' is a {file_format} file, which is not supported. "
            f"Supported: {SUPPORTED_TYPES}. Please convert it (e.g. to PNG, WAV or MP4)."
        )
    raise MediaError(_unrecognised_message(path))


def _undecodable_message(path: Path, kind: str) -> str:
    advice = {
        "image": "Please upload it again or try another file.",
        "audio": "Please upload WAV, MP3, FLAC, OGG or M4A.",
        "video": "Please upload an MP4 (H.264) file.",
    }[kind]
    noun = {"image": "an image", "audio": "audio", "video": "a video"}[kind]
    return f"'{path.name}' could not be decoded as {noun}; it may be damaged or incomplete. {advice}"


# ---------------------------------------------------------------------------------------
# Recognising files


def _require_nonempty_file(path: Path) -> int:
    """The file's size in bytes; refuses missing and empty files."""
    if not path.is_file():
        raise MediaError(f"'{path.name}' was not found on the server. Please upload it again.")
    size = path.stat().st_size
    if size == 0:
        raise MediaError(f"'{path.name}' is empty (0 bytes). Please upload the file again.")
    return size


def _sniff_format(head: bytes) -> str | None:
    """Name the file format from its first bytes, or None when they don't tell."""
    riff_type = head[8:12] if head[:4] == b"RIFF" else b""
    box_type = head[4:8]  # ISO base media (MP4, MOV, M4A, HEIC) files start with a sized box
    brand = head[8:12] if box_type == b"ftyp" else b""
    signatures = [
        (head.startswith(b"\x89PNG\r\n\x1a\n"), "PNG"),
        (head.startswith(b"\xff\xd8\xff"), "JPEG"),
        (head[:6] in (b"GIF87a", b"GIF89a"), "GIF"),
        (riff_type == b"WEBP", "WEBP"),
        (head.startswith(b"BM"), "BMP"),
        (head[:4] in (b"II*\x00", b"MM\x00*"), "TIFF"),
        (brand in (b"heic", b"heix", b"hevc", b"mif1", b"msf1"), "HEIF"),
        (brand in (b"avif", b"avis"), "AVIF"),
        (riff_type == b"WAVE", "WAV"),
        (head.startswith(b"fLaC"), "FLAC"),
        (head.startswith(b"ID3"), "MP3"),
        (brand in (b"M4A ", b"M4B "), "M4A"),
        (bool(brand) or box_type in (b"moov", b"mdat", b"wide", b"free"), "MP4"),
        (head.startswith(b"\x1a\x45\xdf\xa3"), "MATROSKA"),  # also WebM
        (head.startswith(b"OggS"), "OGG"),
        (riff_type == b"AVI ", "AVI"),
        (head.startswith(b"FLV"), "FLV"),
        (head.startswith(b"\x00\x00\x01\xba") or (head[:1] == b"\x47" and head[188:189] == b"\x47"), "MPEG"),
    ]
    return next((name for matches, name in signatures if matches), None)


def _starts_with_frame_sync(head: bytes) -> bool:
    return len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0


def _register_heif() -> None:
    """Teach Pillow HEIC/HEIF (iPhone photos), once."""
    from pillow_heif import register_heif_opener

    register_heif_opener()


def _pillow_format(path: Path) -> str | None:
    """Pillow's name for formats without a signature of their own (TGA, ICO...), if any."""
    from PIL import Image

    _register_heif()

    try:
        with Image.open(path) as image:
            return image.format
    except Exception:  # Pillow raises assorted types for "not an image"; that is the answer
        return None


def _has_video_frames(path: Path) -> bool:
    import cv2

    # CAP_FFMPEG explicitly: the default backend list would read a lone image as a video.
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        return capture.isOpened() and capture.read()[0]
    finally:
        capture.release()


def _unrecognised_message(path: Path) -> str:
    suffix = path.suffix.lower()
    named_like = (
        "an image" if suffix in IMAGE_EXTENSIONS
        else "audio" if suffix in AUDIO_EXTENSIONS
        else "a video" if suffix in VIDEO_EXTENSIONS
        else None
    )
    if named_like:
        return (
            f"'{path.name}' is named like {named_like}, but its content is not a format the app "
            "recognises; the file may be damaged or renamed. Please upload the original file."
        )
    return f"'{path.name}' is not a supported file type. Supported: {SUPPORTED_TYPES}."


# ---------------------------------------------------------------------------------------
# Images


def _load_image(path: Path, limits: MediaLimits) -> MediaItem:
    from PIL import Image, ImageOps

    _register_heif()
    try:
        with Image.open(path) as opened:
            _check_image(path, opened, limits)
            format_ = opened.format
            opened.seek(0)  # animated GIF / WebP, multi-picture JPEG: the first picture
            opened.load()
            image = opened.copy()  # detached from the file, which closes here
        # One full-size copy in all: each more costs a large photo a copy of all its pixels.
        ImageOps.exif_transpose(image, in_place=True)
        image = _to_rgb(image)
    except Image.DecompressionBombError:  # Pillow's own guard, past twice its MAX_IMAGE_PIXELS
        raise MediaError(f"'{path.name}' has too many pixels to open safely. Please upload a smaller image.") from None
    item = MediaItem(kind="image", path=str(path), name=path.name, data=image)
    if format_ == "HEIF":  # only Safari shows HEIC: the chat shows a JPEG of it
        shown = io.BytesIO()
        image.save(shown, format="JPEG", quality=90)
        item.shown_path = str(_sibling(path, ".jpg", shown.getvalue()))
    return item


def _check_image(path: Path, image: Image.Image, limits: MediaLimits) -> None:
    if image.format not in PILLOW_IMAGE_FORMATS:
        raise MediaError(
            f"'{path.name}' is a {image.format} image, which is not supported. "
            "Please convert it to PNG, JPEG, WebP, GIF or BMP."
        )
    width, height = image.size
    if width * height > limits.max_image_pixels:
        raise MediaError(
            f"'{path.name}' is {width}×{height} pixels ({width * height / 1e6:.0f} MP); the limit is "
            f"{limits.max_image_pixels / 1e6:g} MP. Please upload a smaller image."
        )


def _to_rgb(image: Image.Image) -> Image.Image:
    """RGB, with any transparency composited on white (the model has no alpha channel)."""
    from PIL import Image

    has_alpha = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
    if not has_alpha:
        return image if image.mode == "RGB" else image.convert("RGB")
    rgba = image.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


# ---------------------------------------------------------------------------------------
# Audio


def _load_audio(path: Path, limits: MediaLimits) -> MediaItem:
    with path.open("rb") as file:
        file_format = _sniff_format(file.read(_HEAD_BYTES))
    # libsndfile (through librosa) reads WAV, FLAC, OGG and MP3; PyAV's bundled FFmpeg the
    # rest (AAC in M4A, Opus in WebM), and whatever libsndfile cannot.
    if file_format in ("WAV", "FLAC", "MP3", "OGG") or file_format is None:
        try:
            samples, seconds = _decode_librosa(path, limits.max_audio_seconds)
        except Exception:  # noqa: BLE001 - libsndfile refuses some codecs FFmpeg reads
            samples, seconds = _decode_av(path, limits.max_audio_seconds)
    else:
        samples, seconds = _decode_av(path, limits.max_audio_seconds)
    notes = []
    missing = _wav_shortfall(path) if file_format == "WAV" else None
    if missing:
        stated, held = missing
        notes.append(f"'{path.name}' is incomplete: its header says {_clock(stated)} but the file holds "
                     f"{_clock(held)}; Gemma 4 hears the {_clock(held)} that are there.")
        seconds = held
    if seconds > limits.max_audio_seconds:
        if limits.audio_over_limit == "refuse":
            raise MediaError(
                f"'{path.name}' is {seconds:.1f} s of audio; Gemma 4 hears at most "
                f"{limits.max_audio_seconds:g} s. Please trim it and upload again."
            )
        notes.append(f"'{path.name}' is {_clock(seconds)} long; Gemma 4 hears at most {limits.max_audio_seconds:g} s, "
                     f"so only the first {_clock(limits.max_audio_seconds)} were kept and the remaining "
                     f"{_clock(seconds - limits.max_audio_seconds)} were cut.")
    if samples.size == 0:
        raise MediaError(f"'{path.name}' contains no audio. Please record or upload it again.")
    if not np.any(samples):
        # Exact digital silence is what a muted or blocked microphone records.
        raise MediaError(f"'{path.name}' is completely silent. Please check the microphone and record again.")
    return MediaItem(kind="audio", path=str(path), name=path.name, data=samples.astype(np.float32, copy=False),
                     warning=" ".join(notes) or None, original_seconds=seconds)


def _clock(seconds: float) -> str:
    """7.25 → '7.2 s'; 95 → '1:35'; 7200 → '2:00:00'."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _decode_librosa(path: Path, max_seconds: float) -> tuple[np.ndarray, float]:
    import librosa

    seconds = librosa.get_duration(path=str(path))
    samples, _ = librosa.load(str(path), sr=AUDIO_SAMPLING_RATE, mono=True,
                              duration=max_seconds if seconds > max_seconds else None)
    return samples, seconds


def _decode_av(path: Path, max_seconds: float) -> tuple[np.ndarray, float]:
    """Decode the first audio stream with PyAV to 16 kHz mono float32, at most `max_seconds`;
    also the whole stream's length (from the container, else by reading packet times)."""
    import av

    with av.open(str(path)) as container:
        stream = next((s for s in container.streams if s.type == "audio"), None)
        if stream is None:
            raise MediaError(f"'{path.name}' has no audio track. Please upload a recording.")
        resampler = av.AudioResampler(format="flt", layout="mono", rate=AUDIO_SAMPLING_RATE)
        limit = int(max_seconds * AUDIO_SAMPLING_RATE)
        chunks, kept, last_time = [], 0, 0.0
        for frame in container.decode(stream):
            if frame.time is not None:
                last_time = max(last_time, frame.time + frame.samples / frame.sample_rate)
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                kept += chunks[-1].size
            if kept >= limit:
                break
        else:
            chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
        seconds = _stream_seconds(container, stream) or last_time
        if kept >= limit and not _stream_seconds(container, stream):
            # A live recording states no length: the packets' times tell it without decoding.
            for packet in container.demux(stream):
                if packet.pts is not None and packet.duration is not None:
                    seconds = max(seconds, float((packet.pts + packet.duration) * stream.time_base))
    samples = np.concatenate(chunks)[:limit] if chunks else np.zeros(0, np.float32)
    return samples, max(seconds, samples.size / AUDIO_SAMPLING_RATE)


def _stream_seconds(container, stream) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    return container.duration / 1_000_000 if container.duration else None


def _wav_shortfall(path: Path) -> tuple[float, float] | None:
    """(stated, held) seconds when a WAV's header promises more sound than the file holds
    (an interrupted upload or recording); None when it is whole. Reads the RIFF chunk list."""
    size = path.stat().st_size
    with path.open("rb") as file:
        file.seek(12)  # past "RIFF", the size and "WAVE"
        byte_rate = None
        while file.tell() + 8 <= size:
            chunk = file.read(8)
            chunk_id, length = chunk[:4], int.from_bytes(chunk[4:], "little")
            if chunk_id == b"fmt " and length >= 16:
                fmt = file.read(length + (length & 1))
                byte_rate = int.from_bytes(fmt[8:12], "little")
                continue
            if chunk_id == b"data":
                held = size - file.tell()
                # 0 and 0xFFFFFFFF are what recorders write while the length is unknown.
                if not byte_rate or length in (0, 0xFFFFFFFF) or held >= length - 1:
                    return None
                return length / byte_rate, held / byte_rate
            file.seek(length + (length & 1), os.SEEK_CUR)
    return None


# ---------------------------------------------------------------------------------------
# Video


def _load_video(path: Path, limits: MediaLimits) -> MediaItem:
    import cv2
    from transformers.video_utils import VideoMetadata

    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        if not capture.isOpened():
            raise MediaError(_undecodable_message(path, "video"))
        fps = capture.get(cv2.CAP_PROP_FPS)
        if not 0 < fps <= 1000:
            raise MediaError(
                f"'{path.name}' does not state a usable frame rate. Please re-encode it as MP4 and upload again."
            )
        # Refused before decoding where the header states the size; else by the first frame.
        _check_frame_size(path, int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
                          int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)), limits)
        max_frames = int(limits.max_video_seconds * fps)
        stated_frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        # Live recordings (the browser's MediaRecorder WebM) state no frame count and have no
        # index to seek with: count their frames by decoding, and later read them in order.
        can_seek = stated_frames > 0
        if can_seek:
            total_frames = stated_frames
        else:
            total_frames = _count_frames(path, stop_after=min(max_frames, limits.max_stream_frames) + 1)
            if total_frames > limits.max_stream_frames:
                raise MediaError(
                    f"'{path.name}' has more than {limits.max_stream_frames} frames, the most read from a video "
                    "that does not state its length. Please trim it or save it as MP4 and upload again."
                )
        if total_frames > max_frames:
            raise MediaError(
                f"'{path.name}' is {total_frames / fps:.1f} s long; the limit is {limits.max_video_seconds:g} s. "
                "Please trim it and upload again."
            )
        frames, indices = _read_frames(capture, _evenly_spaced(total_frames, limits.max_video_frames), can_seek,
                                       lambda frame: _check_frame_size(path, frame.shape[1], frame.shape[0], limits))
    finally:
        capture.release()
    if not frames:
        raise MediaError(_undecodable_message(path, "video"))
    video = np.stack(frames)
    metadata = VideoMetadata(
        total_num_frames=total_frames,
        fps=float(fps),
        width=int(video.shape[2]),  # from the frames: OpenCV applies the rotation flag
        height=int(video.shape[1]),
        duration=total_frames / fps,
        video_backend="opencv",
        frames_indices=indices,
    )
    item = MediaItem(kind="video", path=str(path), name=path.name, data=video, video_metadata=metadata)
    codec = _video_codec(path)
    if codec not in BROWSER_VIDEO_CODECS:
        # A blank player helps no one: the chat shows the middle one of the frames the model gets.
        from PIL import Image

        poster = io.BytesIO()
        Image.fromarray(video[len(video) // 2]).save(poster, format="JPEG", quality=85)
        item.shown_path = str(_sibling(path, ".poster.jpg", poster.getvalue()))
        item.warning = (f"'{path.name}' is {codec or 'an unknown'} video, which browsers cannot play: the chat shows "
                        f"one of its frames; Gemma 4 gets {len(indices)} frames of it.")
    return item


def _check_frame_size(path: Path, width: int, height: int, limits: MediaLimits) -> None:
    if width * height > limits.max_video_frame_pixels:
        raise MediaError(
            f"'{path.name}' is {width}×{height} pixels per frame ({width * height / 1e6:.1f} MP); the limit is "
            f"{limits.max_video_frame_pixels / 1e6:g} MP per frame. Please upload a smaller video (e.g. 1080p)."
        )


def _video_codec(path: Path) -> str | None:
    """FFmpeg's name for the first video stream's codec ('h264', 'mpeg4', 'hevc'...)."""
    import av

    try:
        with av.open(str(path)) as container:
            return container.streams.video[0].codec_context.name if container.streams.video else None
    except Exception:  # noqa: BLE001 - OpenCV decoded it; the codec name is only for display
        return None


def _evenly_spaced(total_frames: int, count: int) -> list[int]:
    """`count` frame indices spread over the whole video, first and last frame included."""
    if total_frames <= count:
        return list(range(total_frames))
    return np.linspace(0, total_frames - 1, count).round().astype(int).tolist()


def _count_frames(path: Path, stop_after: int) -> int:
    import cv2

    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        count = 0
        while count < stop_after and capture.grab():
            count += 1
        return count
    finally:
        capture.release()


def _read_frames(capture: Any, indices: list[int], can_seek: bool,
                 check: Callable[[np.ndarray], None] | None = None) -> tuple[list[np.ndarray], list[int]]:
    """Decode the frames at ascending `indices`: RGB frames and the indices that decoded.
    `check(frame)`, if given, sees each decoded frame first (and may raise to stop).

    A frame is reached by seeking (OpenCV jumps to the keyframe before it and decodes
    forward) or by grab()-ing through the gap. Seeking wins when keyframes are frequent, and
    loses badly when they are sparse (x264's default is one per 250 frames): on a 60 s 720p
    H.264 clip seek-only took 1.3 s with a keyframe per 30 frames but 4.8 s with one per
    250, where grab-only took 2.0 s for both. Only the file knows, so time one of each and
    then take, for every gap, whichever costs less (1.2 s and 1.9 s on those clips). Both
    land on identical frames.
    """
    import cv2

    seconds_per_grab: float | None = None
    seconds_per_seek: float | None = None
    position = 0  # the index of the frame the next read() returns
    frames, decoded = [], []
    for index in indices:
        gap = index - position
        if gap > 0:
            started = time.perf_counter()
            if can_seek and _should_seek(gap, seconds_per_grab, seconds_per_seek):
                capture.set(cv2.CAP_PROP_POS_FRAMES, index)
                seconds_per_seek = time.perf_counter() - started
            else:
                if not all(capture.grab() for _ in range(gap)):
                    break  # the container promised more frames than it holds
                seconds_per_grab = (time.perf_counter() - started) / gap
        ok, frame = capture.read()
        position = index + 1
        if ok:
            if check is not None:
                check(frame)
            frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
            decoded.append(index)
    return frames, decoded


def _should_seek(gap: int, seconds_per_grab: float | None, seconds_per_seek: float | None) -> bool:
    if seconds_per_grab is None:
        return False  # measure grabbing first
    if seconds_per_seek is None:
        return True  # then one seek
    return seconds_per_seek < gap * seconds_per_grab
