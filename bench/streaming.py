"""Streaming overhead and time to first token: the app against a bare `model.generate`.

Three ways to the same tokens, on the same model, prompt and settings (greedy, every reply
exactly `max_new_tokens` long):

- bare:   `model.generate` on a thread with transformers' TextIteratorStreamer;
- engine: the app's `LocalEngine.stream` (template, processor, TokenStream, ReplyParser);
- app:    the whole app in its own process, seen by a client over HTTP (Gradio's queue,
          SharedChatHandlers' throttled re-rendering of the chat, the event stream); the
          model in a generation process of its own, as the app runs it by default, and, for
          comparison, in the server's process (`--no-generation-process`).

Tokens/s runs from the first visible token to the last (taken as one token apart from all the
rest, so a first update that already carries several tokens counts against the app). Time to
first token runs from the request (the file on disk, for an image) to the first token visible.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from gradio_client import handle_file

from .context import Context
from .harness import Figure, Section, Target, interleaved, paired
from .http_client import ChatClient, chat_messages, reply_text

PROMPT = "Write a long story."
IMAGE_PROMPT = "What is in this picture?"
EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
EXAMPLE_IMAGE = EXAMPLES / "shapes.png"
EXAMPLE_PHOTO = EXAMPLES / "street.jpg"
TTFT_TOKENS = 8
# The app with the model in the server's process, as it ran before the generation process
# became the default.
IN_SERVER_PROCESS = {"GEMMA4_GENERATION_PROCESS": "0"}


@dataclass
class Timing:
    requested: float
    first: float  # first token visible
    last: float  # last token visible
    tokens: int  # generated, as the generating side counted them
    prompt_tokens: int
    cpu_seconds: float  # CPU time of the app's processes (all their threads), request to last token
    generation_cpu_seconds: float = 0.0  # ...of the process that runs the model (0: the same)

    @property
    def tokens_per_second(self) -> float:
        return (self.tokens - 1) / (self.last - self.first)

    @property
    def whole_request_tokens_per_second(self) -> float:
        """Tokens over the whole request: connect, queue, prefill, stream, last update."""
        return self.tokens / (self.last - self.requested)

    @property
    def tokens_per_cpu_second(self) -> float:
        return self.tokens / self.cpu_seconds

    @property
    def tokens_per_generation_cpu_second(self) -> float:
        return self.tokens / (self.generation_cpu_seconds or self.cpu_seconds)

    @property
    def time_to_first_token(self) -> float:
        return self.first - self.requested


# -- the three sides ---------------------------------------------------------------------------

def bare_generate(engine, text: str, max_new_tokens: int, image: Path | None = None,
                  history: list[dict] = ()) -> Timing:
    """What a transformers user writes: load, apply the chat template, generate, stream.
    `history`: earlier messages (Gemma message dicts, media decoded), already in memory."""
    from transformers import TextIteratorStreamer
    from transformers.image_utils import load_image

    requested, cpu = time.perf_counter(), time.process_time()
    content = [{"type": "image", "image": load_image(str(image))}, {"type": "text", "text": text}] if image else text
    inputs = engine.processor.apply_chat_template(
        [*history, {"role": "user", "content": content}], add_generation_prompt=True, enable_thinking=False,
        tokenize=True, return_dict=True, return_tensors="pt").to(engine.model.device)
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].to(engine.model.dtype)
    streamer = TextIteratorStreamer(engine.processor.tokenizer, skip_prompt=True)
    output = {}

    def run() -> None:
        drafting = {"assistant_model": engine.drafter} if engine.drafter is not None else {}
        output["ids"] = engine.model.generate(**inputs, streamer=streamer, max_new_tokens=max_new_tokens,
                                              min_new_tokens=max_new_tokens, do_sample=False, temperature=None,
                                              top_p=None, top_k=None, **drafting)

    worker = threading.Thread(target=run)
    worker.start()
    arrivals = [time.perf_counter() for _ in streamer]  # one item per token, then the end
    worker.join()
    prompt_tokens = inputs["input_ids"].shape[-1]
    return Timing(requested, arrivals[0], arrivals[-1], output["ids"].shape[-1] - prompt_tokens, prompt_tokens,
                  time.process_time() - cpu)


def engine_stream(engine, text: str, max_new_tokens: int, image: Path | None = None) -> Timing:
    """The app's engine on the same request (the upload decoded as the app decodes it),
    consumed as fast as it yields."""
    from gemma4_ui.core.conversation import Conversation, UserTurn
    from gemma4_ui.core.events import Done
    from gemma4_ui.core.options import ChatOptions
    from gemma4_ui.core.prompt import build_spec
    from gemma4_ui.engines.base import GenerationRequest
    from gemma4_ui.media.decoding import load_media
    from gemma4_ui.tools.registry import default_registry

    requested, cpu = time.perf_counter(), time.process_time()
    options = ChatOptions(max_new_tokens=max_new_tokens, temperature=0)
    turn = UserTurn(text, [load_media(image)] if image else [])
    spec = build_spec(Conversation([turn]), options, default_registry())
    first = None
    for event in engine.stream(GenerationRequest(spec, max_new_tokens, temperature=0), threading.Event()):
        if first is None and not isinstance(event, Done):
            first = time.perf_counter()
    assert isinstance(event, Done), f"the engine failed: {event}"
    return Timing(requested, first, time.perf_counter(), event.stats.generated_tokens, event.stats.prompt_tokens,
                  time.process_time() - cpu)


def app_via_gradio_client(client, app, text: str, max_new_tokens: int, new_conversation: bool = True) -> Timing:
    """`/chat` through gradio_client; tokens as the server counted them."""
    if new_conversation:
        client.predict(api_name="/new_conversation")
    before, cpu = len(app.recorded_rounds()), app.cpu_seconds()
    requested = time.perf_counter()
    # No tool on (the demo model starts with its tools on) and no repetition guard: the same
    # prompt and the same number of tokens as the other sides.
    arrivals = [time.perf_counter() for parts in client.submit(
        {"text": text, "files": []}, system_prompt="", thinking=False, max_new_tokens=max_new_tokens, temperature=0.0,
        enabled_tools=[], repetition_guard=0, api_name="/chat")
        if reply_text(chat_messages(parts))]
    return _app_timing(app, before, requested, arrivals[0], arrivals[-1], cpu)


def app_via_http(client: ChatClient, app, text: str, max_new_tokens: int, image: Path | None = None,
                 session_hash: str | None = None) -> Timing:
    """`/chat` through Gradio's documented HTTP API (no client-side polling): from the
    request to the last update as it arrives."""
    before, cpu = len(app.recorded_rounds()), app.cpu_seconds()
    reply = client.chat(text, (image,) if image else (), session_hash=session_hash, max_new_tokens=max_new_tokens)
    return _app_timing(app, before, reply.requested, reply.first_visible(), reply.last, cpu)


def _app_timing(app, before: int, requested: float, first: float, last: float,
                cpu_before: tuple[float, float]) -> Timing:
    (total, generation), (total0, generation0) = app.cpu_seconds(), cpu_before
    rounds = app.recorded_rounds()[before:]
    assert len(rounds) == 1, f"expected one generation round, the server recorded {len(rounds)}"
    return Timing(requested, first, last, rounds[0]["generated_tokens"], rounds[0]["prompt_tokens"], total - total0,
                  generation - generation0)


def chat_with_photos(client, messages: int) -> None:
    """Fill the client's conversation: `messages` messages with two photos each, short replies."""
    photos = [handle_file(str(EXAMPLE_IMAGE)), handle_file(str(EXAMPLE_PHOTO))]
    client.predict(api_name="/new_conversation")
    for n in range(messages):
        client.predict({"text": f"Photos {n}: what changed?", "files": photos}, system_prompt="", thinking=False,
                       max_new_tokens=16, temperature=0.0, enabled_tools=[], repetition_guard=0, api_name="/chat")


def exported_history(client) -> list[dict]:
    """The client's conversation as the app exports it, as Gemma message dicts (media decoded)."""
    from gemma4_ui.config import MediaLimits
    from gemma4_ui.core import transcript
    from gemma4_ui.core.conversation import to_gemma_messages

    files = client.predict(api_name="/export")
    saved = httpx.get(files[0]["url"], timeout=60).text
    conversation = transcript.load(saved, MediaLimits()).conversation
    return to_gemma_messages(conversation)


def _same_work(timings: dict[str, list[Timing]]) -> None:
    """Every side generated the same tokens from the same prompt, or the comparison is void."""
    seen = {(t.tokens, t.prompt_tokens) for runs in timings.values() for t in runs}
    assert len(seen) == 1, f"the sides did different work (generated, prompt tokens): {seen}"


# -- the figures -------------------------------------------------------------------------------

def streaming_overhead(ctx: Context) -> Section:
    from gradio_client import Client

    engine, app, tokens = ctx.engine, ctx.app, ctx.sizes.stream_tokens
    in_server = ctx.fresh_app(IN_SERVER_PROCESS)
    client, http, http_in_server = Client(app.url, verbose=False), ChatClient(app.url), ChatClient(in_server.url)
    sides = {
        "bare": lambda: bare_generate(engine, PROMPT, tokens),
        "engine": lambda: engine_stream(engine, PROMPT, tokens),
        "app": lambda: app_via_gradio_client(client, app, PROMPT, tokens),
        "app over HTTP": lambda: app_via_http(http, app, PROMPT, tokens),
        "in server": lambda: app_via_http(http_in_server, in_server, PROMPT, tokens),
    }
    try:
        for side in sides.values():  # warm-up: first calls pay for lazy initialisation
            side()
        timings = interleaved(sides, 2 * ctx.runs)  # the noisiest figures: twice the runs
    finally:
        http.close()
        http_in_server.close()
    _same_work(timings)
    bare = timings["bare"]
    return Section("streaming", [
        Figure(f"bare generate tokens/s ({tokens} tokens, greedy)", [t.tokens_per_second for t in bare], "tok/s",
               digits=0),
        *compared("engine stream", timings["engine"], bare, "LocalEngine.stream events, consumed in-process"),
        *compared("app via gradio_client", timings["app"], bare,
                  "/chat served by a separate process; first to last streamed update", whole_target=False),
        *compared("app over HTTP", timings["app over HTTP"], bare,
                  "/chat through Gradio's HTTP API (POST /call/chat, then its event stream)", rate=False),
        *compared("app over HTTP, model in the server's process", timings["in server"], bare, "", rate=False,
                  targets=False),  # --no-generation-process, the default before: for comparison
        *streaming_in_a_chat_with_photos(ctx),
    ])


CPU_NOTE = "the process that runs the model"
APP_CPU_NOTE = ("with the server's process: the work of parsing, rendering and sending updates, which no "
                "longer takes time from the model")
WHOLE_NOTE = "request to last update (connect, queue, prefill, stream) vs call to last token"
GRADIO_CLIENT_NOTE = ("gradio_client adds its own latency: ~0.1 s to start a job and up to 50 ms to each update "
                      "(it polls its message queue every 50 ms); the target is on the same request over HTTP")


def compared(side: str, timings: list[Timing], bare: list[Timing], note: str, whole_target: bool = True,
             rate: bool = True, targets: bool = True) -> list[Figure]:
    """Tokens/s as the client sees it (wall clock: on a shared machine it swings with the
    other jobs), the same over the whole request (what a user waits for), and tokens per
    CPU-second (steady whatever else runs): of the process that runs the model (the app's
    extra work there), and of the whole app (with the server's own work: parsing, rendering
    and sending updates, in a process of its own). Without `targets`, for comparison only."""
    ratio = lambda a, b: a / b  # noqa: E731
    wall = paired([t.tokens_per_second for t in timings], [t.tokens_per_second for t in bare], ratio)
    whole = paired([t.whole_request_tokens_per_second for t in timings],
                   [t.whole_request_tokens_per_second for t in bare], ratio)
    cpu = paired([t.tokens_per_generation_cpu_second for t in timings], [t.tokens_per_cpu_second for t in bare], ratio)
    app_cpu = paired([t.tokens_per_cpu_second for t in timings], [t.tokens_per_cpu_second for t in bare], ratio)
    figures = [Figure(f"{side} ÷ bare tokens/s", wall, target=Target("≥", 0.95), note=note)] if rate else []
    return figures + [
        Figure(f"{side} ÷ bare, whole request", whole,
               target=Target("≥", 0.95) if whole_target and targets else None,
               note=WHOLE_NOTE if whole_target else GRADIO_CLIENT_NOTE),
        Figure(f"{side} ÷ bare tokens per CPU-second", cpu, target=Target("≥", 0.95) if targets else None,
               note=CPU_NOTE),
        *([Figure(f"{side} ÷ bare tokens per CPU-second, whole app", app_cpu, note=APP_CPU_NOTE)]
          if any(t.generation_cpu_seconds for t in timings) else [])]


def streaming_in_a_chat_with_photos(ctx: Context) -> list[Figure]:
    """The same comparison late in a chat holding 12 photos: every streamed update re-renders,
    diffs and sends the whole chat, and Gradio re-checks each file in it."""
    from gradio_client import Client

    engine, app, tokens = ctx.engine, ctx.app, ctx.sizes.stream_tokens
    client = Client(app.url, verbose=False, download_files=False)
    chat_with_photos(client, ctx.sizes.photo_chat_messages)
    http = ChatClient(app.url)  # continues the conversation of `client`'s session
    timings: dict[str, list[Timing]] = {"bare": [], "app": []}
    for run in range(2 * ctx.runs + 1):  # the first run warms up
        history = exported_history(client)  # the app's conversation so far, for the bare side
        sides = {"bare": lambda: bare_generate(engine, PROMPT, tokens, history=history),
                 "app": lambda: app_via_http(http, app, PROMPT, tokens, session_hash=client.session_hash)}
        order = list(sides) if run % 2 else list(reversed(sides))
        this_run = {name: sides[name]() for name in order}  # the app's reply joins the history after
        _same_work({name: [timing] for name, timing in this_run.items()})
        for name, timing in this_run.items():
            if run:
                timings[name].append(timing)
    http.close()
    photos = 2 * ctx.sizes.photo_chat_messages
    return compared(f"app in a chat with {photos} photos", timings["app"], timings["bare"],
                    "over HTTP; the chat grows by one reply per run; both sides get the same prompt")


def time_to_first_token(ctx: Context) -> Section:
    engine, app = ctx.engine, ctx.app
    client = ChatClient(app.url)
    sides = {
        "bare text": lambda: bare_generate(engine, PROMPT, TTFT_TOKENS),
        "app text": lambda: app_via_http(client, app, PROMPT, TTFT_TOKENS),
        "bare image": lambda: bare_generate(engine, IMAGE_PROMPT, TTFT_TOKENS, EXAMPLE_IMAGE),
        "app image": lambda: app_via_http(client, app, IMAGE_PROMPT, TTFT_TOKENS, EXAMPLE_IMAGE),
    }
    try:
        for side in sides.values():
            side()
        timings = interleaved(sides, 2 * ctx.runs)  # cheap runs: twice as many
    finally:
        client.close()
    for kind in ("text", "image"):
        _same_work({k: v for k, v in timings.items() if k.endswith(kind)})
    ms = {name: [1000 * t.time_to_first_token for t in runs] for name, runs in timings.items()}
    added = lambda app_ms, bare_ms: app_ms - bare_ms  # noqa: E731
    return Section("time to first token", [
        Figure("TTFT bare generate, text", ms["bare text"], "ms", digits=0),
        Figure("TTFT added by the app, text", paired(ms["app text"], ms["bare text"], added), "ms",
               Target("<", 50), digits=0, note="HTTP request to first reply text in the stream, minus bare"),
        Figure("TTFT bare generate, one image", ms["bare image"], "ms", digits=0),
        Figure("TTFT added by the app, one image", paired(ms["app image"], ms["bare image"], added), "ms",
               Target("<", 50), digits=0, note="upload of shapes.png included"),
    ])
