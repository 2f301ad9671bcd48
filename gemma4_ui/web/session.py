"""One user's state, kept by Gradio per browser tab or API client: the draft, the decoded
uploads, the control of their turns (Stop, New conversation), the tools they declared, the
conversation's other versions and what their inspector shows. The handlers (web/handlers/) change it; nothing here is shared between
users.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

from gemma4_ui.config import MediaLimits
from gemma4_ui.core import transcript
from gemma4_ui.core.branches import Branches
from gemma4_ui.core.conversation import Conversation
from gemma4_ui.inspector.layers import SingleFlight
from gemma4_ui.media.decoding import MediaError, MediaItem
from gemma4_ui.media.files import load_upload
from gemma4_ui.tools.registry import ToolRegistry
from gemma4_ui.web.inspector_updates import InspectorShown


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
    def at_rest(self) -> bool:
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
        self.exports = transcript.ExportFolder()  # the files of this user's last export
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
        # Every version Retry and Edit made; its active path is the conversation shown. The
        # conversation itself stays the State every handler takes and returns (the tree is
        # checked against it: `branches_of`).
        self.branches = Branches()
        self.branch_focus: int | None = None  # the place whose versions the branch bar steps through
        # The last comparison: where its replies are, and each side's version there ("a", "b").
        self.compared: tuple[int, dict[str, int]] | None = None

    def branches_of(self, conversation: Conversation) -> Branches:
        """The tree whose active path is `conversation`: this session's, or, where they part
        (a conversation the app had let go, then shown again), one without alternatives."""
        if not self.branches.holds(conversation):
            self.branches = Branches.linear(conversation)
        return self.branches

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
