"""The chat's behaviour, independent of layout: staging a message, streaming a turn,
stop, retry, undo, edit, client tools, new conversation. `ui.py` wires these to components.

Every handler takes the session's conversation and returns a new one; the conversation is
never rebuilt from what the Chatbot displays.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import gradio as gr

from .chat import ChatOptions, Snapshot, TurnRunner
from .config import Settings
from .conversation import AssistantTurn, Conversation, UserTurn
from .display import render
from .engine import Engine
from .events import ToolCall
from .inspector import SingleFlight, counting_processor
from .media import MediaError, MediaItem, MediaLimits, load_media
from .tools import ToolRegistry, ToolSchemaError, default_registry

log = logging.getLogger(__name__)

EMPTY_INSPECTOR = ("<p class='inspector-empty'>Type a message or attach a file: what Gemma 4 will receive, "
                   "and what each part costs in tokens, shows here before you send.</p>")

# Streamed updates per second at most: enough to look live, few enough that a fast model
# is never slowed by re-rendering the chat (tokens in between arrive in the next update).
MAX_UPDATES_PER_SECOND = 25
# ...and at most this share of the time spent sending them. An update re-renders, diffs and
# sends the whole chat, and Gradio re-checks every file in it, so its cost grows with the
# chat: ~3 ms for a short text chat, ~12 ms with 4 images, ~50 ms with 12 (2 busy CPU
# cores). That work competes with generation for the CPU (and Python's lock), and the app
# should cost under 5% of the model's speed: long chats get fewer, larger updates.
MAX_UPDATE_SHARE = 0.04
# ...but never less than one a second, however costly, so the reply is seen to progress.
MAX_UPDATE_INTERVAL = 1.0


@dataclass
class Draft:
    """What the user typed and attached, kept so that a failed send loses nothing."""

    text: str
    files: list[str]

    @classmethod
    def from_value(cls, value) -> "Draft":
        value = value or {}
        files = [f if isinstance(f, str) else f.get("path") for f in (value.get("files") or [])]
        return cls(str(value.get("text") or ""), [f for f in files if f])

    def as_value(self) -> dict:
        return {"text": self.text, "files": list(self.files)}

    @property
    def empty(self) -> bool:
        return not self.text.strip() and not self.files


class DecodedUploads:
    """Each upload decoded once, whoever asks: the live inspector when it is attached, then
    `stage` and `respond` when it is sent. Attachments not sent yet are held here (a
    message's worth at most); once sent, the conversation holds them, and this finds them
    only while some conversation still does: a conversation's media are freed with it."""

    def __init__(self):
        self._in_use: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._unsent: OrderedDict[tuple, MediaItem] = OrderedDict()  # oldest first
        self._lock = threading.Lock()
        self._decoding = SingleFlight()

    def get(self, path: str, limits: MediaLimits) -> MediaItem:
        try:
            stat = os.stat(path)
        except OSError:
            raise MediaError(f"{os.path.basename(path)}: the upload is gone; attach it again.") from None
        key = (path, stat.st_size, stat.st_mtime, limits)
        with self._decoding(key):
            with self._lock:
                item = self._in_use.get(key)
            if item is None:
                item = load_media(path, limits)
                with self._lock:
                    self._in_use[key] = item
                    self._unsent[key] = item
                    while len(self._unsent) > limits.max_files_per_message:
                        self._unsent.popitem(last=False)
            return item

    def sent(self, items: list[MediaItem]) -> None:
        """`items` now belong to a conversation, which keeps them as long as it needs them."""
        with self._lock:
            for key in [key for key, item in self._unsent.items() if any(item is sent for sent in items)]:
                del self._unsent[key]


_UPLOADS = DecodedUploads()


def decode_file(path: str, limits: MediaLimits) -> MediaItem:
    """Decode once per file: the composer's live inspector and the send share the result."""
    return _UPLOADS.get(path, limits)


def decode_files(paths: list[str], limits: MediaLimits) -> list[MediaItem]:
    if len(paths) > limits.max_files_per_message:
        raise MediaError(f"{len(paths)} files attached; at most {limits.max_files_per_message} per message.")
    return [decode_file(p, limits) for p in paths]


class ChatSession:
    """Handlers shared by all users; per-user state lives in the values passed in."""

    def __init__(self, engine: Engine, settings: Settings, registry: ToolRegistry | None = None):
        self.engine = engine
        self.settings = settings
        self.registry = registry or default_registry()
        self._cancels: dict[str, threading.Event] = {}
        self._counting: tuple = (None, None)  # (the engine's processor, its counting copy)

    # -- options -----------------------------------------------------------------------------

    def registry_for(self, declared: list[dict] | None) -> ToolRegistry:
        """The shared tools plus this session's declared (client) tools."""
        if not declared:
            return self.registry
        registry = ToolRegistry()
        for spec in self.registry.specs():
            registry.adopt(spec)
        for schema in declared:
            try:
                registry.declare(schema)
            except ToolSchemaError as err:
                log.warning("skipping a declared tool: %s", err)
        return registry

    def options(self, system_prompt, thinking, max_new_tokens, temperature, top_p, top_k, image_budget,
                enabled_tools, max_tool_rounds) -> ChatOptions:
        return ChatOptions(
            system_prompt=system_prompt or "",
            thinking=bool(thinking),
            max_new_tokens=max(1, min(int(max_new_tokens), self.settings.max_new_tokens_cap)),
            temperature=float(temperature),
            top_p=float(top_p),
            top_k=int(top_k),
            image_budget=int(image_budget),
            enabled_tools=list(enabled_tools or []),
            max_tool_rounds=max(1, int(max_tool_rounds)),
            tool_timeout=self.settings.tool_timeout,
        )

    # -- sending -----------------------------------------------------------------------------

    def user_turn(self, draft: Draft) -> UserTurn:
        """Decode the attachments; raises MediaError with a message for the user."""
        media = decode_files(draft.files, self.settings.limits)
        for item in media:
            if item.kind not in self.engine.modalities:
                raise MediaError(f"{item.name}: this model does not take {item.kind} input.")
        return UserTurn(draft.text.strip(), media)

    def stage(self, value, conversation: Conversation):
        """Composer submit: check the draft before anything else happens. A bad file keeps the
        draft in the composer and warns; a good draft shows at once and goes to `respond`."""
        draft = Draft.from_value(value)
        if draft.empty:
            return gr.update(), None, gr.update()
        try:
            turn = self.user_turn(draft)
        except MediaError as err:
            gr.Warning(str(err))
            return gr.update(), None, render(conversation, notice=str(err))
        for item in turn.media:
            if item.warning:
                gr.Warning(item.warning)
        preview = Conversation(conversation.turns + [turn])
        return gr.update(value=None, interactive=False), draft.as_value(), render(preview)

    def respond(self, message, conversation: Conversation, declared, system_prompt="", thinking=False,
                max_new_tokens=1024, temperature=1.0, top_p=0.95, top_k=64, image_budget=280, enabled_tools=(),
                max_tool_rounds=5, request: gr.Request = None):
        """The /chat endpoint: a message (text and files) in, the streamed chat out."""
        option_values = (system_prompt, thinking, max_new_tokens, temperature, top_p, top_k, image_budget,
                         enabled_tools, max_tool_rounds)
        draft = Draft.from_value(message)
        if draft.empty:
            yield render(conversation), conversation, None
            return
        try:
            turn = self.user_turn(draft)
        except MediaError as err:
            yield render(conversation, notice=str(err)), conversation, draft.as_value()
            return
        _UPLOADS.sent(turn.media)
        options = self.options(*option_values)
        started = Conversation(conversation.turns + [turn])
        yield from self._stream(started, options, declared, request, on_fail=(conversation, draft))

    def retry(self, conversation: Conversation, declared, *option_values, request: gr.Request = None):
        """Regenerate the last reply (the turns after the last user message go)."""
        index = conversation.last_user_index
        if index is None:
            yield render(conversation), conversation, None
            return
        trimmed = Conversation(conversation.turns[: index + 1])
        yield from self._stream(trimmed, self.options(*option_values), declared, request, on_fail=None)

    def edit(self, data: gr.EditData, conversation: Conversation, declared, *option_values,
             request: gr.Request = None):
        """Edit the last user message's text and regenerate from there."""
        index = conversation.last_user_index
        if index is None or data.index != self.last_user_text_position(conversation):
            gr.Warning("Only the last message you sent can be edited.")
            yield render(conversation), conversation, None
            return
        last = conversation.turns[index]
        edited = Conversation(conversation.turns[:index] + [UserTurn(str(data.value).strip(), last.media)])
        yield from self._stream(edited, self.options(*option_values), declared, request, on_fail=None)

    def undo(self, conversation: Conversation):
        """Take back the last message: the chat returns to before it, the draft to the composer."""
        index = conversation.last_user_index
        if index is None:
            return render(conversation), conversation, gr.update()
        last = conversation.turns[index]
        kept = Conversation(conversation.turns[:index])
        draft = Draft(last.text, [m.path for m in last.media])
        return render(kept), kept, gr.update(value=draft.as_value())

    def answer_tool(self, answer: str, conversation: Conversation, declared, system_prompt="", thinking=False,
                    max_new_tokens=1024, temperature=1.0, top_p=0.95, top_k=64, image_budget=280,
                    enabled_tools=(), max_tool_rounds=5, request: gr.Request = None):
        """The /tool_result endpoint: the user typed a client tool's result (JSON, or text)."""
        option_values = (system_prompt, thinking, max_new_tokens, temperature, top_p, top_k, image_budget,
                         enabled_tools, max_tool_rounds)
        if self.pending_client_call(conversation) is None:
            gr.Warning("No tool call is waiting for a result.")
            yield render(conversation), conversation, None
            return
        text = (answer or "").strip()
        try:
            response = json.loads(text) if text else ""
        except json.JSONDecodeError:
            response = text
        resumed = TurnRunner(self.engine, self.registry_for(declared)).answer_client_tool(conversation, response)
        yield from self._stream(resumed, self.options(*option_values), declared, request, on_fail=None)

    def cancel_tool(self, conversation: Conversation, declared, system_prompt="", thinking=False,
                    max_new_tokens=1024, temperature=1.0, top_p=0.95, top_k=64, image_budget=280,
                    enabled_tools=(), max_tool_rounds=5, request: gr.Request = None):
        """The /cancel_tool endpoint: tell the model the user gave up on its call."""
        option_values = (system_prompt, thinking, max_new_tokens, temperature, top_p, top_k, image_budget,
                         enabled_tools, max_tool_rounds)
        if self.pending_client_call(conversation) is None:
            yield render(conversation), conversation, None
            return
        runner = TurnRunner(self.engine, self.registry_for(declared))
        resumed = runner.answer_client_tool(conversation, None, cancelled=True)
        yield from self._stream(resumed, self.options(*option_values), declared, request, on_fail=None)

    def stop(self, request: gr.Request = None) -> None:
        flag = self._cancels.get(_session(request))
        if flag is not None:
            flag.set()

    # -- streaming ---------------------------------------------------------------------------

    def _stream(self, conversation: Conversation, options: ChatOptions, declared, request,
                on_fail: tuple[Conversation, Draft] | None) -> Iterator[tuple]:
        """Run the turn and yield (chat, conversation, draft to give back) at a bounded rate.
        If the engine fails before producing anything, the conversation is handed back as it
        was and the draft returns to the composer."""
        session = _session(request)
        cancel = threading.Event()
        self._cancels[session] = cancel
        runner = TurnRunner(self.engine, self.registry_for(declared))
        yield render(conversation), conversation, None
        pacer = UpdatePacer()
        snapshot: Snapshot | None = None
        try:
            for snapshot in runner.run(conversation, options, cancel):
                if snapshot.live is not None and not pacer.due():
                    continue
                if snapshot.error:
                    break
                started = time.perf_counter()
                yield render(snapshot.conversation, snapshot.live), snapshot.conversation, None
                pacer.sent(started)
        finally:
            if self._cancels.get(session) is cancel:
                del self._cancels[session]
        if snapshot is not None and snapshot.error:
            gr.Warning(snapshot.error)
            if snapshot.conversation is not conversation:  # the turn kept a partial reply and says why
                yield render(snapshot.conversation), snapshot.conversation, None
            elif on_fail is not None:  # nothing was produced: the message goes back to the composer
                before, draft = on_fail
                yield render(before, notice=snapshot.error), before, draft.as_value()
            else:
                yield render(conversation, notice=snapshot.error), conversation, None

    # -- the inspector ---------------------------------------------------------------------------

    def inspect(self, value, conversation: Conversation, declared, show_ids: bool, *option_values) -> "InspectorView":
        """Layers and counts for the conversation plus the draft, before it is sent."""
        from . import inspector
        from .chat import build_spec
        from .prompt import model_inputs, template_text

        processor = self.engine.processor
        if processor is None:
            return InspectorView("", "", [], "", "", warning=(
                "The model's processor is not available here, so the prompt layers and exact counts "
                "cannot be shown. The server-reported usage appears with each reply."))
        options = self.options(*option_values)
        draft = Draft.from_value(value)
        warning = ""
        preview = conversation
        if not draft.empty:
            try:
                preview = Conversation(conversation.turns + [self.user_turn(draft)])
            except MediaError as err:
                warning = str(err)
        spec = build_spec(preview, options, self.registry_for(declared))
        if not spec.messages:
            return InspectorView(EMPTY_INSPECTOR, inspector.messages_layer(spec, []), [], "", "", warning)
        raw = template_text(processor, spec)
        inputs = model_inputs(self._counting_processor(processor), spec)
        media = preview.media()
        counts = inspector.count_tokens(processor, inputs, media, options.image_budget, self.engine.context_length)
        tokens = [t for t in processor.tokenizer.all_special_tokens]
        return InspectorView(
            counts=inspector.counts_html(counts),
            messages=inspector.messages_layer(spec, media),
            template=inspector.highlight_spans(raw, tokens),
            template_raw=raw,
            expanded=inspector.expanded_layer(processor, inputs, show_ids),
            warning=warning,
        )

    def _counting_processor(self, processor):
        """The inspector runs on every keystroke: it counts with a copy of the processor that
        expands each medium once (exact counts, without re-processing the history's media)."""
        if self._counting[0] is not processor:
            self._counting = (processor, counting_processor(processor))
        return self._counting[1]

    # -- queries for the layout ------------------------------------------------------------------

    @staticmethod
    def pending_client_call(conversation: Conversation) -> ToolCall | None:
        turn = conversation.turns[-1] if conversation.turns else None
        if isinstance(turn, AssistantTurn) and turn.rounds:
            round_ = turn.rounds[-1]
            if round_.results and round_.results[-1].status == "client":
                return round_.calls[len(round_.results) - 1]
        return None

    @staticmethod
    def last_user_text_position(conversation: Conversation) -> int | None:
        """Where the last user text bubble sits in the rendered chat."""
        messages = render(conversation)
        for i in range(len(messages) - 1, -1, -1):
            if messages[i]["role"] == "user" and isinstance(messages[i]["content"], str):
                return i
        return None


class UpdatePacer:
    """When the next streamed update may go: spaced so that sending updates takes at most
    MAX_UPDATE_SHARE of the time, within MAX_UPDATES_PER_SECOND and MAX_UPDATE_INTERVAL.
    An update costs what passes from rendering it until Gradio asks for the next one
    (Gradio postprocesses, diffs and sends it in between); a running average, so that one
    slow update (a garbage collection, say) does not stall the stream."""

    SMOOTHING = 0.3  # weight of the newest cost in the average

    def __init__(self):
        self._next = 0.0  # the first update goes at once: it shows the first token
        self._cost: float | None = None

    def due(self) -> bool:
        return time.perf_counter() >= self._next

    def sent(self, started: float) -> None:
        cost = time.perf_counter() - started
        self._cost = cost if self._cost is None else (1 - self.SMOOTHING) * self._cost + self.SMOOTHING * cost
        interval = min(max(self._cost / MAX_UPDATE_SHARE, 1 / MAX_UPDATES_PER_SECOND), MAX_UPDATE_INTERVAL)
        self._next = started + interval


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "default"


# -- the inspector, following the draft -------------------------------------------------------

@dataclass
class InspectorView:
    counts: str  # HTML
    messages: str  # JSON
    template: list  # HighlightedText value
    template_raw: str
    expanded: str
    warning: str = ""
