"""What the handlers of every concern share: the engine, the settings and the built-in tools
(read-only, for every user), a draft made into a user turn, and the conversation queries they
all ask."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from gemma4_ui.config import Settings
from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
from gemma4_ui.core.events import ToolCall
from gemma4_ui.engines.base import Engine
from gemma4_ui.media.decoding import MediaError
from gemma4_ui.tools.registry import ToolRegistry
from gemma4_ui.turns import TurnRunner
from gemma4_ui.web.display import beside_history
from gemma4_ui.web.safe_markdown import toast_text
from gemma4_ui.web.session import Draft, UserSession

LOST_CONVERSATION = ("The app no longer holds this conversation (it was idle too long, or the app restarted), so "
                     "the model would not see the messages above. They stay on screen until 🆕 New conversation "
                     "starts a new one.")


@dataclass(frozen=True)
class Shared:
    """What no request changes: the engine, the settings, the built-in tools, and the second
    model Compare's side B may answer with (--compare-model)."""

    engine: Engine
    settings: Settings
    registry: ToolRegistry
    second: Engine | None = None

    def models(self) -> list[str]:
        """The names of the models an answer can come from, the chat's first (the second one
        told apart when both have the same name: the same checkpoint, local and served)."""
        if self.second is None:
            return [self.engine.status.name]
        first, second = self.engine.status.name, self.second.status.name
        return [first, second if second != first else f"{second} ({self.second.status.source})"]

    def user_turn(self, draft: Draft, session: UserSession) -> UserTurn:
        """Decode the attachments; raises MediaError with a message for the user."""
        media = session.uploads.decode(draft.files, self.settings.limits)
        for item in media:
            if item.kind not in self.engine.modalities:
                raise MediaError(f"{item.name}: this model does not take {item.kind} input.")
        return UserTurn(draft.text.strip(), media)


def pending_client_call(conversation: Conversation) -> ToolCall | None:
    """The client tool call waiting for the user's result, if one is."""
    turn = conversation.turns[-1] if conversation.turns else None
    if isinstance(turn, AssistantTurn) and turn.rounds:
        round_ = turn.rounds[-1]
        if round_.results and round_.results[-1].status == "client":
            return round_.calls[len(round_.results) - 1]
    return None


def without_waiting_call(conversation: Conversation) -> Conversation:
    """The conversation to which the user adds a message: a client tool still waiting for its
    result is cancelled, and its panel says that the user sent a new message instead."""
    if pending_client_call(conversation) is None:
        return conversation
    return TurnRunner.abandon_client_calls(conversation, "The user sent a new message instead of a result.")


def lost_conversation(more: str = "") -> tuple:
    """(history, live) for a request about a conversation the page shows but the app has let
    go (Gradio forgets a conversation after its time to live, layout.SESSION_SECONDS, and at a
    restart): it says so, and leaves the page's messages as they are instead of replacing them
    with an empty chat."""
    gr.Warning(toast_text(LOST_CONVERSATION + more), duration=None)
    return beside_history(LOST_CONVERSATION + more)
