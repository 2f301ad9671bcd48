"""The chat's behaviour, independent of layout: staging a message, streaming a turn,
stop, retry, undo, edit, client tools, new conversation, tools declared by the user, saving
and loading. `app.py` lays out the components and wires them to these handlers.

One `SharedChatHandlers` serves every user; it holds only what no request can change (the
engine, the settings, the built-in tools). What a user's requests change lives in that
user's `UserSession` and `Conversation` (Gradio keeps one of each per browser tab or API
client). Every handler takes the conversation and returns a new one; the conversation is
never rebuilt from what the Chatbot displays.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from gemma4_ui.config import BUNDLED_TRAINED, MediaLimits, Settings
from gemma4_ui.core import transcript
from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
from gemma4_ui.core.events import ToolCall
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.prompt import build_spec, model_inputs, template_text
from gemma4_ui.core.reply_data import reply_data
from gemma4_ui.engines.base import Engine
from gemma4_ui.inspector import probabilities_view
from gemma4_ui.inspector.layers import SingleFlight, counting_processor
from gemma4_ui.media.decoding import MediaError, MediaItem
from gemma4_ui.media.files import load_upload
from gemma4_ui.tools.registry import ToolRegistry, ToolSchemaError, default_registry
from gemma4_ui.turns import Snapshot, TurnRunner
from gemma4_ui.web.display import StreamingRender, beside_history, edited_text, render, settled, turn_of_message
from gemma4_ui.web.inspector_updates import InspectorShown
from gemma4_ui.web.safe_markdown import code_block, literal, toast_text

log = logging.getLogger(__name__)


EMPTY_INSPECTOR = ("<p class='inspector-empty'>Type a message or attach a file: what Gemma 4 will receive, "
                   "and what each part costs in tokens, shows here before you send.</p>")

# Streamed updates per second at most: enough to look live (a reader sees a smooth stream
# from about 10), few enough that a fast model is never slowed by them (tokens in between
# arrive in the next update).
MAX_UPDATES_PER_SECOND = 15
# ...and at most this share of the wall time spent sending them. An update renders, diffs and
# sends the live part of the chat (display.py), so its cost does not grow with the history;
# it grows with what this turn holds (Gradio re-checks every file in it) and, measured as
# wall time, it includes waiting for the CPU and Python's lock while the model runs (~3 ms
# for text on an idle machine, 15-20 ms with the browser and the model busy on 2 cores).
# Costly turns get fewer, larger updates.
MAX_UPDATE_SHARE = 0.3
# ...but never less than one a second, however costly, so the reply is seen to progress.
MAX_UPDATE_INTERVAL = 1.0
# The bundled model with random weights writes noise until the limit: offline, while the
# bundle is untrained, a reply stops here unless the operator set a length.
UNTRAINED_DEMO_MAX_NEW_TOKENS = 128
# The trained bundle was trained and measured greedy; sampled at temperature 1, its four layers
# miscount media and quote the wrong tool result. Greedy is its default unless the operator set one.
TRAINED_DEMO_TEMPERATURE = 0.0


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
    """One user's uploads, each decoded once whoever asks: the live inspector when it is
    attached, then `stage` and `respond` when it is sent. Attachments not sent yet are held
    here (a message's worth at most); once sent, the conversation holds them, and this finds
    them only while some conversation still does: a conversation's media are freed with it."""

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
                item = load_upload(path, limits)
                with self._lock:
                    self._in_use[key] = item
                    self._unsent[key] = item
                    while len(self._unsent) > limits.max_files_per_message:
                        self._unsent.popitem(last=False)
            return item

    def decode(self, paths: list[str], limits: MediaLimits) -> list[MediaItem]:
        if len(paths) > limits.max_files_per_message:
            raise MediaError(f"{len(paths)} files attached; at most {limits.max_files_per_message} per message.")
        return [self.get(p, limits) for p in paths]

    def sent(self, items: list[MediaItem]) -> None:
        """`items` now belong to a conversation, which keeps them as long as it needs them."""
        with self._lock:
            for key in [key for key, item in self._unsent.items() if any(item is sent for sent in items)]:
                del self._unsent[key]


@dataclass(eq=False)
class TurnTicket:
    """One generating request: when it was submitted, and the flag that stops it."""

    submitted_at: float
    cancel: threading.Event = field(default_factory=threading.Event)


class TurnControl:
    """Stop and New conversation for one user, whatever state their turn is in: queued
    behind other users, generating, or running tools.

    Requests are ordered by when they were submitted: Stop stops every turn submitted
    before it (a queued one stops the moment it would have started), and a New
    conversation also hides whatever those turns still produce, so the fresh chat and the
    next message are not overwritten."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: list[TurnTicket] = []
        self._stopped_at = -math.inf
        self._reset_at = -math.inf
        self._last_finished: TurnTicket | None = None

    def begin(self, submitted_at: float | None = None) -> TurnTicket:
        ticket = TurnTicket(time.monotonic() if submitted_at is None else submitted_at)
        with self._lock:
            if ticket.submitted_at <= self._stopped_at:
                ticket.cancel.set()
            self._running.append(ticket)
        return ticket

    def end(self, ticket: TurnTicket) -> None:
        with self._lock:
            if ticket in self._running:
                self._running.remove(ticket)
            self._last_finished = ticket

    def stop(self) -> None:
        with self._lock:
            self._stopped_at = time.monotonic()
            for ticket in self._running:
                ticket.cancel.set()

    def reset(self) -> None:
        """A new conversation: stop, and let nothing from before reach the new one."""
        self.stop()
        with self._lock:
            self._reset_at = self._stopped_at

    def superseded(self, ticket: TurnTicket) -> bool:
        return ticket.submitted_at <= self._reset_at

    @property
    def settled(self) -> bool:
        """No turn runs, and the last one to finish belongs to the conversation shown (so the
        composer and Stop may be set for the next message)."""
        with self._lock:
            last = self._last_finished
            return not self._running and (last is None or not self.superseded(last))


class UserSession:
    """What one user's requests may change, and nobody else's: the tools they declared, the
    control of their turns, their uploads. Gradio keeps one per browser tab or API client;
    a new one starts empty (Gradio deep-copies the initial value for each session)."""

    def __init__(self, shared_tools: ToolRegistry | None = None):
        self._shared_tools = shared_tools
        self.declared: list[dict] = []  # schemas, in the order declared
        self.turns = TurnControl()
        self.uploads = DecodedUploads()
        self._tools: ToolRegistry | None = None
        # The conversation a turn on its way generates from (queued, or streaming): what the
        # inspector shows meanwhile, since the session's conversation is only updated as the
        # reply streams. (owner ticket, conversation); the owner is None while still staged.
        self.in_flight: tuple[TurnTicket | None, Conversation] | None = None
        self.probabilities_shown = False  # the token-probability view is open: replies record them
        # The turn (index) whose media the soft-token map shows, picked by clicking a message;
        # None: the draft's media, or else the latest message's.
        self.mapped_turn: int | None = None
        self.inspector = InspectorShown()  # what this page's inspector shows

    def __deepcopy__(self, memo) -> "UserSession":
        return UserSession(self._shared_tools)

    def tools(self) -> ToolRegistry:
        """The built-in tools (shared, read-only) and this user's declared ones."""
        if self._tools is None:
            registry = ToolRegistry()
            for spec in (self._shared_tools.specs() if self._shared_tools else []):
                registry.adopt(spec)
            self._tools = registry
        return self._tools

    def declare(self, schema: dict | str):
        """Declare a client tool for this user only; raises ToolSchemaError with the reason."""
        trial = ToolRegistry()  # checked apart first, so a refused schema changes nothing
        for spec in self.tools().specs():
            trial.adopt(spec)
        spec = trial.declare(schema)
        self.tools().remove(spec.name)
        self.tools().adopt(spec)
        self.declared = [s for s in self.declared if s["function"]["name"] != spec.name] + [spec.schema]
        return spec

    def remove_declared(self, name: str) -> None:
        """Forget one of this user's declared tools (a built-in one stays)."""
        if any(s["function"]["name"] == name for s in self.declared):
            self.tools().remove(name)
            self.declared = [s for s in self.declared if s["function"]["name"] != name]

    def declared_names(self) -> list[str]:
        return [s["function"]["name"] for s in self.declared]


class SharedChatHandlers:
    """The handlers every user's events call. They hold the engine, the settings and the
    built-in tools, which no request changes; everything a request changes comes in as the
    user's `UserSession` and `Conversation`."""

    def __init__(self, engine: Engine, settings: Settings, registry: ToolRegistry | None = None):
        self.engine = engine
        self.settings = settings
        self.registry = registry or default_registry()
        self._counting: tuple = (None, None)  # (the engine's processor, its counting copy)

    def new_session(self) -> UserSession:
        return UserSession(self.registry)

    def default_options(self) -> ChatOptions:
        options = ChatOptions.from_settings(self.settings)
        status = getattr(self.engine, "status", None)
        bundled = status is not None and status.is_bundled
        if bundled and not BUNDLED_TRAINED and self.settings.max_new_tokens == Settings.max_new_tokens:
            options.max_new_tokens = min(UNTRAINED_DEMO_MAX_NEW_TOKENS, options.max_new_tokens)
        if bundled and BUNDLED_TRAINED and self.settings.temperature == Settings.temperature:
            options.temperature = TRAINED_DEMO_TEMPERATURE
        if bundled and BUNDLED_TRAINED and not options.enabled_tools:
            # The demo model is there to show the protocol, tool calls first; a real checkpoint
            # starts with no tool on, as its model card does.
            options.enabled_tools = [spec.name for spec in self.registry.specs() if spec.source == "builtin"]
        return options

    # -- sending -----------------------------------------------------------------------------

    def user_turn(self, draft: Draft, session: UserSession) -> UserTurn:
        """Decode the attachments; raises MediaError with a message for the user."""
        media = session.uploads.decode(draft.files, self.settings.limits)
        for item in media:
            if item.kind not in self.engine.modalities:
                raise MediaError(f"{item.name}: this model does not take {item.kind} input.")
        return UserTurn(draft.text.strip(), media)

    def stage(self, value, conversation: Conversation, session: UserSession, shows_messages: bool = False):
        """Composer submit: check the draft before anything else happens. A bad file keeps the
        draft in the composer and warns; a good draft shows at once and goes to `respond`.
        `shows_messages`: whether the page shows a conversation, which the app no longer holds
        if its own is empty; then the draft stays, and nothing is sent.
        Returns (composer, staged draft, chat history, live chat, Stop button)."""
        draft = Draft.from_value(value)
        if draft.empty:
            return gr.update(), None, gr.update(), gr.update(), gr.update()
        if shows_messages and not conversation.turns:
            return gr.update(), None, *forgotten(" Your message stays in the box."), gr.update()
        try:
            turn = self.user_turn(draft, session)
        except MediaError as err:
            # Both stay until the user acts: the toast until closed, the notice until the
            # next message; the draft stays in the composer.
            gr.Warning(toast_text(err), duration=None)
            return gr.update(), None, *settled(conversation, notice=str(err)), gr.update()
        for item in turn.media:
            if item.warning:
                gr.Warning(toast_text(item.warning))
        preview = Conversation(_moved_on(conversation).turns + [turn])
        session.in_flight = (None, preview)
        session.mapped_turn = None  # the map follows the new message
        return (gr.update(value=None, interactive=False), draft.as_value(), *StreamingRender(conversation)(preview),
                gr.update(interactive=True))

    def respond(self, message, conversation: Conversation, session: UserSession, options: ChatOptions,
                request: gr.Request = None):
        """The /chat endpoint: a message (text and files) in, the streamed chat out. A client
        tool still waiting for its result is cancelled, visibly: the user moved on."""
        yield from self._respond(None, message, conversation, session, options)

    def reply(self, message, conversation: Conversation, session: UserSession, options: ChatOptions,
              request: gr.Request = None):
        """The /reply endpoint: the same turn as /chat, the reply streamed as data (answer,
        thought, tool calls with their results, stats; notices apart)."""
        sent = None
        view = lambda c, live=None, notice="": (reply_data(c, live, notice),)  # noqa: E731
        for data, conv, _ in self._respond(view, message, conversation, session, options,
                                           empty_notice="The message is empty: send text or a file."):
            if data is not None and data != sent:
                sent = data
                yield data, conv

    def _respond(self, view, message, conversation: Conversation, session: UserSession, options: ChatOptions,
                 empty_notice: str = ""):
        """`view`: None for the chat (history and live part), else a function of (conversation,
        live, notice) that returns the outputs before the conversation."""
        settle = view or settled
        draft = Draft.from_value(message)
        if draft.empty:  # also when the browser's check refused the draft: its notice stays
            if empty_notice:
                yield *settle(conversation, notice=empty_notice), conversation, None
            else:
                yield *(gr.update() for _ in settle(conversation)), conversation, None
            return
        try:
            turn = self.user_turn(draft, session)
        except MediaError as err:
            yield *settle(conversation, notice=str(err)), conversation, draft.as_value()
            return
        session.uploads.sent(turn.media)
        started = Conversation(_moved_on(conversation).turns + [turn])
        yield from self._stream(started, options, session, shown=conversation, on_fail=(conversation, draft),
                                view=view)

    def retry(self, conversation: Conversation, session: UserSession, options: ChatOptions,
              request: gr.Request = None):
        """Regenerate the last reply (the turns after the last user message go)."""
        if not conversation.turns:
            yield *forgotten(), conversation, None
            return
        index = conversation.last_user_index
        if index is None:
            yield *settled(conversation), conversation, None
            return
        trimmed = Conversation(conversation.turns[: index + 1])
        yield from self._stream(trimmed, options, session, shown=conversation, on_fail=None)

    def edit(self, data: gr.EditData, conversation: Conversation, session: UserSession, options: ChatOptions,
             request: gr.Request = None):
        """Edit the last user message's text and regenerate from there."""
        if not conversation.turns:
            yield *forgotten(), conversation, None
            return
        index = conversation.last_user_index
        position = self.last_user_text_position(conversation)
        if index is None or position is None or data.index != position:
            gr.Warning("Only the text of the last message you sent can be edited.")
            yield *settled(conversation), conversation, None
            return
        last = conversation.turns[index]
        edited = Conversation(conversation.turns[:index] + [UserTurn(edited_text(str(data.value), last), last.media)])
        yield from self._stream(edited, options, session, shown=conversation, on_fail=None)

    def undo(self, conversation: Conversation, session: UserSession):
        """Take back the last message: the chat returns to before it, the draft to the composer."""
        if not conversation.turns:
            return *forgotten(), conversation, gr.update()
        index = conversation.last_user_index
        if index is None:
            return *settled(conversation), conversation, gr.update()
        last = conversation.turns[index]
        kept = Conversation(conversation.turns[:index])
        draft = Draft(last.text, [m.path for m in last.media])
        return *settled(kept), kept, gr.update(value=draft.as_value())

    def answer_tool(self, answer: str, conversation: Conversation, session: UserSession, options: ChatOptions,
                    request: gr.Request = None):
        """The /tool_result endpoint: the user typed a client tool's result (JSON, or text)."""
        if not conversation.turns:
            yield *forgotten(), conversation, None
            return
        if self.pending_client_call(conversation) is None:
            gr.Warning("No tool call is waiting for a result.")
            yield *settled(conversation), conversation, None
            return
        text = (answer or "").strip()
        try:
            response = json.loads(text) if text else ""
        except json.JSONDecodeError:
            response = text
        resumed = TurnRunner(self.engine, session.tools()).answer_client_tool(conversation, response)
        yield from self._stream(resumed, options, session, shown=conversation, on_fail=None)

    def cancel_tool(self, conversation: Conversation, session: UserSession, options: ChatOptions,
                    request: gr.Request = None):
        """The /cancel_tool endpoint: tell the model the user gave up on its call."""
        if not conversation.turns:
            yield *forgotten(), conversation, None
            return
        if self.pending_client_call(conversation) is None:
            yield *settled(conversation), conversation, None
            return
        runner = TurnRunner(self.engine, session.tools())
        resumed = runner.answer_client_tool(conversation, None, cancelled=True)
        yield from self._stream(resumed, options, session, shown=conversation, on_fail=None)

    def show_probabilities(self, shown: bool, conversation: Conversation, session: UserSession) -> str:
        """The token-probability view opened or closed: replies record them only while it is
        open. Returns the view of the last reply."""
        session.probabilities_shown = shown
        return self.probabilities_html(conversation)

    def probabilities_html(self, conversation: Conversation) -> str:
        return probabilities_view.last_reply_html(conversation, self.engine.token_probabilities_note)

    def pick_message(self, evt: gr.SelectData, conversation: Conversation, session: UserSession) -> None:
        """A click on a chat message: the soft-token map shows the media of that message's user
        turn (a reply's: the message it answers). A turn without media changes nothing."""
        turn = turn_of_message(conversation, evt.index if isinstance(evt.index, int) else evt.index[0])
        while turn is not None and turn >= 0 and not isinstance(conversation.turns[turn], UserTurn):
            turn -= 1
        if turn is not None and turn >= 0 and conversation.turns[turn].media:
            session.mapped_turn = turn

    def stop(self, session: UserSession) -> None:
        """The /stop endpoint: stop this user's turn, running or still queued."""
        session.turns.stop()

    def reset(self, session: UserSession):
        """New conversation (or the Chatbot's clear button), also in the middle of a reply:
        the reply stops and nothing from it reaches the new chat.
        The files exported from the last conversation go from the list.
        Returns (chat history, live chat, conversation, draft to give back, composer, Stop button,
        tool row, exported files)."""
        session.turns.reset()
        session.in_flight = None
        session.mapped_turn = None
        return ([], [], Conversation(), None, gr.update(value=None, interactive=True), gr.update(interactive=False),
                gr.update(visible=False), None)

    # -- streaming ---------------------------------------------------------------------------

    def _stream(self, conversation: Conversation, options: ChatOptions, session: UserSession, shown: Conversation,
                on_fail: tuple[Conversation, Draft] | None, view=None) -> Iterator[tuple]:
        """Run the turn and yield (the chat's history and live part, or `view` of it (the reply
        as data); conversation; draft to give back) at a bounded rate. `shown` is the
        conversation the chat showed before: the turns kept from it stay in the history while
        the turn streams, and the settled chat comes last.
        If the engine fails before producing anything, the conversation is handed back as it
        was and the draft returns to the composer. A turn the user replaced with a new
        conversation yields nothing more."""
        ticket = session.turns.begin(_submitted_at())
        options.token_probabilities = session.probabilities_shown
        streaming = view is None
        view, settle = (StreamingRender(shown), settled) if streaming else (view, view)
        skip = (gr.skip(),) * (4 if streaming else 3)
        try:
            if session.turns.superseded(ticket):
                yield skip
                return
            session.in_flight = (ticket, conversation)
            yield *view(conversation), conversation, None
            pacer = UpdatePacer()
            snapshot: Snapshot | None = None
            for snapshot in TurnRunner(self.engine, session.tools()).run(conversation, options, ticket.cancel):
                if session.turns.superseded(ticket):
                    break
                if snapshot.live is not None and not pacer.due():
                    continue
                if snapshot.error:
                    break
                started = time.perf_counter()
                yield *view(snapshot.conversation, snapshot.live), snapshot.conversation, None
                pacer.sent(started)
            if session.turns.superseded(ticket):
                yield skip
                return
        finally:
            if session.in_flight and session.in_flight[0] is ticket:
                session.in_flight = None
            session.turns.end(ticket)
        if snapshot is not None and snapshot.error:
            gr.Warning(toast_text(snapshot.error))
            if snapshot.conversation is not conversation:  # the turn kept a partial reply and says why
                yield *settle(snapshot.conversation), snapshot.conversation, None
            elif on_fail is not None:  # nothing was produced: the message goes back to the composer
                before, draft = on_fail
                yield *settle(before, notice=snapshot.error), before, draft.as_value()
            else:
                yield *settle(conversation, notice=snapshot.error), conversation, None
        elif streaming:  # the turn moves into the history
            final = snapshot.conversation if snapshot is not None else conversation
            yield *settle(final), final, None

    # -- after a turn, and the inspector -------------------------------------------------------

    def after_turn(self, conversation: Conversation, restore_value, composer_value, session: UserSession,
                   show_ids: bool, options: ChatOptions):
        """Re-enable the composer (giving back a draft that failed) and disable Stop, show the
        client-tool box if a call waits, and bring the inspector and last-reply panels up to
        date. While another turn of this user is on its way (a message sent after a New
        conversation), the composer and Stop stay as that turn set them.
        Returns (composer, Stop, tool row, tool answer, stats, raw, parsed, probabilities, *inspector,
        session): the session itself, so that its time to live counts from this turn (ui.wire)."""
        pending = self.pending_client_call(conversation)
        stats, raw, parsed = transcript.last_reply(conversation)
        inspector = self.refresh_inspector(restore_value or composer_value, conversation, session, show_ids, options)
        if not session.turns.settled:
            return (gr.skip(), gr.skip(), gr.update(visible=pending is not None), gr.skip(), stats, raw, parsed,
                    self.probabilities_html(conversation), *inspector, session)
        composer = gr.update(interactive=True, value=restore_value) if restore_value else gr.update(interactive=True)
        return (composer, gr.update(interactive=False), gr.update(visible=pending is not None), gr.update(value=""),
                stats, raw, parsed, self.probabilities_html(conversation), *inspector, session)

    def refresh_inspector(self, value, conversation: Conversation, session: UserSession, show_ids: bool,
                          options: ChatOptions) -> tuple:
        """The inspector's components (InspectorTab.layers): counts, layer 1 and its plain text,
        layer 2 and its plain text, layer 3's plain text, a note when the draft is refused, the
        soft-token maps and layer 3 in colour; each as far as the page lacks it (InspectorShown)."""
        view = self.inspect(value, conversation, session, show_ids, options)
        note = gr.update(value=literal(f"⚠️ {view.warning}"), visible=True) if view.warning else gr.update(visible=False)
        layers = (view.counts, view.messages, view.messages_raw, view.template, view.template_raw, view.expanded, note,
                  view.maps, view.expanded_colour)
        return session.inspector.updates(layers)

    def refresh_inspector_and_keep_session(self, value, conversation: Conversation, session: UserSession,
                                           show_ids: bool, options: ChatOptions) -> tuple:
        """refresh_inspector's components, then the session itself, so that its time to live
        counts from now (ui.wire)."""
        return (*self.refresh_inspector(value, conversation, session, show_ids, options), session)

    @staticmethod
    def resend_inspector(session: UserSession) -> None:
        """The page could not apply a layer's patch: the next refresh sends the whole inspector."""
        session.inspector.forget()

    @staticmethod
    def show_plain_text(name: str, shown: bool, session: UserSession):
        """A layer's "Plain text (copy)" opened (the refresh that follows fills it) or closed
        (emptied: it is not kept up to date while closed)."""
        session.inspector.show_plain_text(name, shown)
        return gr.skip() if shown else ""

    def inspect(self, value, conversation: Conversation, session: UserSession, show_ids: bool,
                options: ChatOptions) -> "InspectorView":
        """Layers and counts for the conversation plus the draft, before it is sent."""
        from gemma4_ui.inspector import expanded_view, soft_token_map
        from gemma4_ui.inspector import layers as inspector

        processor = self.engine.processor
        if processor is None:
            return InspectorView("", "", "", "", "", warning=(
                "The model's processor is not available here, so the prompt layers and exact counts "
                "cannot be shown. The server-reported usage appears with each reply."))
        draft = Draft.from_value(value)
        warning = ""
        preview = conversation
        if draft.empty and session.in_flight is not None:  # a message sent, its reply on its way
            preview = session.in_flight[1]
        elif not draft.empty:
            try:
                preview = Conversation(_moved_on(conversation).turns + [self.user_turn(draft, session)])
            except MediaError as err:
                warning = str(err)
        spec = build_spec(preview, options, session.tools(), self.engine.audio_first)
        if not spec.messages:
            return InspectorView(EMPTY_INSPECTOR, inspector.messages_layer(spec, []), "", "", "", warning,
                                 maps=soft_token_map.NO_MEDIA)
        try:
            raw = template_text(processor, spec)
            inputs = model_inputs(self._counting_processor(processor), spec)
        except Exception as err:  # noqa: BLE001 - the same failure reaches the chat when sent
            log.warning("the inspector could not build the prompt", exc_info=True)
            return InspectorView(EMPTY_INSPECTOR, inspector.messages_layer(spec, preview.media()), "", "", "",
                                 f"The prompt could not be built ({type(err).__name__}: {err}).",
                                 maps=soft_token_map.NO_MEDIA)
        media = preview.media()
        counts = inspector.count_tokens(processor, inputs, media, options.image_budget, self.engine.context_length)
        return InspectorView(
            counts=inspector.counts_html(counts),
            messages_raw=inspector.messages_layer(spec, media),
            template=inspector.template_html(inspector.template_spans(processor, spec, raw)),
            template_raw=raw,
            expanded=inspector.expanded_layer(processor, inputs, show_ids),
            warning=warning,
            maps=self._maps(processor, preview, media, counts, options, session, draft),
            expanded_colour=expanded_view.expanded_html(processor, inputs),
        )

    @staticmethod
    def _maps(processor, preview: Conversation, media, counts, options: ChatOptions, session: UserSession,
              draft: "Draft") -> str:
        """The soft-token maps of the draft's media; without any, of the message picked in the
        chat, or else of the latest message with media."""
        from gemma4_ui.inspector import soft_token_map

        picked = session.mapped_turn
        if draft.files or picked is None or picked >= len(preview.turns) \
                or not isinstance(preview.turns[picked], UserTurn) or not preview.turns[picked].media:
            return soft_token_map.maps_html(processor, media, counts, options.image_budget, _newest_media(preview))
        note = ("<p class='stm-source'>The media of the message picked in the chat. Attach a file to see the "
                "draft's, or pick another message.</p>")
        return note + soft_token_map.maps_html(processor, media, counts, options.image_budget,
                                               list(preview.turns[picked].media))

    def _counting_processor(self, processor):
        """The inspector runs on every keystroke: it counts with a copy of the processor that
        expands each medium once (exact counts, without re-processing the history's media)."""
        if self._counting[0] is not processor:
            self._counting = (processor, counting_processor(processor))
        return self._counting[1]

    # -- declared tools ----------------------------------------------------------------------------

    def add_tool(self, schema: str, enabled: list, session: UserSession):
        """The /declare_tool endpoint: declare a tool from its JSON schema, for this user only;
        it is enabled at once. A refused schema is a warning and a notice saying why; every
        other component keeps its content (the schema stays in the editor, to be fixed).
        Returns (enabled tools, tools docs, schema box, remove row, remove choice, notice)."""
        try:
            spec = session.declare(schema)
        except ToolSchemaError as err:
            message = f"The tool was not added: {err}"
            gr.Warning(toast_text(message))
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), literal(f"⚠️ {message}")
        message = f"Added {spec.name}: when the model calls it, you type the result."
        gr.Info(toast_text(message))
        enabled = [name for name in (enabled or []) if name != spec.name] + [spec.name]
        return (gr.update(choices=tool_choices(session.tools()), value=enabled), tools_markdown(session.tools()), "",
                *removable(session), literal(f"✅ {message}"))

    def remove_tool(self, name: str, enabled: list, session: UserSession):
        """The /remove_tool endpoint: forget one of this user's declared tools.
        Returns (enabled tools, tools docs, remove row, remove choice, notice)."""
        session.remove_declared(name)
        enabled = [tool for tool in (enabled or []) if tool != name]
        return (gr.update(choices=tool_choices(session.tools()), value=enabled), tools_markdown(session.tools()),
                *removable(session), literal(f"Removed {name}."))

    # -- saving and loading ------------------------------------------------------------------------

    def export_files(self, conversation: Conversation, session: UserSession, options: ChatOptions) -> list[str]:
        """The /export endpoint: the conversation (media embedded) and its raw template (what
        apply_chat_template makes of it with these settings; empty where the processor is not
        available), as files."""
        folder = Path(tempfile.mkdtemp(prefix="gemma4_export_"))
        chat_path, template_path = folder / "gemma4_conversation.json", folder / "gemma4_prompt.txt"
        chat_path.write_text(transcript.dumps(conversation, options, session.declared), encoding="utf-8")
        spec = build_spec(conversation, options, session.tools(), self.engine.audio_first)
        processor = self.engine.processor
        template_path.write_text(template_text(processor, spec) if processor and spec.messages else "",
                                 encoding="utf-8")
        return [str(chat_path), str(template_path)]

    def load_chat(self, file, session: UserSession):
        """Load a saved conversation with its settings and declared tools. A file that cannot
        be loaded is a warning; the chat and the settings keep what they had.
        Returns (chat history, live chat, conversation, system prompt, thinking, enabled tools,
        tools docs)."""
        unchanged = (gr.skip(),) * 7
        if file is None:
            return unchanged
        try:
            loaded = transcript.load(Path(file).read_text(encoding="utf-8"), self.settings.limits)
            options = ChatOptions.from_inputs(self.settings, **loaded.settings)
        except (OSError, UnicodeDecodeError, TypeError, ValueError) as err:  # TranscriptError is a ValueError
            gr.Warning(toast_text(f"Could not load that conversation: {err}"))
            return unchanged
        for schema in loaded.declared:
            try:
                session.declare(schema)
            except ToolSchemaError as err:
                gr.Warning(toast_text(f"A declared tool in the file was skipped: {err}"))
        session.turns.reset()  # a reply still streaming belongs to the conversation replaced
        session.mapped_turn = None
        tools = session.tools()
        enabled = [name for name in options.enabled_tools if tools.get(name)]
        gr.Info("Conversation loaded.", duration=3)  # a toast restyles the page every frame it is up
        return (*settled(loaded.conversation), loaded.conversation, options.system_prompt, options.thinking,
                gr.update(choices=tool_choices(tools), value=enabled), tools_markdown(tools))

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
        """Where the last user message's text bubble sits in the rendered chat; None when that
        message is media only (an earlier message's text is not the last message)."""
        index = conversation.last_user_index
        if index is None or not conversation.turns[index].text:
            return None
        before = render(Conversation(conversation.turns[:index]))
        return len(before) + len(conversation.turns[index].media)


def _moved_on(conversation: Conversation) -> Conversation:
    """The user wrote a new message while a client tool waited for its result: the call is
    cancelled, and its panel says so."""
    if SharedChatHandlers.pending_client_call(conversation) is None:
        return conversation
    return TurnRunner.abandon_client_calls(conversation, "The user sent a new message instead of a result.")


FORGOTTEN = ("The app no longer holds this conversation (it was idle too long, or the app restarted), so the "
             "model would not see the messages above. They stay on screen until 🆕 New conversation starts "
             "a new one.")


def forgotten(more: str = "") -> tuple:
    """(history, live) for a request about a conversation the page shows but the app has let
    go (Gradio forgets a conversation after its time to live, ui.SESSION_SECONDS, and at a
    restart): it says so, and leaves the page's messages as they are instead of replacing them
    with an empty chat."""
    gr.Warning(toast_text(FORGOTTEN + more), duration=None)
    return beside_history(FORGOTTEN + more)


def _submitted_at() -> float | None:
    """When Gradio queued the event being processed (its monotonic clock), so that a Stop
    pressed while the turn waited in the queue reaches it. Read from Gradio's queue, which
    offers no public accessor; None outside a queued event, and the turn then counts from
    when it starts."""
    try:
        from gradio.context import LocalContext

        blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
        event = blocks._queue.event_ids_to_events.get(event_id)
        return float(event.enqueue_time)
    except Exception:  # noqa: BLE001 - not in a queued event, or Gradio changed: fall back
        return None


def tool_choices(registry: ToolRegistry) -> list[tuple[str, str]]:
    return [(spec.name if spec.label == spec.name else f"{spec.label} — {spec.name}", spec.name)
            for spec in registry.specs()]


def removable(session: UserSession) -> tuple:
    """The remove-a-tool row: shown while the user has declared tools."""
    names = session.declared_names()
    return gr.update(visible=bool(names)), gr.update(choices=names, value=names[-1] if names else None)


def tools_markdown(registry: ToolRegistry) -> str:
    parts = []
    for spec in registry.specs():
        kind = {"builtin": "built-in", "python": "Python", "declared": "declared: you type its results"}[spec.source]
        demo = " · <i>demo, sample data</i>" if spec.demo and "sample data" not in spec.label else ""
        # Raw HTML (markdown is not read inside it): the names are escaped as HTML.
        parts.append(f"<details><summary><b>{html.escape(spec.label)}</b> <code>{html.escape(spec.name)}</code> "
                     f"({kind}{demo})</summary>\n\n{code_block(json.dumps(spec.schema, indent=2), 'json')}\n"
                     "</details>")
    return "\n".join(parts)


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


# -- the inspector, following the draft -------------------------------------------------------

@dataclass
class InspectorView:
    counts: str  # HTML
    messages_raw: str  # JSON
    template: str  # pieces for tail_patched_html
    template_raw: str
    expanded: str
    warning: str = ""
    maps: str = ""  # HTML: the soft-token pictures
    expanded_colour: str = ""  # HTML: layer 3 coloured by token kind

    @property
    def messages(self) -> str:
        """Layer 1 as pieces for tail_patched_html."""
        from gemma4_ui.inspector.layers import messages_html

        return messages_html(self.messages_raw) if self.messages_raw else ""


def _newest_media(conversation: Conversation) -> list[MediaItem]:
    """The media of the draft, or else of the latest message that has any."""
    for turn in reversed(conversation.turns):
        if isinstance(turn, UserTurn) and turn.media:
            return list(turn.media)
    return []
