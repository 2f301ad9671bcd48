"""gemma4_ui.media.decoding on real files written in tmp_path: images, audio and video, good and bad."""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import soundfile
from PIL import Image

from gemma4_ui.config import MediaLimits
from gemma4_ui.media import decoding as media
from gemma4_ui.media.decoding import MediaError, detect_kind, load_media

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "assets" / "examples"
RED, BLUE = (255, 0, 0), (0, 0, 255)
RATE = media.AUDIO_SAMPLING_RATE


# ---------------------------------------------------------------------------------------
# Helpers that write real files


def load_files(paths, limits: MediaLimits = MediaLimits()) -> list:
    """Load every file of one message; the first bad file raises a MediaError naming it."""
    paths = list(paths)
    if len(paths) > limits.max_files_per_message:
        raise MediaError(
            f"{len(paths)} files attached; the limit is {limits.max_files_per_message} per message. "
            "Please remove some and send again."
        )
    return [load_media(path, limits) for path in paths]


def write_image(path: Path, **save_args) -> Path:
    Image.new("RGB", (64, 48), RED).save(path, **save_args)
    return path


def write_tone(path: Path, seconds: float, rate: int = RATE, stereo: bool = False, **write_args) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    tone = 0.3 * np.sin(2 * np.pi * 440 * t)
    # Stereo: the tone on the left, silence on the right, so the mono mix is exactly half the tone.
    samples = np.stack([tone, np.zeros_like(tone)], axis=1) if stereo else tone
    soundfile.write(path, samples.astype(np.float32), rate, **write_args)
    return path


INDEX_BITS = 10  # frames carry their own index as 10 black/white blocks


def write_indexed_video(path: Path, frames: int, fps: float, fourcc: str = "mp4v") -> Path:
    """A clip whose every frame shows its index in binary, so a decoded frame says where it came from."""
    block = 16
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (block * INDEX_BITS, 32))
    assert writer.isOpened()
    for index in range(frames):
        frame = np.zeros((32, block * INDEX_BITS, 3), np.uint8)
        for bit in range(INDEX_BITS):
            if index >> bit & 1:
                frame[:, bit * block : (bit + 1) * block] = 255
        writer.write(frame)
    writer.release()
    return path


def index_shown(frame: np.ndarray) -> int:
    block = frame.shape[1] // INDEX_BITS
    return sum(1 << bit for bit in range(INDEX_BITS) if frame[:, bit * block : (bit + 1) * block].mean() > 128)


def write_red_video(path: Path, frames: int, fps: float) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (160, 120))
    for _ in range(frames):
        writer.write(np.full((120, 160, 3), (0, 0, 255), np.uint8))  # OpenCV writes BGR
    writer.release()
    return path


def assert_rgb_close(pixel, expected, tolerance=12):
    assert all(abs(int(a) - b) <= tolerance for a, b in zip(pixel, expected)), (pixel, expected)


# ---------------------------------------------------------------------------------------
# Images


@pytest.mark.parametrize(
    "name, save_args",
    [
        ("a.png", {}),
        ("a.jpg", {"quality": 95}),
        ("a.webp", {"lossless": True}),
        ("a.bmp", {}),
        ("a.gif", {}),
    ],
)
def test_each_image_format_loads_as_rgb(tmp_path, name, save_args):
    item = load_media(write_image(tmp_path / name, **save_args))
    assert (item.kind, item.name, item.path) == ("image", name, str(tmp_path / name))
    assert item.data.mode == "RGB" and item.data.size == (64, 48)
    assert_rgb_close(item.data.getpixel((32, 24)), RED)
    assert item.describe() == {"type": "image", "name": name, "width": 64, "height": 48}


def test_exif_orientation_is_applied(tmp_path):
    # Stored sideways: red on the left, blue on the right; orientation 6 says "turn 90° clockwise".
    stored = Image.new("RGB", (200, 100), RED)
    stored.paste(BLUE, (100, 0, 200, 100))
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(tmp_path / "phone.jpg", exif=exif, quality=95)

    image = load_media(tmp_path / "phone.jpg").data
    assert image.size == (100, 200)
    assert_rgb_close(image.getpixel((50, 50)), RED)  # the left edge is now on top
    assert_rgb_close(image.getpixel((50, 150)), BLUE)


def test_transparency_is_composited_on_white(tmp_path):
    image = Image.new("RGBA", (40, 20), (0, 0, 0, 0))
    image.paste((255, 0, 0, 128), (20, 0, 40, 20))
    image.save(tmp_path / "logo.png")

    loaded = load_media(tmp_path / "logo.png").data
    assert loaded.mode == "RGB"
    assert loaded.getpixel((5, 5)) == (255, 255, 255)
    assert_rgb_close(loaded.getpixel((30, 5)), (255, 127, 127), tolerance=2)


def test_animated_gif_gives_its_first_frame(tmp_path):
    frames = [Image.new("RGB", (32, 32), colour) for colour in (RED, BLUE)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert_rgb_close(load_media(tmp_path / "anim.gif").data.getpixel((16, 16)), RED)


def test_multi_picture_jpeg_gives_its_first_picture(tmp_path):
    # Cameras write MPO: a JPEG whose extra pictures follow the first; Pillow names it "MPO".
    first, second = Image.new("RGB", (32, 32), RED), Image.new("RGB", (32, 32), BLUE)
    first.save(tmp_path / "camera.jpg", format="MPO", save_all=True, append_images=[second])
    assert Image.open(tmp_path / "camera.jpg").format == "MPO"
    assert_rgb_close(load_media(tmp_path / "camera.jpg").data.getpixel((16, 16)), RED)


def test_content_decides_not_the_extension(tmp_path):
    # A JPEG saved under a .png name is still a good image.
    path = tmp_path / "really_a_jpeg.png"
    write_image(path, format="JPEG")
    assert detect_kind(path) == "image"
    assert load_media(path).data.size == (64, 48)


def test_tiff_is_refused_with_advice(tmp_path):
    with pytest.raises(MediaError, match=r"'scan.tiff' is a TIFF file.*convert"):
        load_media(write_image(tmp_path / "scan.tiff"))


def test_too_many_pixels_is_refused(tmp_path):
    with pytest.raises(MediaError, match=r"'big.png' is 64×48 pixels.*limit"):
        load_media(write_image(tmp_path / "big.png"), MediaLimits(max_image_pixels=1000))


def test_decompression_bomb_is_refused_before_decoding(tmp_path):
    # A PNG that is all header: 30000×30000 pixels declared, none present. Only the header is read.
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0))
    (tmp_path / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", b"") + chunk(b"IEND", b""))
    with pytest.raises(MediaError, match="'bomb.png' .*pixels"):
        load_media(tmp_path / "bomb.png")


@pytest.mark.parametrize("name", ["photo.png", "photo.jpg"])
def test_truncated_image_is_refused(tmp_path, name):
    noisy = Image.fromarray(np.random.default_rng(0).integers(0, 255, (128, 128, 3), dtype=np.uint8))
    noisy.save(tmp_path / name)
    data = (tmp_path / name).read_bytes()
    (tmp_path / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(MediaError, match=rf"'{name}' could not be decoded as an image"):
        load_media(tmp_path / name)


# ---------------------------------------------------------------------------------------
# Files that are not media, or not acceptable


def test_text_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello, this is not media\n")
    with pytest.raises(MediaError, match=r"'notes.txt' is not a supported file type. Supported: images"):
        load_media(tmp_path / "notes.txt")


def test_text_renamed_to_png_is_refused(tmp_path):
    (tmp_path / "fake.png").write_text("definitely not a picture\n" * 10)
    with pytest.raises(MediaError, match=r"'fake.png' is named like an image.*damaged or renamed"):
        load_media(tmp_path / "fake.png")


def test_zero_byte_file_is_refused(tmp_path):
    (tmp_path / "empty.jpg").touch()
    with pytest.raises(MediaError, match=r"'empty.jpg' is empty \(0 bytes\)"):
        load_media(tmp_path / "empty.jpg")


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(MediaError, match="'gone.png' was not found"):
        load_media(tmp_path / "gone.png")


def test_size_limit_is_checked_before_decoding(tmp_path):
    # Garbage content: a decoder would complain about the content, the size check comes first.
    (tmp_path / "huge.mp4").write_bytes(os.urandom(200_000))
    with pytest.raises(MediaError, match=r"'huge.mp4' is 0.2 MB; the limit is 0.1 MB per file"):
        load_media(tmp_path / "huge.mp4", MediaLimits(max_file_mb=0.1))


def test_file_count_limit(tmp_path):
    paths = [write_image(tmp_path / f"{i}.png") for i in range(3)]
    assert len(load_files(paths, MediaLimits(max_files_per_message=3))) == 3
    with pytest.raises(MediaError, match="3 files attached; the limit is 2 per message"):
        load_files(paths, MediaLimits(max_files_per_message=2))


def test_load_files_names_the_first_bad_file(tmp_path):
    good = write_image(tmp_path / "good.png")
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    with pytest.raises(MediaError, match="'bad.png'"):
        load_files([good, tmp_path / "bad.png", tmp_path / "never_reached.png"])


# ---------------------------------------------------------------------------------------
# Audio


@pytest.mark.parametrize("seconds", [0.5, 10.0])
def test_audio_within_limit_is_kept_whole(tmp_path, seconds):
    item = load_media(write_tone(tmp_path / "voice.wav", seconds))
    assert item.kind == "audio" and item.warning is None
    assert item.data.dtype == np.float32 and item.data.shape == (int(seconds * RATE),)
    assert item.describe() == {"type": "audio", "name": "voice.wav", "seconds": seconds, "sampling_rate": RATE}


def test_long_audio_is_truncated_with_a_warning(tmp_path):
    item = load_media(write_tone(tmp_path / "lecture.wav", 45.0))
    assert item.data.shape == (30 * RATE,)
    assert item.warning == ("'lecture.wav' is 45.0 s long; Gemma 4 hears at most 30 s, so only the first 30.0 s "
                            "were kept and the remaining 15.0 s were cut.")
    assert item.describe()["warning"] == item.warning


def test_long_audio_can_be_refused(tmp_path):
    with pytest.raises(MediaError, match=r"'lecture.wav' is 45.0 s of audio; Gemma 4 hears at most 30 s"):
        load_media(write_tone(tmp_path / "lecture.wav", 45.0), MediaLimits(audio_over_limit="refuse"))


def test_stereo_44k_becomes_mono_16k(tmp_path):
    item = load_media(write_tone(tmp_path / "stereo.wav", 2.0, rate=44_100, stereo=True))
    assert item.data.ndim == 1 and item.data.dtype == np.float32
    assert item.data.shape == (2 * RATE,)
    assert abs(np.abs(item.data).max() - 0.15) < 0.01  # the channels averaged: a 0.3 tone and silence


@pytest.mark.parametrize(
    "name, write_args",
    [("a.flac", {}), ("a.ogg", {"format": "OGG", "subtype": "VORBIS"}), ("a.mp3", {"format": "MP3"})],
)
def test_compressed_audio_formats(tmp_path, name, write_args):
    item = load_media(write_tone(tmp_path / name, 1.0, **write_args))
    assert item.kind == "audio"
    assert abs(len(item.data) / RATE - 1.0) < 0.1


def test_empty_audio_is_refused(tmp_path):
    soundfile.write(tmp_path / "nothing.wav", np.zeros(0, np.float32), RATE)
    with pytest.raises(MediaError, match="'nothing.wav' contains no audio"):
        load_media(tmp_path / "nothing.wav")


def test_digital_silence_is_refused(tmp_path):
    soundfile.write(tmp_path / "muted.wav", np.zeros(RATE, np.float32), RATE)
    with pytest.raises(MediaError, match="'muted.wav' is completely silent"):
        load_media(tmp_path / "muted.wav")


def test_undecodable_audio_says_so(tmp_path):
    # An M4A header over garbage: recognised as audio, then no decoder can read it.
    (tmp_path / "memo.m4a").write_bytes(b"\x00\x00\x00\x1cftypM4A " + os.urandom(4000))
    with pytest.raises(MediaError, match="'memo.m4a' could not be decoded"):
        load_media(tmp_path / "memo.m4a")


# ---------------------------------------------------------------------------------------
# Video


def test_video_is_sampled_evenly_with_real_metadata(tmp_path):
    item = load_media(write_red_video(tmp_path / "clip.mp4", frames=50, fps=10))
    metadata = item.video_metadata
    expected = np.linspace(0, 49, 32).round().astype(int).tolist()
    assert (metadata.total_num_frames, metadata.fps, metadata.duration) == (50, 10.0, 5.0)
    assert (metadata.width, metadata.height, metadata.video_backend) == (160, 120, "opencv")
    assert metadata.frames_indices == expected
    assert item.data.shape == (32, 120, 160, 3) and item.data.dtype == np.uint8
    assert_rgb_close(item.data[0, 60, 80], RED)  # BGR from OpenCV turned into RGB
    described = item.describe()
    assert "browsers cannot play" in described.pop("warning")  # OpenCV writes MPEG-4 Part 2
    assert described == {
        "type": "video", "name": "clip.mp4", "seconds": 5.0, "fps": 10.0, "frames": 32, "width": 160, "height": 120
    }


def test_short_video_keeps_every_frame(tmp_path):
    item = load_media(write_red_video(tmp_path / "blink.mp4", frames=10, fps=24))
    assert item.video_metadata.frames_indices == list(range(10))
    assert len(item.data) == 10


@pytest.mark.parametrize("seek", [True, False], ids=["seek", "grab"])
def test_frames_come_from_the_indices_claimed(tmp_path, monkeypatch, seek):
    # Pin the strategy the reader would pick by timing, so both ways of reaching a frame are checked.
    monkeypatch.setattr(media, "_should_seek", lambda *timings: seek)
    item = load_media(write_indexed_video(tmp_path / "counter.mp4", frames=600, fps=30))
    assert len(item.video_metadata.frames_indices) == 32
    assert [index_shown(frame) for frame in item.data] == item.video_metadata.frames_indices


def test_webm_video_is_recognised_as_video(tmp_path):
    path = write_indexed_video(tmp_path / "screen.webm", frames=20, fps=10, fourcc="VP80")
    assert detect_kind(path) == "video"
    assert [index_shown(frame) for frame in load_media(path).data] == list(range(20))


def test_timestamps_reach_the_prompt(tmp_path, processor):  # `processor`: the tiny Gemma 4's, from conftest
    # 20 s at 5 fps: frames 0, 25, 50, 74, 99 are at 0, 5, 10, 14.8, 19.8 s. Without the
    # metadata the processor would assume 24 fps and print 00:00 ... 00:04.
    item = load_media(write_red_video(tmp_path / "walk.mp4", frames=100, fps=5), MediaLimits(max_video_frames=5))
    assert item.video_metadata.frames_indices == [0, 25, 50, 74, 99]
    messages = [{"role": "user", "content": [{"type": "video", "video": item.data}, {"type": "text", "text": "What?"}]}]
    inputs = processor.apply_chat_template(
        messages,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        processor_kwargs={"video_metadata": [item.video_metadata], "do_sample_frames": False},
    )
    prompt = processor.decode(inputs["input_ids"][0])
    assert re.findall(r"(\d\d:\d\d) <\|image>", prompt) == ["00:00", "00:05", "00:10", "00:14", "00:19"]
    assert inputs["pixel_values_videos"].shape[0] == 5  # one entry per sampled frame


def test_too_long_video_is_refused(tmp_path):
    with pytest.raises(MediaError, match=r"'long.mp4' is 5.0 s long; the limit is 2 s"):
        load_media(write_red_video(tmp_path / "long.mp4", frames=50, fps=10), MediaLimits(max_video_seconds=2))


def test_a_video_over_the_frame_pixel_limit_is_refused_before_decoding(tmp_path):
    path = write_red_video(tmp_path / "wide.mp4", frames=10, fps=10)  # 160×120
    with pytest.raises(MediaError, match=r"'wide.mp4' is 160×120 pixels per frame.*limit is 0.01 MP per frame"):
        load_media(path, MediaLimits(max_video_frame_pixels=10_000))


def write_live_webm(path: Path, frames: int, fps: int) -> Path:
    """A WebM written as a live stream (as a browser records): no frame count, no index."""
    import av

    with av.open(str(path), "w", format="webm", options={"live": "1"}) as out:
        stream = out.add_stream("libvpx", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 32, "yuv420p"
        for _ in range(frames):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((32, 64, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode(None))
    return path


def test_a_stream_is_read_only_up_to_the_frame_cap(tmp_path):
    path = write_live_webm(tmp_path / "live.webm", frames=60, fps=10)
    assert cv2.VideoCapture(str(path), cv2.CAP_FFMPEG).get(cv2.CAP_PROP_FRAME_COUNT) <= 0, "states no frame count"
    assert len(load_media(path, MediaLimits(max_stream_frames=60)).data) == 32
    with pytest.raises(MediaError, match=r"'live.webm' has more than 40 frames, the most read from a video"):
        load_media(path, MediaLimits(max_stream_frames=40))


def test_a_conversation_holds_a_bounded_number_and_size_of_media(tmp_path):
    image = load_media(write_image(tmp_path / "a.png"))  # 64×48 RGB: 9216 bytes decoded
    assert media.decoded_bytes(image) == 64 * 48 * 3
    media.check_conversation_media([image] * 3, [image], MediaLimits(max_files_per_conversation=4))
    with pytest.raises(MediaError, match="at most 4 files; this one would hold 5"):
        media.check_conversation_media([image] * 4, [image], MediaLimits(max_files_per_conversation=4))
    with pytest.raises(MediaError, match="at most 0.02 MB once decoded"):
        media.check_conversation_media([image], [image, image], MediaLimits(max_conversation_media_mb=0.02))


def test_truncated_video_is_refused(tmp_path):
    path = write_red_video(tmp_path / "cut.mp4", frames=50, fps=10)
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(MediaError, match="'cut.mp4' could not be decoded as a video"):
        load_media(path)


def test_garbage_named_mp4_is_refused(tmp_path):
    # These bytes happen to open with an MPEG audio frame sync (ff e4): too weak a signature to
    # call them audio when the name says video.
    (tmp_path / "noise.mp4").write_bytes(np.random.default_rng(1).bytes(5000))
    with pytest.raises(MediaError, match="'noise.mp4' is named like a video"):
        load_media(tmp_path / "noise.mp4")


# ---------------------------------------------------------------------------------------
# The bundled examples


def test_example_media_load():
    paths = [EXAMPLES / name for name in ("shapes.png", "street.jpg", "speech.wav", "bouncing_ball.mp4")]
    items = {item.name: item for item in load_files(paths)}
    assert items["shapes.png"].data.size == (640, 480)
    assert items["street.jpg"].data.size == (480, 800)
    assert 2.0 <= items["speech.wav"].describe()["seconds"] <= 5.0
    assert items["bouncing_ball.mp4"].describe() == {
        "type": "video", "name": "bouncing_ball.mp4", "seconds": 4.0, "fps": 24.0, "frames": 32,
        "width": 480, "height": 270,
    }
    assert sum(path.stat().st_size for path in paths) < 1_000_000
    json.dumps([item.describe() for item in items.values()])  # the inspector needs plain JSON
