"""The handlers every user's events call, put together: one `SharedChatHandlers` serves every
user and holds only what no request can change (the engine, the settings, the built-in tools).
What a user's requests change lives in that user's `UserSession` and `Conversation` (Gradio
keeps one of each per browser tab or API client). Every handler takes the conversation and
returns a new one; the conversation is never rebuilt from what the Chatbot displays.
"""

from __future__ import annotations

from dataclasses import replace

from gemma4_ui.config import BUNDLED_TRAINED, Settings
from gemma4_ui.core.conversation import UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.engines.base import Engine
from gemma4_ui.tools.registry import ToolRegistry, default_registry
from gemma4_ui.web.handlers.branches import BranchHandlers
from gemma4_ui.web.handlers.common import Shared
from gemma4_ui.web.handlers.compare import CompareHandlers
from gemma4_ui.web.handlers.files import FileHandlers
from gemma4_ui.web.handlers.inspector import InspectorHandlers
from gemma4_ui.web.handlers.tools import ToolHandlers
from gemma4_ui.web.handlers.turns import ChatTurns
from gemma4_ui.web.session import Draft, UserSession

# The bundled model with random weights writes noise until the limit: offline, while the
# bundle is untrained, a reply stops here unless the operator set a length.
UNTRAINED_DEMO_MAX_NEW_TOKENS = 128
# The trained bundle was trained and measured greedy; sampled at temperature 1, its four layers
# miscount media and quote the wrong tool result. Greedy is its default unless the operator set one.
TRAINED_DEMO_TEMPERATURE = 0.0


class SharedChatHandlers:
    """The handlers, by concern: `turns` (the chat), `inspector`, `tools` (declared by the
    user), `files` (export and load), `branches` (the conversation's versions), `compare`
    (one turn under two settings)."""

    def __init__(self, engine: Engine, settings: Settings, registry: ToolRegistry | None = None,
                 second: Engine | None = None):
        registry = registry or default_registry()
        self.shared = Shared(engine, with_demo_defaults(settings, engine, registry), registry, second)
        self.inspector = InspectorHandlers(self.shared)
        self.turns = ChatTurns(self.shared, self.inspector)
        self.tools = ToolHandlers()
        self.files = FileHandlers(self.shared)
        self.branches = BranchHandlers()
        self.compare = CompareHandlers(self.shared, self.turns)

    @property
    def engine(self) -> Engine:
        return self.shared.engine

    @property
    def settings(self) -> Settings:
        return self.shared.settings

    @property
    def registry(self) -> ToolRegistry:
        return self.shared.registry

    def new_session(self) -> UserSession:
        return UserSession(self.registry)

    def user_turn(self, draft: Draft, session: UserSession) -> UserTurn:
        return self.shared.user_turn(draft, session)

    def default_options(self) -> ChatOptions:
        """The options a new session starts with: the settings' (core.options)."""
        return ChatOptions.from_settings(self.settings)


def with_demo_defaults(settings: Settings, engine: Engine, registry: ToolRegistry) -> Settings:
    """The settings, with the bundled demo model's own defaults where the operator left the
    general ones: a shorter reply while it is untrained; once it is trained, greedy decoding
    and its built-in tools on (it is there to show the protocol, tool calls first; a real
    checkpoint starts with none, as its model card does)."""
    status = getattr(engine, "status", None)
    if status is None or not status.is_bundled:
        return settings
    if not BUNDLED_TRAINED and settings.max_new_tokens == Settings.max_new_tokens:
        return replace(settings, max_new_tokens=min(UNTRAINED_DEMO_MAX_NEW_TOKENS, settings.max_new_tokens))
    if BUNDLED_TRAINED and settings.temperature == Settings.temperature:
        settings = replace(settings, temperature=TRAINED_DEMO_TEMPERATURE)
    if BUNDLED_TRAINED and settings.enabled_tools is None:
        settings = replace(settings, enabled_tools=[s.name for s in registry.specs() if s.source == "builtin"])
    return settings
