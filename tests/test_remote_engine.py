"""The remote engine (`engines/openai.py`) against a real `transformers serve` running the bundled
tiny Gemma 4 on loopback, and through the app with `gradio_client`.

Three tiers:
  - pure conversions (Gemma dicts → OpenAI payload, stream chunks → events), exact;
  - the engine against the real server. The strongest checks are model-independent: the prompt
    the server renders from our payload has exactly as many tokens as the local processor's
    rendering of the same Gemma dicts (thinking switch, tools, a tool round, an image);
  - failures: a misbehaving proxy in front of the real server refuses, hangs, answers 401 or cuts
    the stream on demand, so every happy path still goes through the real server.

Tests marked `needs_trained_model` hold for the trained bundled model, not for random weights.
"""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import threading
import time
import wave
from base64 import b64decode
from io import BytesIO

import numpy as np
import pytest
from conftest import ROOT, free_port, start_app
from gradio_client import handle_file
from openai.types.chat import ChatCompletionChunk
from PIL import Image

from gemma4_ui.config import BUNDLED_MODEL, BUNDLED_TRAINED, Settings
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.events import Done, EngineError, TextDelta, ThinkingDelta, ToolCall, ToolCallStarted
from gemma4_ui.core.parsing import ReplyParser
from gemma4_ui.core.prompt import PromptSpec, model_inputs
from gemma4_ui.core.transcript import last_reply
from gemma4_ui.engines.base import GenerationRequest, ModelLoadError
from gemma4_ui.engines.openai import (
    OpenAIEngine,
    ReplyAssembler,
    local_model_files,
    request_body,
    scrub,
    shown_url,
    to_openai_messages,
    wav_base64,
)
from gemma4_ui.media.decoding import MediaItem, load_media
from gemma4_ui.tools.registry import default_registry
from gemma4_ui.turns import ChatOptions, TurnRunner
from tests.conftest import chat_messages

EXAMPLES = ROOT / "assets" / "examples"
TINY = str(BUNDLED_MODEL)
needs_trained_model = pytest.mark.skipif(
    not BUNDLED_TRAINED, reason="needs the trained bundled model (scripts/train_tiny_gemma4.py); random weights neither think nor call tools")


# -- the real server ------------------------------------------------------------------------------

def settings_for(url: str, model: str | None = TINY, **overrides) -> Settings:
    return Settings(backend="openai", base_url=url, model=model, **overrides)


@pytest.fixture(scope="module")
def engine(server_port) -> OpenAIEngine:
    return OpenAIEngine(settings_for(f"http://127.0.0.1:{server_port}/v1")).load()


def run(engine: OpenAIEngine, spec: PromptSpec, max_new_tokens: int = 8, media=()) -> list:
    """Greedy, so every run is the same: sampled random-weight output can end early, or trip
    transformers serve's stream decoder ("Invalid prefix encountered while decoding stream")."""
    request = GenerationRequest(spec, max_new_tokens=max_new_tokens, temperature=0, media=list(media))
    return list(engine.stream(request, threading.Event()))


def done_of(events: list) -> Done:
    assert isinstance(events[-1], Done), f"the stream ended with {events[-1]!r}"
    return events[-1]


def local_prompt_tokens(engine: OpenAIEngine, spec: PromptSpec) -> int:
    return int(model_inputs(engine.processor, spec)["input_ids"].shape[-1])


# -- a proxy that fails on demand ---------------------------------------------------------------------

class MisbehavingProxy:
    """TCP proxy to the real server. Its mode, read when a connection opens, is one of:
    "forward"; "reset" (accepts, then closes: a server that died); "hang" (reads the request,
    never answers); "unauthorized" (401, as a server started with --api-key answers); "cut"
    (forwards the reply's first SSE events, then drops the connection)."""

    CUT_AFTER_EVENTS = 3  # the role chunk and two pieces of text

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.mode = "forward"
        self._closing = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        _hang_up(self._listener)  # (the accept() thread would keep a merely closed socket listening)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client, self.mode), daemon=True).start()

    def _handle(self, client: socket.socket, mode: str) -> None:
        try:
            self._respond(client, mode)
        finally:
            _hang_up(client)

    def _respond(self, client: socket.socket, mode: str) -> None:
        if mode == "reset":
            return
        head, body_start = _read_head(client)
        if mode == "hang":
            self._closing.wait(60)
            return
        if mode == "unauthorized":
            client.sendall(_json_response(401, {"error": {"message": "Invalid API key.", "code": 401}}))
            return
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        try:
            # One request per connection, so every request meets the mode set before it.
            upstream.sendall(_with_connection_close(head) + body_start)
            threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
            _relay(upstream, client, self.CUT_AFTER_EVENTS if mode == "cut" else None)
        finally:
            _hang_up(upstream)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _with_connection_close(head: bytes) -> bytes:
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join(lines + [b"Connection: close"]) + b"\r\n\r\n"


def _hang_up(sock: socket.socket) -> None:
    """shutdown, not just close: another thread blocked in recv() would keep the connection open."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _json_response(status: int, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} Error\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n").encode() + data


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while piece := source.recv(65536):
            target.sendall(piece)
    except OSError:
        pass


def _relay(upstream: socket.socket, client: socket.socket, cut_after_events: int | None) -> None:
    """Forward the reply; with `cut_after_events`, stop right before the next SSE event."""
    seen = b""
    try:
        while piece := upstream.recv(65536):
            start = len(seen)
            seen += piece
            if cut_after_events is not None:
                events = [i for i in range(len(seen)) if seen.startswith(b"data: ", i)]
                if len(events) > cut_after_events:
                    client.sendall(seen[start:events[cut_after_events]])
                    return
            client.sendall(piece)
    except OSError:
        pass


@pytest.fixture(scope="module")
def proxy(server_port):
    proxy = MisbehavingProxy(server_port)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def proxied_engine(proxy) -> OpenAIEngine:
    return OpenAIEngine(settings_for(proxy.url, request_timeout=4)).load()


@pytest.fixture()
def forwarding(proxy):
    yield proxy
    proxy.mode = "forward"


# -- 1. pure conversions ---------------------------------------------------------------------------

def test_text_messages_convert_as_they_are():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]
    assert to_openai_messages(messages) == messages


def test_media_parts_become_data_urls_and_wav():
    image = Image.new("RGB", (2, 1), (255, 0, 0))
    audio = np.array([0.0, 0.5, -1.0, 2.0], dtype=np.float32)
    messages = [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "And?"},
                                             {"type": "audio", "audio": audio}]}]
    [message] = to_openai_messages(messages)
    image_part, text_part, audio_part = message["content"]
    assert text_part == {"type": "text", "text": "And?"}
    assert image_part["type"] == "image_url"
    url = image_part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert Image.open(BytesIO(b64decode(url.split(",", 1)[1]))).getpixel((0, 0)) == (255, 0, 0)
    assert audio_part == {"type": "input_audio", "input_audio": {"data": wav_base64(audio), "format": "wav"}}
    with wave.open(BytesIO(b64decode(audio_part["input_audio"]["data"]))) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        samples = np.frombuffer(wav.readframes(4), dtype="<i2")
    assert samples.tolist() == [0, 16384, -32767, 32767], "16-bit PCM, clipped to [-1, 1]"


def test_video_is_sent_as_its_original_file():
    path = EXAMPLES / "bouncing_ball.mp4"
    frames = np.zeros((1, 2, 2, 3), dtype=np.uint8)
    item = MediaItem(kind="video", path=str(path), name=path.name, data=frames)
    [message] = to_openai_messages([{"role": "user", "content": [{"type": "video", "video": frames}]}], [item])
    url = message["content"][0]["video_url"]["url"]
    assert url.startswith("data:video/mp4;base64,") and b64decode(url.split(",", 1)[1]) == path.read_bytes()


def test_tool_round_becomes_calls_tool_messages_and_the_answer():
    messages = [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "reasoning": "Two calls.",
         "tool_calls": [
             {"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}},
             {"id": "", "type": "function", "function": {"name": "weather", "arguments": {"city": "Rome"}}}],
         "tool_responses": [{"name": "weather", "response": {"sky": "sunny", "temperature": 21}},
                            {"name": "weather", "response": "rain"}],
         "content": "Sunny in Paris, rain in Rome."},
    ]
    assert to_openai_messages(messages) == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "reasoning_content": "Two calls.", "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_1_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": '{"sky": "sunny", "temperature": 21}'},
        {"role": "tool", "tool_call_id": "call_1_1", "content": "rain"},
        {"role": "assistant", "content": "Sunny in Paris, rain in Rome."},
    ]


def test_request_body_carries_sampling_thinking_and_tools():
    tools = default_registry().schemas(["calculator"])
    spec = PromptSpec([{"role": "user", "content": "2+2?"}], tools=tools, enable_thinking=True)
    request = GenerationRequest(spec, max_new_tokens=99, temperature=0.5, top_p=0.9, top_k=40)
    messages = [{"role": "user", "content": "2+2?"}]
    assert request_body(request, "m", messages) == {
        "model": "m", "messages": messages, "stream": True, "stream_options": {"include_usage": True},
        "max_tokens": 99, "temperature": 0.5, "top_p": 0.9, "tools": tools,
        "extra_body": {"chat_template_kwargs": {"enable_thinking": True}, "top_k": 40},
    }
    refused = request_body(request, "m", messages, {"top_k", "stream_options"})
    assert "stream_options" not in refused and refused["extra_body"] == {"chat_template_kwargs": {"enable_thinking": True}}
    seeded = GenerationRequest(spec, temperature=0.5, seed=7)
    assert request_body(seeded, "m", messages)["seed"] == 7 and "seed" not in request_body(seeded, "m", messages, {"seed"})


def _chunk(delta: dict, finish_reason: str | None = None, usage: dict | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate({
        "id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], "usage": usage})


@pytest.fixture(scope="module")
def assembler(processor):
    return lambda: ReplyAssembler(ReplyParser(processor.tokenizer, ""), started=time.perf_counter())


def test_logprobs_become_token_probabilities(assembler):
    """vLLM and SGLang send each token's logprob and top alternatives with its chunk."""
    def with_logprobs(delta, tokens, finish_reason=None):
        chunk = _chunk(delta, finish_reason).model_dump()
        chunk["choices"][0]["logprobs"] = {"content": [
            {"token": token, "logprob": math.log(p), "bytes": None,
             "top_logprobs": [{"token": token, "logprob": math.log(p), "bytes": None},
                              {"token": "x", "logprob": math.log(1 - p), "bytes": None}]}
            for token, p in tokens]}
        return ChatCompletionChunk.model_validate(chunk)

    reply = assembler()
    for chunk in [with_logprobs({"reasoning_content": "Hm"}, [("Hm", 0.5)]),
                  with_logprobs({"content": "Hi there"}, [("Hi", 0.9), (" there", 0.75)], "stop")]:
        reply.feed(chunk)
    _, done = reply.finish(cancelled=False)
    tokens = done.token_probabilities
    assert [(t.text, t.kind) for t in tokens] == [("Hm", "thought"), ("Hi", "answer"), (" there", "answer")]
    assert [t.probability for t in tokens] == pytest.approx([0.5, 0.9, 0.75])
    assert tokens[1].alternatives == [("Hi", pytest.approx(0.9)), ("x", pytest.approx(0.1))]
    request = GenerationRequest(PromptSpec([{"role": "user", "content": "Hi"}]), token_probabilities=True)
    assert request_body(request, "m", [])["logprobs"] is True and request_body(request, "m", [])["top_logprobs"] == 5
    assert "logprobs" not in request_body(request, "m", [], {"logprobs", "top_logprobs"})


def test_streamed_call_pieces_assemble_into_calls(assembler):
    """vLLM streams a call's arguments in pieces; a call is complete when the next one starts."""
    reply = assembler()
    events = []
    for chunk in [
        _chunk({"reasoning_content": "Need weather."}),
        _chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "weather", "arguments": '{"ci'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "weather", "arguments": "{oops"}}]}),
        _chunk({}, "tool_calls", {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}),
    ]:
        events += reply.feed(chunk)
    closing, done = reply.finish(cancelled=False)
    events += closing
    paris = ToolCall(name="weather", arguments={"city": "Paris"}, raw='weather({"city": "Paris"})', id="a")
    assert events[:4] == [ThinkingDelta("Need weather."), ToolCallStarted(), paris, ToolCallStarted()]
    broken = events[4]
    assert (broken.name, broken.arguments, broken.raw, broken.id) == ("weather", None, "{oops", "b")
    assert broken.error.startswith("the arguments are not valid JSON")
    assert done.tool_calls == [paris, broken] and done.reasoning == "Need weather."
    assert (done.stats.prompt_tokens, done.stats.generated_tokens, done.stats.stop_reason) == (12, 7, "tool_call")


def test_unparsed_gemma_output_in_content_is_parsed_not_shown(assembler):
    """A server without reasoning / tool parsers sends the model's markers as content."""
    reply = assembler()
    events = []
    for text in ["<|chan", "nel>thought\nHmm<channel|>", "<|tool_call>call:weather{city:<|\"|>Paris<|\"|>}",
                 "<tool_call|>"]:
        events += reply.feed(_chunk({"content": text}))
    events += reply.feed(_chunk({}, "stop"))
    closing, done = reply.finish(cancelled=False)
    events += closing
    assert [e for e in events if isinstance(e, (TextDelta, ThinkingDelta))] == [ThinkingDelta("Hmm")]
    assert [c.arguments for c in done.tool_calls] == [{"city": "Paris"}]
    assert done.stats.stop_reason == "tool_call" and done.content == ""


def test_chunks_as_json_give_what_the_chunk_models_give(assembler):
    """The server's chunks are read as JSON objects (feed_data, with a direct path for a chunk
    of text alone): the events, text and stats are those the openai library's models give."""
    chunks = [_chunk({"role": "assistant", "content": ""}), _chunk({"reasoning_content": "Hm"}),
              *(_chunk({"content": text}) for text in ["<|chan", "nel>thought\nx<channel|>", "Hi", " <|\"", "|>there"]),
              _chunk({"content": "!", "tool_calls": []}),
              _chunk({"role": None, "content": " ok", "reasoning_content": None, "tool_calls": None}),
              _chunk({"content": None, "reasoning_content": "late"}), _chunk({}, "stop"),
              _chunk({}, usage={"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12})]
    as_models, as_json = assembler(), assembler()
    events = [as_models.feed(chunk) for chunk in chunks]
    assert [as_json.feed_data(chunk.model_dump(exclude_unset=True)) for chunk in chunks] == events
    (closing, done), (json_closing, json_done) = as_models.finish(cancelled=False), as_json.finish(cancelled=False)
    assert json_closing == closing
    assert (json_done.content, json_done.reasoning, json_done.raw) == (done.content, done.reasoning, done.raw)
    assert (json_done.stats.prompt_tokens, json_done.stats.generated_tokens, json_done.stats.stop_reason) == (3, 9, "stop")
    assert (json_done.stats.time_to_first_token is None) == (done.stats.time_to_first_token is None)


def test_finish_reasons_map_to_stop_reasons(assembler):
    for finish_reason, expected in [("stop", "stop"), ("length", "length"), ("tool_calls", "tool_call")]:
        reply = assembler()
        reply.feed(_chunk({"content": "Hi"}, finish_reason))
        assert reply.finish(cancelled=False)[1].stats.stop_reason == expected


def test_a_served_name_that_is_no_local_model_gets_no_processor():
    """vLLM's --served-model-name aliases are not Hub ids: no processor, so no counts shown as exact."""
    assert local_model_files("my-alias") is None
    assert local_model_files(TINY) == (TINY, True)


# -- 2. the engine against the real server -------------------------------------------------------------

def test_load_learns_the_model_and_what_the_server_refuses(engine, server_port):
    assert (engine.status.source, engine.status.name) == ("remote", TINY)
    assert engine.status.device == f"http://127.0.0.1:{server_port}/v1"
    assert engine.refused == {"top_k"}, "transformers serve answers 422 to top_k"
    assert "top_k" in engine.status.notice
    # It takes `logprobs` and `top_logprobs` but ignores them (no logprobs in its chunks): the view says so.
    assert "refuses or ignores the OpenAI API's `logprobs`" in engine.token_probabilities_note
    assert engine.processor is not None and engine.context_length == 131072
    assert engine.modalities == {"text", "image", "audio", "video"}


def test_a_streamed_text_reply_with_server_usage(engine):
    spec = PromptSpec([{"role": "user", "content": "Hello!"}])
    events = run(engine, spec, max_new_tokens=12)
    done = done_of(events)
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) >= 2, "the reply streams in pieces"
    assert done.content == "".join(texts).strip()
    assert done.stats.prompt_tokens == local_prompt_tokens(engine, spec)
    assert 1 <= done.stats.generated_tokens <= 12
    assert done.stats.time_to_first_token is not None and done.stats.duration >= done.stats.time_to_first_token


@pytest.mark.parametrize("thinking", [False, True])
def test_the_server_renders_the_thinking_switch(engine, thinking):
    """The server's prompt matches ours token for token, so it got enable_thinking."""
    spec = PromptSpec([{"role": "user", "content": "Plan a day trip to Lisbon."}], enable_thinking=thinking)
    assert done_of(run(engine, spec, max_new_tokens=1)).stats.prompt_tokens == local_prompt_tokens(engine, spec)


def test_the_server_renders_tools_and_a_tool_round_as_we_do(engine):
    tools = default_registry().schemas(["get_current_weather"])
    call = {"id": "call_0", "type": "function",
            "function": {"name": "get_current_weather", "arguments": {"location": "Paris"}}}
    answered = {"role": "assistant", "tool_calls": [call],
                "tool_responses": [{"name": "get_current_weather", "response": "sunny, 21 °C"}]}
    for messages in (
        [{"role": "user", "content": "Weather in Paris?"}],
        [{"role": "user", "content": "Weather in Paris?"}, answered],
        [{"role": "user", "content": "Weather in Paris?"}, {**answered, "content": "Sunny."},
         {"role": "user", "content": "Thanks"}],
    ):
        spec = PromptSpec(messages, tools=tools, enable_thinking=True)
        assert done_of(run(engine, spec, max_new_tokens=1)).stats.prompt_tokens == local_prompt_tokens(engine, spec)
    # The exchange's thought goes as `reasoning_content`; transformers serve 5.23 drops that
    # field from the messages it renders, so its prompt is ours without the thought.
    thought = [{"role": "user", "content": "Weather in Paris?"}, {**answered, "reasoning": "I will call the tool."}]
    spec = PromptSpec(thought, tools=tools, enable_thinking=True)
    without = PromptSpec(thought[:1] + [answered], tools=tools, enable_thinking=True)
    assert local_prompt_tokens(engine, spec) > local_prompt_tokens(engine, without)
    assert done_of(run(engine, spec, max_new_tokens=1)).stats.prompt_tokens == local_prompt_tokens(engine, without)


def test_an_image_reaches_the_server(engine):
    image = load_media(EXAMPLES / "shapes.png")
    spec = PromptSpec([{"role": "user", "content": [{"type": "image", "image": image.data},
                                                    {"type": "text", "text": "What do you see?"}]}])
    done = done_of(run(engine, spec, max_new_tokens=4, media=[image]))
    assert done.stats.prompt_tokens == local_prompt_tokens(engine, spec), "soft tokens included, as locally"


@needs_trained_model
def test_the_trained_model_thinks_only_when_asked(engine):
    question = [{"role": "user", "content": "Plan a day trip to Lisbon in three steps."}]
    thinking = run(engine, PromptSpec(question, enable_thinking=True), max_new_tokens=256)
    plain = run(engine, PromptSpec(question, enable_thinking=False), max_new_tokens=256)
    assert any(isinstance(e, ThinkingDelta) for e in thinking) and done_of(thinking).reasoning
    assert not any(isinstance(e, ThinkingDelta) for e in plain) and done_of(plain).content
    assert done_of(thinking).stats.stop_reason == done_of(plain).stats.stop_reason == "stop"


def test_audio_goes_through_the_server(engine):
    """input_audio reaches the model: the prompt holds its soft tokens, as locally, and the
    audio tower runs (it used to fail on any clip: the bundle's config sized its input
    projection for 8 mel bins instead of 128)."""
    audio = load_media(EXAMPLES / "speech.wav")
    spec = PromptSpec([{"role": "user", "content": [{"type": "text", "text": "Transcribe this audio."},
                                                    {"type": "audio", "audio": audio.data}]}])
    done = done_of(run(engine, spec, max_new_tokens=8, media=[audio]))
    assert done.stats.prompt_tokens == local_prompt_tokens(engine, spec)
    assert done.stats.generated_tokens > 0


@needs_trained_model
def test_a_tool_round_trip_with_server_usage_in_the_reply_stats(engine):
    """The model calls, the tool runs, its result goes back as a `tool` message (JSON text, the
    round's thought dropped by the server), and the model answers from it."""
    conversation = Conversation([UserTurn("What's the weather in Ouagadougou?")])
    options = ChatOptions(thinking=True, max_new_tokens=256, temperature=0, enabled_tools=["get_current_weather"])
    *_, final = TurnRunner(engine, default_registry()).run(conversation, options, threading.Event())
    turn = final.conversation.turns[-1]
    assert turn.rounds and turn.rounds[0].calls[0].name == "get_current_weather"
    assert turn.rounds[0].results[0].status == "ok" and turn.content
    result = turn.rounds[0].results[0].response
    assert str(result["temperature"]) in turn.content and result["weather"] in turn.content
    stats = last_reply(final.conversation)[0]["generations"]
    assert len(stats) == 2 and all(s["prompt_tokens"] > 0 for s in stats)


def test_reply_stats_are_the_server_usage(engine):
    conversation = Conversation([UserTurn("Hello!")])
    *_, final = TurnRunner(engine, default_registry()).run(conversation, ChatOptions(max_new_tokens=5, temperature=0),
                                                             threading.Event())
    [stats] = last_reply(final.conversation)[0]["generations"]
    spec = PromptSpec([{"role": "user", "content": "Hello!"}])
    assert stats["prompt_tokens"] == local_prompt_tokens(engine, spec)
    assert stats["generated_tokens"] == final.conversation.turns[-1].stats.generated_tokens > 0


def test_stop_closes_the_stream_promptly(engine):
    cancel = threading.Event()
    request = GenerationRequest(PromptSpec([{"role": "user", "content": "Tell me a long story."}]), max_new_tokens=4000,
                                temperature=0)
    pieces, stopped_at = 0, None
    for event in engine.stream(request, cancel):
        pieces += isinstance(event, TextDelta)
        if pieces == 3 and stopped_at is None:
            stopped_at = time.perf_counter()
            cancel.set()
    assert time.perf_counter() - stopped_at < 2
    assert isinstance(event, Done) and event.stats.stop_reason == "cancelled"
    # The server stopped generating too: the next request is not queued behind 4000 tokens.
    started = time.perf_counter()
    done_of(run(engine, PromptSpec([{"role": "user", "content": "Hi"}]), max_new_tokens=2))
    assert time.perf_counter() - started < 10


# -- 3. failures the user can act on ---------------------------------------------------------------------

def test_a_stopped_server(server_port):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelLoadError, match=r"Cannot reach the server at .*Connection refused.*--base-url"):
        OpenAIEngine(settings_for(url)).load()
    gone = MisbehavingProxy(server_port)
    stopped = OpenAIEngine(settings_for(gone.url)).load()
    gone.close()  # the server goes away after the app started
    [error] = run(stopped, PromptSpec([{"role": "user", "content": "Hi"}]))
    assert isinstance(error, EngineError)
    assert error.message.startswith(f"Cannot reach the server at {gone.url} ([Errno 111] Connection refused)")


SECRETS = ("alice", "s3cr3t-pass", "qk-secret-1", "sk-secret-2", "api_key")


def test_the_servers_address_is_shown_without_its_secrets(processor):
    """--base-url may carry credentials; every visitor sees the status and the errors."""
    port = free_port()
    url = f"http://alice:s3cr3t-pass@127.0.0.1:{port}/v1?api_key=qk-secret-1"
    engine = OpenAIEngine(settings_for(url, api_key="sk-secret-2"))
    shown = [engine.status.describe()]
    with pytest.raises(ModelLoadError) as caught:
        engine.load()
    shown.append(str(caught.value))
    engine._parse_tokenizer = processor.tokenizer  # what load() sets; the server never answered
    [error] = run(engine, PromptSpec([{"role": "user", "content": "Hi"}]))
    shown.append(error.message)
    for text in shown:
        assert f"http://127.0.0.1:{port}/v1" in text and not any(secret in text for secret in SECRETS), text
    assert shown[1].startswith(f"Cannot reach the server at http://127.0.0.1:{port}/v1 (")


def test_what_is_shown_of_an_address():
    assert shown_url("https://user:token@example.org:8443/v1/?api_key=k#f") == "https://example.org:8443/v1"
    assert shown_url("https://example.org/key-8a7b6c5d4e3f/v1") == "https://example.org/…"
    assert shown_url("not a url") == "(the server)"
    url = "https://bobby:pw-1234@example.org/v1?key=abcd1234&model=m"
    said = scrub(f"Invalid URL '{url}': bobby:pw-1234, key abcd1234, sk-zz-99 (query key=abcd1234&model=m)", url,
                 api_key="sk-zz-99")
    assert said == "Invalid URL 'https://example.org/v1': …:…, key …, … (query …)"


def test_a_wrong_url(server_port):
    with pytest.raises(ModelLoadError, match=r"HTTP 404.*usually ends in /v1"):
        OpenAIEngine(settings_for(f"http://127.0.0.1:{server_port}")).load()


def test_a_model_the_server_does_not_serve(server_port):
    with pytest.raises(ModelLoadError, match=r"does not serve the model 'google/gemma-4-E2B-it'.*pinned"):
        OpenAIEngine(settings_for(f"http://127.0.0.1:{server_port}/v1", model="google/gemma-4-E2B-it")).load()


def test_no_model_named_and_none_listed(server_port):
    with pytest.raises(ModelLoadError, match=r"lists no models. Pass the name it serves with --model"):
        OpenAIEngine(settings_for(f"http://127.0.0.1:{server_port}/v1", model=None)).load()


def test_a_wrong_api_key(forwarding):
    forwarding.mode = "unauthorized"
    with pytest.raises(ModelLoadError, match=r"refused the request \(HTTP 401: Invalid API key\)\. Check the API key \(--api-key or OPENAI_API_KEY\)"):
        OpenAIEngine(settings_for(forwarding.url, api_key="wrong")).load()


def test_a_server_that_never_answers(forwarding):
    forwarding.mode = "hang"
    started = time.perf_counter()
    with pytest.raises(ModelLoadError, match=r"did not answer within 1 s.*--request-timeout"):
        OpenAIEngine(settings_for(forwarding.url, request_timeout=1)).load()
    assert time.perf_counter() - started < 5


def test_a_field_the_server_rejects(engine):
    refused, engine.refused = engine.refused, set()
    try:
        [error] = run(engine, PromptSpec([{"role": "user", "content": "Hi"}]))
    finally:
        engine.refused = refused
    assert isinstance(error, EngineError)
    assert "rejected the request (HTTP 422): Unexpected fields in the request: {'top_k'}" in error.message


def test_a_stream_cut_mid_reply_keeps_what_arrived(forwarding, proxied_engine):
    forwarding.mode = "cut"
    started = time.perf_counter()
    events = run(proxied_engine, PromptSpec([{"role": "user", "content": "Hello!"}]), max_new_tokens=50)
    assert time.perf_counter() - started < 3, "reported when the connection drops, not at the timeout"
    *streamed, error = events
    assert streamed and all(isinstance(e, TextDelta) for e in streamed), "the text before the cut"
    assert isinstance(error, EngineError)
    assert error.message == (f"The reply from {forwarding.url} was cut off mid-stream (peer closed connection without "
                             "sending complete message body (incomplete chunked read)). What arrived is kept; ask "
                             "again to continue.")


# -- 4. through the app ------------------------------------------------------------------------------------

def texts(messages) -> list[str]:
    return [part["text"] for m in messages for part in m["content"] if part.get("type") == "text"]


def user_texts(messages) -> list[str]:
    return texts([m for m in messages if m["role"] == "user"])


@pytest.fixture(scope="module")
def remote_app(proxied_engine):
    server = start_app(proxied_engine)
    yield server
    server.demo.close()


def chat(client, text: str, files=(), **options):
    return chat_messages(client.predict({"text": text, "files": [handle_file(str(f)) for f in files]},
                          max_new_tokens=options.pop("max_new_tokens", 8), temperature=0, api_name="/chat", **options))


def test_app_streams_a_remote_reply_with_text_and_with_an_image(remote_app):
    client = remote_app.client()
    job = client.submit({"text": "Hello!", "files": []}, max_new_tokens=24, temperature=0, api_name="/chat")
    updates = list(job)
    assert len(updates) >= 3, "the reply arrives in several updates"
    final = chat_messages(job.result())
    assert user_texts(final) == ["Hello!"] and final[-1]["role"] == "assistant" and texts([final[-1]])
    with_image = chat(client, "What is this?", [EXAMPLES / "shapes.png"])
    assert [m["content"][0]["type"] for m in with_image if m["role"] == "user"][1] == "file"
    assert user_texts(with_image) == ["Hello!", "What is this?"] and with_image[-1]["role"] == "assistant"


def test_app_stop_ends_a_remote_reply(remote_app):
    client = remote_app.client()
    job = client.submit({"text": "Tell me a long story.", "files": []}, max_new_tokens=4000, temperature=0,
                        api_name="/chat")
    deadline = time.time() + 60
    while len(job.outputs()) < 2 and time.time() < deadline:
        time.sleep(0.05)
    stopped_at = time.time()
    client.predict(api_name="/stop")
    final = chat_messages(job.result(timeout=30))
    assert time.time() - stopped_at < 10
    assert "Stopped" in texts([final[-1]])[-1]


@pytest.mark.parametrize("mode, expected", [
    ("reset", "Cannot reach the server"),
    ("unauthorized", "HTTP 401"),
    ("hang", "did not answer within 4 s"),
])
def test_app_keeps_the_conversation_when_the_server_fails(remote_app, forwarding, mode, expected):
    client = remote_app.client()
    before = chat(client, "First")
    forwarding.mode = mode
    failed = chat(client, "Second")
    forwarding.mode = "forward"
    assert failed[:-1] == before, "the history is intact and the failed message is not added"
    assert expected in texts([failed[-1]])[-1]
    after = chat(client, "Third")
    assert user_texts(after) == ["First", "Third"] and after[-1]["role"] == "assistant"


def test_app_keeps_a_reply_cut_mid_stream_with_a_notice(remote_app, forwarding):
    client = remote_app.client()
    chat(client, "First")
    forwarding.mode = "cut"
    failed = chat(client, "Second", max_new_tokens=50)
    forwarding.mode = "forward"
    assert user_texts(failed) == ["First", "Second"]
    assert "cut off mid-stream" in texts([failed[-1]])[-1] and failed[-2]["role"] == "assistant"
    assert user_texts(chat(client, "Third")) == ["First", "Second", "Third"]


def test_app_reports_a_field_the_server_rejects(remote_app):
    engine = remote_app.session.engine
    client = remote_app.client()
    before = chat(client, "First")
    refused, engine.refused = engine.refused, set()  # as if load() had not learned that top_k is refused
    try:
        failed = chat(client, "Second")
    finally:
        engine.refused = refused
    assert failed[:-1] == before and "HTTP 422" in texts([failed[-1]])[-1]
    assert user_texts(chat(client, "Third")) == ["First", "Third"]


def test_app_reports_a_video_the_server_cannot_read(remote_app):
    """transformers serve reads a video's audio track with torchcodec; without it, HTTP 500."""
    client = remote_app.client()
    before = chat(client, "First")
    reply = chat(client, "What happens?", [EXAMPLES / "bouncing_ball.mp4"])
    if importlib.util.find_spec("torchcodec") is None:
        assert reply[:-1] == before and "HTTP 500" in texts([reply[-1]])[-1]
    else:
        assert user_texts(reply) == ["First", "What happens?"] and reply[-1]["role"] == "assistant"
    assert user_texts(chat(client, "Third"))[-1] == "Third"
