"""Memory: the server's resident memory after 50 turns with an image each, against after 5.

A fresh app process per run, driven through gradio_client like a user who attaches a new
photo to every message. Between the two readings the conversation grows by the decoded
pixels of 45 images, which it must keep to build later prompts (Pillow stores RGB as 4
bytes a pixel); anything beyond that the app holds on to, it should not. Then the user
starts a new conversation of 5 turns: memory should fall back to the first reading.

Garbage is collected and freed memory handed back to the system before each reading
(app_server.release_free_memory), and the server runs with a fixed glibc mmap threshold.
Without it glibc raises the threshold after large buffers are freed, and keeps the next
ones on its heap: every turn re-processes every image of the conversation (transformers'
`generate` takes all pixels every turn, as a bare transformers loop would), and ~50 MB of
that transient peak stays resident as a high-water mark, dropped and regained at random
(measured in-process: +52 MB, then +46 MB after dropping two 40-turn conversations; +1 and
+1 MB with the fixed threshold). That is the allocator, not the app holding memory.
"""

from __future__ import annotations

from pathlib import Path

from . import media_files
from .context import Context
from .harness import Figure, Section, Target

IMAGE_SIZE = (1024, 768)
FIXED_MMAP_THRESHOLD = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}  # glibc's default, but not raised
PILLOW_RGB_BYTES_PER_PIXEL = 4  # Pillow pads RGB pixels to 32 bits
MB = 2**20


def distinct_photos(folder: Path, count: int) -> list[Path]:
    """Different pictures: identical files would be decoded once and shared by every turn."""
    folder.mkdir(exist_ok=True)
    width, height = IMAGE_SIZE
    return [media_files.photo_jpeg(folder / f"turn-{n}.jpg", width, height, seed=100 + n) for n in range(count)]


def one_run(ctx: Context, photos: list[Path]) -> dict[str, float]:
    """Growth of resident memory (MB) from turn `early` to `late`, the conversation's own
    media growth, and what stays after a new conversation of `early` turns."""
    from gradio_client import Client, handle_file

    early, late = ctx.sizes.memory_turns
    app = ctx.fresh_app(FIXED_MMAP_THRESHOLD)
    client = Client(app.url, verbose=False, download_files=False)

    def send(turn: int, photo: Path) -> None:
        client.predict({"text": f"Turn {turn}: what is new here?", "files": [handle_file(str(photo))]},
                       system_prompt="", thinking=False, max_new_tokens=8, temperature=0.0, top_p=0.95, top_k=64,
                       image_budget=70, enabled_tools=[], repetition_guard=0, api_name="/chat")

    readings = {}
    for turn, photo in enumerate(photos[:late], start=1):
        send(turn, photo)
        if turn in (early, late):
            readings[turn] = app.resident_bytes()
    client.predict(api_name="/new_conversation")
    for turn, photo in enumerate(photos[:early], start=1):
        send(turn, photo)
    again = app.resident_bytes()
    width, height = IMAGE_SIZE
    media = (late - early) * width * height * PILLOW_RGB_BYTES_PER_PIXEL
    return {"growth": (readings[late] - readings[early]) / MB, "media": media / MB,
            "after new conversation": (again - readings[early]) / MB}


def memory_growth(ctx: Context) -> Section:
    runs = 1 if ctx.quick else 2  # one run is ~2 minutes, and readings agree within 1-2 MB
    photos = distinct_photos(ctx.workdir / "turns", ctx.sizes.memory_turns[1])
    results = [one_run(ctx, photos) for _ in range(runs)]
    early, late = ctx.sizes.memory_turns
    media = results[0]["media"]
    return Section("memory", [
        Figure(f"resident memory growth, turn {early} → {late}", [r["growth"] for r in results], "MB", digits=0,
               note=f"a new {IMAGE_SIZE[0]}×{IMAGE_SIZE[1]} photo every turn; server RSS after gc + malloc_trim"),
        Figure(f"  beyond the conversation's own media ({media:.0f} MB decoded)",
               [r["growth"] - r["media"] for r in results], "MB", Target("<", 16), digits=0),
        Figure(f"  left after a new conversation of {early} turns", [r["after new conversation"] for r in results],
               "MB", Target("<", 16), digits=0,
               note="what a leak would keep: it should fall back to the first reading"),
    ])
