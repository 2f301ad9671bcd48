"""The remote engine: an OpenAI-compatible server (vLLM, SGLang, `transformers serve`) runs the
model; this module turns Gemma 4 message dicts into a chat-completions request and the
server's stream back into the typed events of `core/events.py`.

Three parts, each testable alone:
  payload   pure functions: Gemma dicts (+ the uploaded files) → OpenAI messages and tools
  replies   `ReplyAssembler`: stream chunks → ThinkingDelta / TextDelta / ToolCall... → Done
  errors    `explain_error`: an openai exception → one sentence the user can act on

Content is always passed through the app's Gemma 4 `ReplyParser` (with an empty prompt): a
server that parses the model's output sends plain text, which the parser passes through
unchanged, and a server that does not (no reasoning / tool parser configured) sends raw
`<|channel>thought...` or `<|tool_call>...` text, which the parser turns into the same
thinking and tool-call events the local engine gives. No marker ever reaches the chat.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import mimetypes
import re
import threading
import time
import urllib.parse
import wave
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import openai

from gemma4_ui.config import BUNDLED_MODEL, Settings
from gemma4_ui.core import model_family
from gemma4_ui.core.events import Done, EngineError, Event, ReplyStats, ThinkingDelta, ToolCall, ToolCallStarted
from gemma4_ui.core.parsing import ReplyParser
from gemma4_ui.core.prompt import PromptSpec
from gemma4_ui.core.repetition import RepetitionGuard
from gemma4_ui.engines import probabilities as token_probabilities
from gemma4_ui.engines.base import Engine, GenerationRequest, ModelLoadError, ModelStatus
from gemma4_ui.engines.loading import hub_reachable
from gemma4_ui.media.decoding import AUDIO_SAMPLING_RATE, MediaItem

log = logging.getLogger(__name__)

# A server started without a key (vLLM, SGLang) accepts any; the client library insists on one.
DEFAULT_API_KEY = "EMPTY"

# Request fields that not every server takes, and what the user loses where one is refused.
# `load()` finds out which the server takes; refused ones are left out of every request.
OPTIONAL_FIELDS = {
    "chat_template_kwargs": "the thinking switch has no effect (the server's default applies)",
    "top_k": "the top-k setting has no effect (the server's default applies)",
    "stream_options": "token usage may be missing from the reply stats",
    "logprobs": "replies carry no token probabilities",
    "top_logprobs": "replies carry no alternatives to each token",
    "seed": "the seed has no effect (each reply is sampled afresh)",
}
NO_LOGPROBS = ("This server returns no token probabilities: it refuses or ignores the OpenAI API's `logprobs` "
               "field (vLLM and SGLang return them; transformers serve ignores it).")

# OpenAI finish_reason → ReplyStats.stop_reason
_STOP_REASONS = {"stop": "stop", "tool_calls": "tool_call", "function_call": "tool_call", "length": "length"}


# -- payload: Gemma 4 message dicts → OpenAI chat messages ---------------------------------------

class PayloadError(ValueError):
    """Something in the conversation cannot be sent to the server; the message says what."""


def image_data_url(image) -> str:
    """A decoded image (PIL, RGB, EXIF orientation applied) as a PNG data URL."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def wav_base64(samples: np.ndarray, sampling_rate: int = AUDIO_SAMPLING_RATE) -> str:
    """Mono float samples in [-1, 1] as a base64 16-bit PCM WAV file."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).round().astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sampling_rate)
        wav.writeframes(pcm.tobytes())
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def video_data_url(item: MediaItem) -> str:
    """The uploaded video file itself: servers sample frames from the file (our decoded frames
    have no standard wire format)."""
    path = Path(item.path)
    if not path.is_file():
        raise PayloadError(f"'{item.name}' is no longer on this server, so it cannot be sent; attach it again.")
    mime = mimetypes.guess_type(item.name)[0] or "video/mp4"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _find_video(frames: Any, media: list[MediaItem]) -> MediaItem:
    """The upload a video part was decoded from (message dicts hold the frames, not the file)."""
    for item in media:
        if item.kind == "video" and item.data is frames:
            return item
    raise PayloadError("A video in the conversation has no original file to send; attach it again.")


def openai_content_part(part: dict, media: list[MediaItem]) -> dict:
    kind = part["type"]
    if kind == "text":
        return {"type": "text", "text": part["text"]}
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": image_data_url(part["image"])}}
    if kind == "audio":
        return {"type": "input_audio", "input_audio": {"data": wav_base64(part["audio"]), "format": "wav"}}
    if kind == "video":
        return {"type": "video_url", "video_url": {"url": video_data_url(_find_video(part["video"], media))}}
    raise PayloadError(f"A message holds a '{kind}' part, which cannot be sent to the server.")


def _openai_content(content: str | list[dict], media: list[MediaItem]) -> str | list[dict]:
    if isinstance(content, str):
        return content
    return [openai_content_part(part, media) for part in content]


def tool_message_content(response: Any) -> str:
    """A tool message's content must be text. A string goes as it is, so the template renders it
    exactly as it renders the native Gemma response (`{value:...}`); anything else goes as JSON."""
    return response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)


def _tool_round_messages(message: dict, position: int) -> list[dict]:
    """A Gemma tool round (calls, their responses, maybe the answer, all in one message) as
    OpenAI spells it: the calls, one `tool` message per response, then the answer."""
    calls = []
    for index, call in enumerate(message["tool_calls"]):
        function = call["function"]
        calls.append({
            # Every call needs an id its response can point at; imported transcripts may lack one.
            "id": call.get("id") or f"call_{position}_{index}",
            "type": "function",
            "function": {"name": function["name"], "arguments": json.dumps(function["arguments"], ensure_ascii=False)},
        })
    out: list[dict] = [{"role": "assistant", "tool_calls": calls}]
    if message.get("reasoning"):
        # Only the exchange in progress carries its thought (`to_gemma_messages`); Gemma 4's
        # template renders `reasoning_content` there as the local prompt has it. Without it
        # the prompt after a tool's response lacks the thought that led to the call.
        out[0]["reasoning_content"] = message["reasoning"]
    # Responses are recorded in call order, so the n-th response answers the n-th call.
    for call, response in zip(calls, message.get("tool_responses", [])):
        out.append({"role": "tool", "tool_call_id": call["id"], "content": tool_message_content(response["response"])})
    if message.get("content"):
        out.append({"role": "assistant", "content": message["content"]})
    return out


def to_openai_messages(messages: list[dict], media: Sequence[MediaItem] = ()) -> list[dict]:
    """Gemma 4 message dicts (see `conversation.to_gemma_messages`) → OpenAI chat messages.
    Earlier turns' thoughts are not sent (the template drops them); the tool exchange in
    progress sends its thoughts as `reasoning_content`, the field Gemma 4's template renders
    (a server that drops it, as transformers serve 5.23 does, renders the round without it)."""
    media = list(media)
    out: list[dict] = []
    for position, message in enumerate(messages):
        if message.get("tool_calls"):
            out += _tool_round_messages(message, position)
        else:
            out.append({"role": message["role"], "content": _openai_content(message.get("content", ""), media)})
    return out


def request_body(request: GenerationRequest, model: str, messages: list[dict], refused: set[str] = frozenset()) -> dict:
    """Keyword arguments for `client.chat.completions.create`; `refused` names the optional
    fields this server does not take."""
    extra: dict[str, Any] = {
        "chat_template_kwargs": {"enable_thinking": request.spec.enable_thinking},
        "top_k": request.top_k,
    }
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": request.max_new_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
    }
    if request.spec.tools:
        body["tools"] = request.spec.tools
    if request.seed is not None:
        body["seed"] = request.seed
    if request.token_probabilities:
        body["logprobs"], body["top_logprobs"] = True, token_probabilities.TOP_ALTERNATIVES
    for name in refused:
        body.pop(name, None)
        extra.pop(name, None)
    if extra:
        body["extra_body"] = extra
    return body


# -- replies: stream chunks → events ---------------------------------------------------------------

class ChunkFields:
    """A streamed chunk's JSON object, read as the openai library's models are read
    (`chunk.choices[0].delta.content`; a field the server left out reads None; extra fields
    by name in `model_extra`), without building those models: the library's construction of a
    model for every chunk cost the server more than all its other work per relayed token."""

    __slots__ = ("_data",)

    def __init__(self, data: dict):
        self._data = data

    def __getattr__(self, name: str):
        return _fields(self._data.get(name))

    @property
    def model_extra(self) -> dict:
        return self._data


def _fields(value):
    if isinstance(value, dict):
        return ChunkFields(value)
    if isinstance(value, list):
        return [_fields(item) for item in value]
    return value


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


def tool_call_from_json(call_id: str, name: str, arguments: str) -> ToolCall:
    """A call as the server sent it: `arguments` is a JSON object in a string."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as err:
        return ToolCall(name=name, arguments=None, raw=arguments, error=f"the arguments are not valid JSON ({err})",
                        id=call_id)
    if not isinstance(parsed, dict):
        return ToolCall(name=name, arguments=None, raw=arguments, error="the arguments are not a JSON object",
                        id=call_id)
    return ToolCall(name=name, arguments=parsed, raw=f"{name}({json.dumps(parsed, ensure_ascii=False)})", id=call_id)


def _delta_reasoning(delta) -> str:
    """vLLM and SGLang name the field `reasoning_content` (newer vLLM: `reasoning`); it is not
    part of OpenAI's schema, so it arrives as an extra field."""
    extra = delta.model_extra or {}
    return extra.get("reasoning_content") or extra.get("reasoning") or ""


# The fields of a delta that carries only text (`ReplyAssembler.feed_data`); any other is null.
_TEXT_DELTA_KEYS = frozenset({"role", "content"})


@dataclass
class ReplyAssembler:
    """Turns one streamed reply into events. `feed` each chunk; `finish` gives the closing
    events and the Done. `parser` reads the content (see the module docstring)."""

    parser: ReplyParser
    started: float
    stats: ReplyStats = field(default_factory=ReplyStats)
    finish_reason: str | None = None
    reasoning: str = ""
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    emitted_calls: list[ToolCall] = field(default_factory=list)
    tokens: list = field(default_factory=list)  # TokenProbability, where the server sends logprobs
    guard: RepetitionGuard = field(default_factory=lambda: RepetitionGuard(0))

    @property
    def repeating(self) -> bool:
        return self.guard.period is not None

    @property
    def received_anything(self) -> bool:
        return bool(self.reasoning or self.parser.raw or self.calls)

    def feed(self, chunk) -> list[Event]:
        now = time.perf_counter() - self.started
        if chunk.usage is not None:
            self.stats.prompt_tokens = chunk.usage.prompt_tokens or 0
            self.stats.generated_tokens = chunk.usage.completion_tokens or 0
        events: list[Event] = []
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if reasoning := _delta_reasoning(delta):
                self.reasoning += reasoning
                events.append(ThinkingDelta(reasoning))
                self.guard.feed(reasoning)
            if delta.content:
                events += self.parser.feed(delta.content)
                self.guard.feed(delta.content)
            for call_delta in delta.tool_calls or []:
                events += self._feed_call(call_delta)
                if call_delta.function is not None:
                    self.guard.feed((call_delta.function.name or "") + (call_delta.function.arguments or ""))
            if choice.logprobs is not None and choice.logprobs.content:
                kind = "thought" if reasoning else "call" if delta.tool_calls else "answer"
                self.tokens += token_probabilities.from_openai(choice.logprobs.content, kind)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        if events and self.stats.time_to_first_token is None:
            self.stats.time_to_first_token = now
        self.stats.duration = now
        return events

    def feed_data(self, data: dict) -> list[Event]:
        """`feed` for a chunk as the JSON object the server sent. The chunk nearly every token
        comes in (one choice whose delta holds text and nothing else: no reasoning, call,
        logprobs, finish reason or usage; SGLang spells the absent ones as null) is read
        directly, as `feed` reads it; any other goes through `feed`. Reading it through
        ChunkFields was a good part of the server's work per relayed token."""
        choices = data.get("choices")
        choice = choices[0] if type(choices) is list and choices else None
        delta = choice.get("delta") if type(choice) is dict else None
        if (type(delta) is not dict or data.get("usage") is not None or choice.get("finish_reason")
                or choice.get("logprobs") is not None
                or not all(value is None for name, value in delta.items() if name not in _TEXT_DELTA_KEYS)):
            return self.feed(_fields(data))
        now = time.perf_counter() - self.started
        events: list[Event] = []
        if content := delta.get("content"):
            events = self.parser.feed(content)
            self.guard.feed(content)
        if events and self.stats.time_to_first_token is None:
            self.stats.time_to_first_token = now
        self.stats.duration = now
        return events

    def _feed_call(self, call_delta) -> list[Event]:
        """Calls arrive by index, their arguments possibly in pieces; a call is complete when
        the next one starts or the stream ends."""
        events: list[Event] = []
        call = self.calls.get(call_delta.index)
        if call is None:
            events += self._complete_calls()
            call = self.calls[call_delta.index] = _PendingCall()
            events.append(ToolCallStarted())
        call.id = call_delta.id or call.id
        if call_delta.function is not None:
            call.name += call_delta.function.name or ""
            call.arguments += call_delta.function.arguments or ""
        return events

    def _complete_calls(self) -> list[Event]:
        done = len(self.emitted_calls)
        pending = sorted(self.calls)[done:]
        for index in pending:
            call = self.calls[index]
            self.emitted_calls.append(tool_call_from_json(call.id or f"call_{index}", call.name, call.arguments))
        return self.emitted_calls[done:]

    def flush(self) -> list[Event]:
        """Text held back by the parser (a possible marker at a chunk edge), for a stream that
        breaks off: what was streamed stays with the user."""
        return self.parser.finish()[0]

    def finish(self, cancelled: bool) -> tuple[list[Event], Done]:
        stopped = cancelled or self.repeating  # a loop's calls are not run either
        events = [] if stopped else self._complete_calls()
        parser_events, parsed = self.parser.finish()
        events += parser_events
        calls = [] if stopped else self.emitted_calls + parsed.tool_calls
        self.stats.stop_reason = ("cancelled" if cancelled else "repetition" if self.repeating
                                  else _stop_reason(self.finish_reason, bool(calls)))
        reasoning = "\n".join(text for text in (self.reasoning.strip(), parsed.reasoning) if text)
        incomplete = parsed.incomplete
        if incomplete is None and self.stats.stop_reason == "length" and reasoning and not parsed.content and not calls:
            incomplete = "thought"  # the token limit came before the answer
        done = Done(stats=self.stats, raw=self.parser.raw, reasoning=reasoning, content=parsed.content,
                    tool_calls=calls, incomplete=incomplete, token_probabilities=self.tokens or None)
        return events, done


def _stop_reason(finish_reason: str | None, has_calls: bool) -> str:
    reason = _STOP_REASONS.get(finish_reason or "", finish_reason or "stop")
    # Some servers say "stop" after tool calls; what matters to the chat is that calls came.
    return "tool_call" if has_calls and reason == "stop" else reason


# -- errors: openai exceptions → messages the user can act on ------------------------------------

def server_message(err) -> str:
    """The server's own words, from the shapes FastAPI, vLLM and OpenAI use."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            text = inner.get("message") or inner.get("detail") or body.get("detail")
        else:
            text = inner
        if text:
            return text if isinstance(text, str) else json.dumps(text)
    if isinstance(body, str) and body:
        return body
    return getattr(err, "message", "") or str(err)


def _clause(text: str) -> str:
    """Server text set inside our own sentence, in parentheses: without its closing period."""
    return text.strip().rstrip(".")


def _connection_cause(err: BaseException) -> str:
    cause = err.__cause__ or err.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    return _clause(str(cause)) if cause is not None and str(cause) else type(err).__name__


# A path segment that names an API ("v1", "openai", "api"), not a key.
_PLAIN_SEGMENT = re.compile(r"[A-Za-z]{0,16}[0-9]{0,4}")


def shown_url(url: str) -> str:
    """The server's address as every visitor may see it: scheme, host and port, and the path
    only where it is plain words (`/v1`). A user name, password, query or fragment (each can
    carry a key: https://user:token@host/v1, ?api_key=...) is never shown; the log keeps them."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "(the server)"
    if not parts.scheme or not host:
        return "(the server)"
    path = parts.path.rstrip("/")
    if path and not all(_PLAIN_SEGMENT.fullmatch(segment) for segment in path.strip("/").split("/")):
        path = "/…"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}{path}"


def scrub(text: str, url: str, api_key: str | None = None) -> str:
    """`text` without the secrets `url` (or the API key) may hold: an error's own text (the
    HTTP library's, the server's) can quote the address it was given."""
    parts = urllib.parse.urlsplit(url) if url else None
    secrets = {url, url.rstrip("/"), api_key or ""}
    if parts is not None:
        secrets |= {parts.username or "", parts.password or "", parts.query, parts.fragment,
                    *(value for _, value in urllib.parse.parse_qsl(parts.query))}
        if shown_url(url).endswith("/…"):
            secrets.add(parts.path)
    secrets |= {urllib.parse.unquote(secret) for secret in secrets}
    secrets.discard(DEFAULT_API_KEY)
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, shown_url(url) if secret.startswith(url.rstrip("/")) else "…")
    return text


def explain_error(err: Exception, base_url: str, model: str, timeout: float) -> str:
    """One sentence (or two) saying what went wrong and what to do. Mid-stream failures are
    worded by the caller, which knows a reply was under way."""
    if isinstance(err, openai.APITimeoutError):
        return (f"The server at {base_url} did not answer within {timeout:g} s. It may be busy or still loading "
                "the model: try again, or raise --request-timeout.")
    if isinstance(err, openai.APIConnectionError):
        return (f"Cannot reach the server at {base_url} ({_connection_cause(err)}). "
                "Check that it is running and that --base-url is right.")
    if isinstance(err, openai.APIStatusError):
        status, text = err.status_code, _clause(server_message(err))
        if status in (401, 403):
            return (f"The server at {base_url} refused the request (HTTP {status}: {text}). "
                    "Check the API key (--api-key or OPENAI_API_KEY).")
        if model and model in text:
            return f"The server at {base_url} does not serve the model '{model}' (HTTP {status}: {text}). Check --model."
        if status == 404:
            return (f"The server at {base_url} has no chat-completions endpoint there (HTTP 404: {text}). "
                    "--base-url usually ends in /v1, e.g. http://127.0.0.1:8000/v1.")
        if status in (400, 413, 422):
            return (f"The server rejected the request (HTTP {status}): {text}. If it names an attachment type or a "
                    "setting, this server or model does not support it: remove the attachment or change the setting.")
        return (f"The server at {base_url} failed (HTTP {status}: {text}). Its log says why; an attachment "
                "type it cannot decode is a common cause.")
    if isinstance(err, openai.APIError):  # an error event inside the stream
        return f"The server reported an error: {server_message(err)}"
    return f"Talking to the server at {base_url} failed: {type(err).__name__}: {err}"


def refused_fields(err: Exception) -> set[str]:
    """The optional fields a 400/422 answer names: the server does not take them."""
    if not isinstance(err, (openai.BadRequestError, openai.UnprocessableEntityError)):
        return set()
    text = server_message(err)
    return {name for name in OPTIONAL_FIELDS if name in text}


# -- the engine ---------------------------------------------------------------------------------------

def local_model_files(name: str) -> tuple[str, bool] | None:
    """Where this machine can read the served model's own config and processor: a local folder,
    the Hub cache, or the Hub when reachable; None otherwise. (The bundled model is never a
    stand-in: its tokenizer would give wrong counts for another model.)"""
    from transformers import AutoConfig

    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser()), True
    for local_only in (True, False):
        if not local_only and not hub_reachable():
            return None
        try:
            AutoConfig.from_pretrained(name, local_files_only=local_only)
            return name, local_only
        except Exception:  # noqa: BLE001 - a served name need not be a Hub id (vLLM's --served-model-name)
            continue
    return None


class OpenAIEngine(Engine):
    """A model behind an OpenAI-compatible chat-completions endpoint."""

    def __init__(self, settings: Settings):
        self.base_url = (settings.base_url or "").rstrip("/")
        self.shown_url = shown_url(self.base_url)  # what visitors see of it, in the status and every message
        self._api_key = settings.api_key
        self.timeout = settings.request_timeout
        self.requested_model = settings.model
        self.model = settings.model or ""
        # No retries: a failure is reported at once, and Stop is never delayed by backoff.
        self.client = openai.OpenAI(base_url=self.base_url, api_key=settings.api_key or DEFAULT_API_KEY,
                                    timeout=settings.request_timeout, max_retries=0)
        self.status = ModelStatus(requested=settings.model or "(the server's model)", name=self.model,
                                  source="remote", device=self.shown_url)
        self.processor = None
        self.refused: set[str] = set()
        self._returns_logprobs = False
        self._parse_tokenizer = None

    # -- load: check the server, learn the model -----------------------------------------------------

    def load(self) -> "OpenAIEngine":
        listed = self._list_models()
        self.model = self.requested_model or self._first_model(listed)
        self._probe()
        self.processor, config = self._load_model_files()
        if config is not None:
            self.modalities = model_family.modalities(config)
        context = _served_context(listed, self.model) or _config_context(config)
        notes = [f"The server refuses {name}: {OPTIONAL_FIELDS[name]}" for name in sorted(self.refused)]
        if self.processor is None:
            notes.append("The model's processor is not available here, so token counts come from the server only")
        self.status = ModelStatus(requested=self.requested_model or "(the server's model)", name=self.model,
                                  source="remote", device=self.shown_url, notice="; ".join(notes),
                                  context_length=context)
        self.token_probabilities_note = "" if self._returns_logprobs else NO_LOGPROBS
        self._parse_tokenizer = self.processor.tokenizer if self.processor is not None else _bundled_tokenizer()
        log.info("ready: %s", self.status.describe())
        return self

    def _list_models(self) -> list:
        """The server's model list; [] when it cannot list them (transformers serve without a
        Hub cache answers 500) — the probe then decides."""
        try:
            return list(self.client.models.list())
        except (openai.APIConnectionError, openai.AuthenticationError, openai.PermissionDeniedError,
                openai.NotFoundError) as err:
            raise ModelLoadError(self._say(explain_error(err, self.shown_url, "", self.timeout))) from err
        except openai.APIError as err:
            if not self.requested_model:
                raise ModelLoadError(self._say(f"The server at {self.shown_url} could not list its models "
                                               f"({_clause(server_message(err))}). Pass the name it serves with "
                                               "--model.")) from err
            log.warning("the server could not list its models: %s", server_message(err))
            return []

    def _first_model(self, listed: list) -> str:
        if not listed:
            raise ModelLoadError(f"The server at {self.shown_url} lists no models. Pass the name it serves with --model.")
        return listed[0].id

    def _probe(self) -> None:
        """A one-token reply: proves the model is served, and finds which optional fields the
        server refuses (at most one retry per field)."""
        probe = GenerationRequest(PromptSpec([{"role": "user", "content": "Hi"}]), max_new_tokens=1, temperature=0,
                                  token_probabilities=True, seed=0)
        while True:
            body = request_body(probe, self.model, to_openai_messages(probe.spec.messages), self.refused)
            try:
                self._returns_logprobs = False  # some servers accept the field and ignore it
                for chunk in self.client.chat.completions.create(**body):
                    self._returns_logprobs |= any(c.logprobs is not None and bool(c.logprobs.content)
                                                  for c in chunk.choices)
                return
            except openai.APIError as err:
                newly_refused = refused_fields(err) - self.refused
                if not newly_refused:
                    raise ModelLoadError(self._say(explain_error(err, self.shown_url, self.model, self.timeout))) from err
                log.warning("the server refuses %s; leaving it out", ", ".join(sorted(newly_refused)))
                self.refused |= newly_refused

    def _load_model_files(self):
        """(processor, config) of the served model when this machine can read them, else (None, None)."""
        from transformers import AutoConfig, AutoProcessor

        where = local_model_files(self.model)
        if where is None:
            log.info("no local processor for %s: the inspector shows no exact counts", self.model)
            return None, None
        path, local_only = where
        try:
            return (AutoProcessor.from_pretrained(path, local_files_only=local_only),
                    AutoConfig.from_pretrained(path, local_files_only=local_only))
        except Exception as err:  # noqa: BLE001 - counts are a bonus; the chat works without them
            log.warning("could not load the processor of %s: %s", self.model, err)
            return None, None

    # -- stream ------------------------------------------------------------------------------------

    def stream(self, request: GenerationRequest, cancel: threading.Event) -> Iterator[Event]:
        started = time.perf_counter()
        try:
            messages = to_openai_messages(request.spec.messages, request.media)
        except PayloadError as err:
            yield EngineError(str(err))
            return
        reply = ReplyAssembler(ReplyParser(self._parse_tokenizer, ""), started,
                               guard=RepetitionGuard(request.repetition_guard))
        try:
            response = self._stream_chunks(request_body(request, self.model, messages, self.refused))
        except openai.APIError as err:
            yield EngineError(self._say(explain_error(err, self.shown_url, self.model, self.timeout)))
            return
        try:
            for chunk in response:
                if cancel.is_set():
                    break
                yield from reply.feed_data(chunk) if type(chunk) is dict else reply.feed(_fields(chunk))
                if reply.repeating:
                    break
        except openai.APIError as err:
            yield from reply.flush()
            yield EngineError(self._say(self._explain_cut(err, reply)))
            return
        finally:
            response.close()  # on Stop this tells the server to stop generating
        if reply.finish_reason is None and not cancel.is_set() and not reply.repeating:
            yield from reply.flush()
            yield EngineError(f"The server at {self.shown_url} ended the stream before the reply was finished "
                              "(no finish reason). What arrived is kept; ask again to continue.")
            return
        events, done = reply.finish(cancelled=cancel.is_set())
        yield from events
        yield done

    def _stream_chunks(self, body: dict) -> openai.Stream:
        """`client.chat.completions.create(**body)`, the same request with the same errors, its
        chunks as the JSON objects the server sent (see ChunkFields)."""
        body = dict(body)
        body.update(body.pop("extra_body", None) or {})
        return self.client.post("/chat/completions", body=body, cast_to=object, stream=True,
                                stream_cls=openai.Stream[object])

    def _say(self, message: str) -> str:
        """A message for visitors, with no secret of the address or the key in it."""
        return scrub(message, self.base_url, self._api_key)

    def _explain_cut(self, err: Exception, reply: ReplyAssembler) -> str:
        if not reply.received_anything:
            return explain_error(err, self.shown_url, self.model, self.timeout)
        if isinstance(err, openai.APITimeoutError):
            why = f"no data for {self.timeout:g} s"
        elif isinstance(err, openai.APIConnectionError):
            why = _connection_cause(err)
        else:
            why = _clause(server_message(err))
        return (f"The reply from {self.shown_url} was cut off mid-stream ({why}). "
                "What arrived is kept; ask again to continue.")


def _served_context(listed: list, model: str) -> int | None:
    """vLLM lists each model's `max_model_len`: the context the server actually allows."""
    for entry in listed:
        if entry.id == model:
            value = (entry.model_extra or {}).get("max_model_len")
            return int(value) if value else None
    return None


def _config_context(config) -> int | None:
    if config is None:
        return None
    text_config = getattr(config, "text_config", config)
    return getattr(text_config, "max_position_embeddings", None)


def _bundled_tokenizer():
    """Only to read Gemma 4 markers a server leaves in its output: every Gemma 4 model writes
    the same ones. Never used for counting."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(BUNDLED_MODEL)


__all__ = ["OpenAIEngine", "ReplyAssembler", "explain_error", "request_body", "to_openai_messages"]
