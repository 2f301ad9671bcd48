"""Hostile load: honest sessions chatting while a few visitors send the worst inputs the app
must survive, against the same honest sessions with no one else, side by side.

Two fresh app servers on the bundled model (bench/app_server.py), one per side, each with its
own temporary folders (TMPDIR, and GRADIO_TEMP_DIR inside it: uploads, Gradio's copies of
outputs, the app's export folders), so that each side's memory and disk are its own. A run
is one phase on each server, in turn (the order rotates from run to run), never both at once:

- honest: HONEST_SESSIONS users, each its own session (http_client.ChatClient over Gradio's
  documented HTTP API), all at once, each sending a message with a picture (an upload of
  assets/examples/shapes.png), then a text-only one; replies of REPLY_TOKENS tokens;
- hostile (the second server only): HOSTILE_VISITORS visitors, each its own session, cycling
  through ATTACKS, each at its own point of the cycle, until the honest users are done. The
  attacks go where the page's own requests go: the documented API (`/chat`, `/declare_tool`,
  `/export`) and, for what the page alone sends (loading a conversation file), Gradio's
  queue as the page calls it (`queue/join` with the event's index).

Figures, per run: the honest users' 95th percentile of time to first token (request, upload
included, to the first update showing reply text) and their failed turns; the peak resident
memory of the server's processes (the server and its generation process, sampled while the
phase runs) and the growth of its temporary folders over the phase. Hostile requests are
checked too: each must be refused where the app's limits say so, and get an answer.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .app_server import AppProcess
from .context import Context
from .harness import Figure, Section, Target, paired
from .http_client import CHAT_DEFAULTS, ChatClient, reply_text

HONEST_SESSIONS = 32
HOSTILE_VISITORS = 4
REPLY_TOKENS = 16
HONEST_TURNS = ("What is in this picture?", "And in one word?")  # the first with the picture
EXAMPLE_IMAGE = Path(__file__).resolve().parent.parent / "assets" / "examples" / "shapes.png"
CONTEXT = 131_072  # the bundled model's context (its config's max_position_embeddings)
LONG = 100_000  # characters of the pathological runs (tests/test_hostile_input.py's size)
MB = 2**20
MEMORY_SAMPLE_SECONDS = 0.2


# -- the hostile inputs -----------------------------------------------------------------------

def png_header_only_bomb(path: Path, width: int, height: int) -> Path:
    """A valid greyscale PNG of width × height pixels, all zero: a few hundred KB on disk that
    decode to width × height bytes (more once made RGB)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    compressor, row = zlib.compressobj(9), b"\0" * (1 + width)  # filter byte, then the row
    idat = b"".join(compressor.compress(row * 256) for _ in range(height // 256))
    idat += compressor.compress(row * (height % 256)) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path


def video_of_frames(path: Path, width: int, height: int, frames: int, fps: int = 4) -> Path:
    """An MP4 (mp4v) of still frames of width × height: small on disk, large once decoded."""
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    assert writer.isOpened(), "OpenCV's FFmpeg cannot write mp4v at this size"
    frame = np.full((height, width, 3), 90, np.uint8)
    try:
        for _ in range(frames):
            writer.write(frame)
    finally:
        writer.release()
    return path


def transcript_file(path: Path, media_per_turn: list[list[dict]]) -> Path:
    from gemma4_ui.core import transcript

    turns = [{"role": "user", "text": "Hello", "media": entries} for entries in media_per_turn]
    path.write_text(json.dumps({"format": transcript.FORMAT, "version": transcript.VERSION, "turns": turns}))
    return path


def long_runs_transcript(path: Path) -> Path:
    """A conversation file whose message is LONG backslashes and whose reply is `<code>` runs:
    loading it renders both (web/safe_markdown.py), and no model reads them."""
    from gemma4_ui.core import transcript

    turns = [{"role": "user", "text": "\\" * LONG, "media": []},
             {"role": "assistant", "content": "<code>" * (LONG // 6)}]
    path.write_text(json.dumps({"format": transcript.FORMAT, "version": transcript.VERSION, "turns": turns}))
    return path


def data_url(path: Path, mime: str) -> str:
    import base64

    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"


@dataclass(frozen=True)
class HostileFiles:
    bomb_png: Path  # over max_image_pixels, from a small file
    limit_png: Path  # exactly max_image_pixels
    huge_video: Path  # frames over max_video_frame_pixels (8K)
    limit_video: Path  # frames of exactly max_video_frame_pixels (4K)
    small_png: Path
    long_runs: Path  # a transcript: a message of backslashes, a reply of <code> runs
    too_many_media: Path  # a transcript: one message over max_files_per_message
    too_many_in_all: Path  # a transcript: a conversation over max_files_per_conversation
    bomb_transcript: Path  # a transcript holding the bomb PNG
    over_size: Path  # 1 MB over max_file_mb

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for name, p in vars(self).items() if name != "over_size")  # refused whole


def hostile_files(folder: Path) -> HostileFiles:
    from PIL import Image

    from gemma4_ui.config import MediaLimits

    limits = MediaLimits()
    folder.mkdir(parents=True, exist_ok=True)
    side = math.isqrt(limits.max_image_pixels)  # the largest square within the limit
    bomb = png_header_only_bomb(folder / "bomb.png", 16_000, 16_000)  # 256 MP
    limit_png = png_header_only_bomb(folder / "at-limit.png", side, side)
    small = folder / "small.png"
    Image.new("RGB", (32, 32), (200, 40, 40)).save(small)
    small_entry = {"name": "small.png", "data": data_url(small, "image/png")}
    bomb_entry = {"name": "bomb.png", "data": data_url(bomb, "image/png")}
    over_size = folder / "over-size.bin"
    with over_size.open("wb") as out:  # the app's MB are MiB (Gradio's max_file_size, in bytes)
        out.truncate(int((limits.max_file_mb + 1) * MB))
    return HostileFiles(
        bomb_png=bomb, limit_png=limit_png,
        huge_video=video_of_frames(folder / "8k.mp4", 7680, 4320, frames=4),
        limit_video=video_of_frames(folder / "4k.mp4", 3840, 2160, frames=8),
        small_png=small,
        long_runs=long_runs_transcript(folder / "long-runs.json"),
        too_many_media=transcript_file(folder / "too-many-media.json",
                                       [[small_entry] * (limits.max_files_per_message + 1)]),
        too_many_in_all=transcript_file(folder / "too-many-in-all.json",
                                        [[small_entry] * limits.max_files_per_message]
                                        * (limits.max_files_per_conversation // limits.max_files_per_message + 1)),
        bomb_transcript=transcript_file(folder / "bomb.json", [[bomb_entry]]),
        over_size=over_size,
    )


# -- a visitor: the documented API, and the page's own calls ----------------------------------

class Visitor:
    """One session on the app: its calls through the documented API (`/call/NAME`) and, for
    events the page alone sends, through the queue as the page sends them."""

    def __init__(self, url: str):
        self.base = url.rstrip("/") + "/gradio_api"
        self.session_hash = uuid.uuid4().hex[:11]
        self.http = httpx.Client(timeout=600)
        self.chat_client = ChatClient(url)

    def close(self) -> None:
        self.http.close()
        self.chat_client.close()

    def upload(self, path: Path) -> dict:
        return self.chat_client.upload(path)

    def call(self, api: str, data: list) -> str:
        """A documented endpoint; the whole event stream as text (its messages and any error)."""
        response = self.http.post(f"{self.base}/call/{api}", json={"data": data, "session_hash": self.session_hash})
        response.raise_for_status()
        with self.http.stream("GET", f"{self.base}/call/{api}/{response.json()['event_id']}") as stream:
            return "\n".join(stream.iter_lines())

    def page_call(self, fn_index: int, data: list) -> str:
        """An event as the page sends it (Gradio's queue, by the event's index); every message
        the queue sends back about it, as text."""
        response = self.http.post(f"{self.base}/queue/join", json={
            "data": data, "fn_index": fn_index, "session_hash": self.session_hash, "event_data": None,
            "trigger_id": None})
        response.raise_for_status()
        event_id = response.json()["event_id"]
        lines = []
        with self.http.stream("GET", f"{self.base}/queue/data", params={"session_hash": self.session_hash}) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line.removeprefix("data:"))
                if message.get("event_id") not in (event_id, None):
                    continue
                lines.append(line)
                if message.get("msg") in ("process_completed", "close_stream"):
                    break
        return "\n".join(lines)

    def chat(self, text: str, files: tuple[Path, ...] = (), max_new_tokens: int = REPLY_TOKENS) -> str:
        message = {"text": text, "files": [self.upload(p) for p in files]}
        options = {**CHAT_DEFAULTS, "max_new_tokens": max_new_tokens}
        from gemma4_ui.core.options import USER_OPTIONS

        return self.call("chat", [message, *(options[name] for name in USER_OPTIONS)])


def load_chat_index(url: str) -> int:
    """The index of the event that loads a conversation file (the upload button's upload)."""
    config = httpx.get(url.rstrip("/") + "/config", timeout=60).json()
    buttons = {c["id"] for c in config["components"] if c.get("type") == "uploadbutton"}
    (index,) = [n for n, dependency in enumerate(config["dependencies"])
                if any(target[0] in buttons and target[1] == "upload" for target in dependency["targets"])]
    return config["dependencies"][index].get("id", index)


@dataclass
class Attack:
    name: str
    run: Callable[[Visitor], str]  # the server's answer, as text
    expect: str = ""  # a refusal says this ("": the input is within the limits, and served)


def attacks(files: HostileFiles, load_index: int) -> list[Attack]:
    from gemma4_ui.config import MediaLimits
    from gemma4_ui.core.options import USER_OPTIONS

    limits = MediaLimits()
    options = [CHAT_DEFAULTS[name] for name in USER_OPTIONS]
    pattern_tool = json.dumps({"name": "lookup", "description": "Look a word up.", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}}})

    def load(path: Path) -> Callable[[Visitor], str]:
        return lambda v: v.page_call(load_index, [v.upload(path), None])

    def over_size(v: Visitor) -> str:
        with files.over_size.open("rb") as file:
            response = v.http.post(f"{v.base}/upload", files={"files": (files.over_size.name, file)})
        return f"HTTP {response.status_code} {response.text[:200]}"

    def exports(v: Visitor) -> str:
        answers = [v.chat("Hello")]  # something to export
        return "\n".join(answers + [v.call("export", options) for _ in range(5)])

    # Within the context, yet on the CPU a prompt pass over any of these would hold the one
    # generation slot for minutes: the per-request prompt limit (--max-prompt-tokens) refuses
    # them before it, as it does the context's.
    over_prompt_limit = "prompt tokens per request"
    return [
        Attack("a message of 100,000 backslashes", lambda v: v.chat("\\" * LONG), expect=over_prompt_limit),
        Attack("a message of <code> runs", lambda v: v.chat("<code>" * (LONG // 6)), expect=over_prompt_limit),
        Attack("a conversation file: 100,000 backslashes, <code> runs", load(files.long_runs)),
        Attack("oversized text (4 MB)", lambda v: v.chat("x " * (2 * 1024 * 1024)), expect=over_prompt_limit),
        Attack("a prompt just over the context", lambda v: v.chat("\\" * (CONTEXT - REPLY_TOKENS // 2)),
               expect=over_prompt_limit),
        Attack("a declared tool with pattern ^(a+)+$", lambda v: v.call("declare_tool", [pattern_tool, []]),
               expect="regular expressions"),
        Attack(f"a message of {limits.max_files_per_message + 1} files",
               lambda v: v.chat("Look.", (files.small_png,) * (limits.max_files_per_message + 1)), expect="at most"),
        Attack("a decompression-bomb PNG", lambda v: v.chat("Look.", (files.bomb_png,)), expect="pixels"),
        Attack("an image at the pixel limit", lambda v: v.chat("Look.", (files.limit_png,))),
        Attack("a video of 8K frames", lambda v: v.chat("Watch.", (files.huge_video,)), expect="per frame"),
        Attack("a video of 4K frames (the limit)", lambda v: v.chat("Watch.", (files.limit_video,))),
        Attack("a conversation file: too many media in a message", load(files.too_many_media), expect="at most"),
        Attack("a conversation file: too many media in all", load(files.too_many_in_all), expect="at most"),
        Attack("a conversation file with a bomb PNG", load(files.bomb_transcript), expect="pixels"),
        Attack(f"an upload over {limits.max_file_mb:g} MB", over_size, expect="HTTP 413"),
        Attack("/export, five times", exports),
    ]


# -- one phase --------------------------------------------------------------------------------

@dataclass
class Phase:
    ttft: list[float] = field(default_factory=list)  # seconds, every honest turn
    failures: list[str] = field(default_factory=list)
    peak_bytes: int = 0
    disk_growth: int = 0
    hostile: list[tuple[str, float, bool, str]] = field(default_factory=list)  # (attack, seconds, as expected, why)

    @property
    def p95(self) -> float:
        return statistics.quantiles(self.ttft, n=20, method="inclusive")[-1] if len(self.ttft) > 1 else self.ttft[0]


def folder_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # deleted while walking
    return total


def resident_bytes(app: AppProcess) -> int:
    import psutil

    total = 0
    for process in app._processes():
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def honest_user(url: str, results: Phase, lock: threading.Lock) -> None:
    client, session = ChatClient(url), uuid.uuid4().hex[:11]
    try:
        for n, text in enumerate(HONEST_TURNS):
            files = (EXAMPLE_IMAGE,) if n == 0 else ()
            try:
                reply = client.chat(text, files, session_hash=session, max_new_tokens=REPLY_TOKENS)
                if not reply_text(reply.final_chat):
                    raise RuntimeError("no reply text")
                ttft = reply.first_visible() - reply.requested
                with lock:
                    results.ttft.append(ttft)
            except Exception as err:  # noqa: BLE001 - a failed turn is a figure
                with lock:
                    results.failures.append(f"{type(err).__name__}: {err}"[:300])
    finally:
        client.close()


def hostile_visitor(url: str, plan: list[Attack], start: int, stop: threading.Event, results: Phase,
                    lock: threading.Lock) -> None:
    visitor = Visitor(url)
    try:
        n = start
        while not stop.is_set():
            attack = plan[n % len(plan)]
            started = time.perf_counter()
            try:
                visitor.call("new_conversation", [])  # each attack on its own: none inherits the last's chat
                answer = attack.run(visitor)
                ok = (attack.expect in answer if attack.expect
                      else "event: error" not in answer and '"success": false' not in answer)
                why = "" if ok else answer[-300:]
            except Exception as err:  # noqa: BLE001 - an attack the app does not answer is recorded
                ok, why = False, f"{type(err).__name__}: {err}"[:300]
            with lock:
                results.hostile.append((attack.name, time.perf_counter() - started, ok, why))
            n += 1
    finally:
        visitor.close()


def run_phase(app: AppProcess, temp: Path, sessions: int, plan: list[Attack], visitors: int) -> Phase:
    results, lock, stop = Phase(), threading.Lock(), threading.Event()
    disk_before, peak = folder_bytes(temp), [resident_bytes(app)]

    def sample_memory() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], resident_bytes(app))
            stop.wait(MEMORY_SAMPLE_SECONDS)

    hostile = [threading.Thread(target=hostile_visitor, args=(app.url, plan, k * len(plan) // max(visitors, 1), stop,
                                                              results, lock)) for k in range(visitors)]
    honest = [threading.Thread(target=honest_user, args=(app.url, results, lock)) for _ in range(sessions)]
    sampler = threading.Thread(target=sample_memory)
    sampler.start()
    for thread in hostile:
        thread.start()
    for thread in honest:
        thread.start()
    for thread in honest:
        thread.join()
    stop.set()
    for thread in [*hostile, sampler]:
        thread.join()
    results.peak_bytes, results.disk_growth = peak[0], folder_bytes(temp) - disk_before
    return results


def side_env(workdir: Path, name: str) -> tuple[dict[str, str], Path]:
    temp = workdir / f"tmp-{name}"
    shutil.rmtree(temp, ignore_errors=True)
    (temp / "gradio").mkdir(parents=True)
    return {"TMPDIR": str(temp), "GRADIO_TEMP_DIR": str(temp / "gradio")}, temp


def hostile_load(ctx: Context) -> Section:
    from gemma4_ui.config import MediaLimits

    sessions, visitors = (4, 2) if ctx.quick else (HONEST_SESSIONS, HOSTILE_VISITORS)
    runs = ctx.runs if not ctx.quick else 1
    files = hostile_files(ctx.workdir / "hostile")
    calm_env, calm_temp = side_env(ctx.workdir, "calm")
    hostile_env, hostile_temp = side_env(ctx.workdir, "hostile")
    calm_app, hostile_app = ctx.fresh_app(calm_env), ctx.fresh_app(hostile_env)
    plan = attacks(files, load_chat_index(hostile_app.url))
    for app in (calm_app, hostile_app):  # warm-up: first calls pay for lazy initialisation
        run_phase(app, calm_temp if app is calm_app else hostile_temp, 2, [], 0)
    phases: dict[str, list[Phase]] = {"calm": [], "hostile": []}
    for run in range(runs):
        order = ["calm", "hostile"] if run % 2 == 0 else ["hostile", "calm"]
        for side in order:
            started = time.perf_counter()
            if side == "calm":
                phases[side].append(run_phase(calm_app, calm_temp, sessions, [], 0))
            else:
                phases[side].append(run_phase(hostile_app, hostile_temp, sessions, plan, visitors))
            print(f"[bench] hostile-load: run {run + 1}, {side}: {time.perf_counter() - started:.0f} s",
                  flush=True, file=__import__("sys").stderr)
    calm, hostile = phases["calm"], phases["hostile"]
    limits = MediaLimits()
    memory_bound = visitors * limits.max_conversation_media_mb
    disk_bound = round(files.total_bytes() / MB + visitors * 16, 1)
    attempts = [h for phase in hostile for h in phase.hostile]
    unexpected = [(name, why) for name, _, ok, why in attempts if not ok]
    by_attack: dict[str, list[float]] = {}
    for name, seconds, _, _ in attempts:
        by_attack.setdefault(name, []).append(seconds)
    slowest = max(by_attack.items(), key=lambda item: statistics.median(item[1]), default=("none", [0.0]))
    figures = [
        Figure(f"honest p95 TTFT, calm ({sessions} sessions)", [p.p95 for p in calm], "s",
               note=f"{len(HONEST_TURNS)} turns each (a picture, then text), {REPLY_TOKENS}-token replies, "
                    "all sessions at once; one generation at a time (--gpu-concurrency 1)"),
        Figure(f"honest p95 TTFT, with {visitors} hostile visitors", [p.p95 for p in hostile], "s"),
        Figure("honest p95 TTFT, hostile ÷ calm", paired([p.p95 for p in hostile], [p.p95 for p in calm],
                                                         lambda a, b: a / b), target=Target("≤", 1.5)),
        Figure("honest failed turns, calm", [len(p.failures) for p in calm], target=Target("≤", 0), digits=0,
               note="; ".join(sorted({f for p in calm for f in p.failures}))[:300]),
        Figure("honest failed turns, hostile", [len(p.failures) for p in hostile], target=Target("≤", 0), digits=0,
               note="; ".join(sorted({f for p in hostile for f in p.failures}))[:300]),
        Figure("server memory peak, calm", [p.peak_bytes / MB for p in calm], "MB", digits=0,
               note="RSS of the server and its generation process, sampled every "
                    f"{MEMORY_SAMPLE_SECONDS:g} s while the phase runs"),
        Figure("server memory peak, hostile − calm", paired([p.peak_bytes / MB for p in hostile],
                                                            [p.peak_bytes / MB for p in calm], lambda a, b: a - b),
               "MB", Target("≤", memory_bound), digits=0,
               note=f"bound: {visitors} visitors × the decoded media a conversation may hold "
                    f"({limits.max_conversation_media_mb:g} MB)"),
        Figure("temp-disk growth, calm", [p.disk_growth / MB for p in calm], "MB", digits=1,
               note="TMPDIR and GRADIO_TEMP_DIR of the server: uploads, Gradio's copies, exports"),
        Figure("temp-disk growth, hostile", [p.disk_growth / MB for p in hostile], "MB", Target("≤", disk_bound),
               digits=1, note=f"bound: one copy of each hostile file ({files.total_bytes() / MB:.0f} MB) + 16 MB "
                              "per visitor (its export folder and Gradio's copy), however many requests"),
        Figure("hostile requests answered otherwise than the limits say", [len(unexpected)], target=Target("≤", 0),
               digits=0, note=f"of {len(attempts)}: " + "; ".join(f"{n}: {w}" for n, w in unexpected[:3])[:400]),
        Figure(f"hostile request time, slowest kind ({slowest[0]})", slowest[1], "s", digits=2,
               note="from the request to its answer, waiting in the queue included"),
    ]
    return Section("hostile load", figures)
