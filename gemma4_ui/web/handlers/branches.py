"""The conversation's versions: the branch bar below the chat (‹ 2 / 3 › for a message picked
from a list of the messages that have versions) and the /choose_branch endpoint. Choosing a
version shows that branch's whole continuation; the inspector, the counts and the next
message follow it (the wiring refreshes them after, as after a turn)."""

from __future__ import annotations

import gradio as gr

from gemma4_ui.core.branches import BranchError
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.web.display import settled
from gemma4_ui.web.handlers.common import lost_conversation
from gemma4_ui.web.outputs import BranchBar, ChooseOutputs
from gemma4_ui.web.safe_markdown import toast_text
from gemma4_ui.web.session import UserSession

SNIPPET = 40  # characters of a message that name it in the list
COMPARE_LAST, COMPARE_LAST_LABEL = "last", "the message in the box, or the last one sent"


def branch_bar(conversation: Conversation, session: UserSession) -> BranchBar:
    """The bar for the conversation shown: hidden without versions; otherwise the message in
    focus (the one last stepped through, else the latest with versions) and where it stands."""
    tree = session.branches_of(conversation)
    forks = tree.forks()
    if not forks:
        return BranchBar(row=gr.update(visible=False), pick=gr.update(choices=[], value=None), count="",
                         previous=gr.update(interactive=False), next=gr.update(interactive=False))
    focus = session.branch_focus if session.branch_focus in forks else forks[-1]
    which, count = tree.versions()[focus]
    choices = [(_name(conversation, position), position) for position in forks]
    return BranchBar(row=gr.update(visible=True), pick=gr.update(choices=choices, value=focus),
                     count=f"{which + 1} / {count}", previous=gr.update(interactive=which > 0),
                     next=gr.update(interactive=which < count - 1))


def compare_choices(conversation: Conversation, chosen=None) -> dict:
    """Compare's list of what to answer: the message in the box (or the last one sent), or any
    message the user sent; the choice stays while its message is still there."""
    mine = [(_name(conversation, t), t) for t, turn in enumerate(conversation.turns) if isinstance(turn, UserTurn)]
    choices = [(COMPARE_LAST_LABEL, COMPARE_LAST), *mine]
    value = chosen if chosen in {position for _, position in mine} else COMPARE_LAST
    return gr.update(choices=choices, value=value)


def branch_data(conversation: Conversation, session: UserSession) -> dict:
    """The active path as data: each message with which of its versions it is (from 0)."""
    versions = session.branches_of(conversation).versions()
    return {"messages": [
        {"index": t, "role": "user" if isinstance(turn, UserTurn) else "assistant",
         "text": turn.text if isinstance(turn, UserTurn) else turn.content,
         "version": versions[t][0], "versions": versions[t][1]}
        for t, turn in enumerate(conversation.turns)]}


def _name(conversation: Conversation, position: int) -> str:
    turn = conversation.turns[position]
    text = " ".join((turn.text if isinstance(turn, UserTurn) else turn.content or turn.reasoning).split())
    text = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
    who = "Your message" if isinstance(turn, UserTurn) else "Reply"
    return f"{who} {position + 1}: {text}" if text else f"{who} {position + 1}"


class BranchHandlers:
    @staticmethod
    def choose(message_index, branch_index, conversation: Conversation, session: UserSession) -> ChooseOutputs:
        """The /choose_branch endpoint: show version `branch_index` of message `message_index`
        (both counted from 0; a message is a turn: what the user sent, or a whole reply),
        with the continuation last chosen under it. Returns the chat, the branch bar, and the
        messages shown with their versions as data."""
        if not conversation.turns:
            return ChooseOutputs(*lost_conversation(), conversation, *branch_bar(conversation, session),
                                 branch_data(conversation, session))
        tree = session.branches_of(conversation)
        chosen = conversation
        if not session.turns.at_rest:
            gr.Warning("A reply is on its way: wait for it, or stop it, before switching versions.")
        else:
            try:
                chosen = tree.choose(_whole(message_index, "message_index"), _whole(branch_index, "branch_index"))
                session.branch_focus, session.mapped_turn = int(message_index), None
            except BranchError as err:
                gr.Warning(toast_text(str(err)))
        return ChooseOutputs(*settled(chosen, versions=tree.versions()), chosen, *branch_bar(chosen, session),
                             branch_data(chosen, session))

    def step(self, delta: int, focus, conversation: Conversation, session: UserSession) -> ChooseOutputs:
        """‹ or ›: the previous or next version of the message picked in the bar."""
        tree = session.branches_of(conversation)
        versions = tree.versions()
        position = focus if isinstance(focus, int) and 0 <= focus < len(versions) else None
        if position is None:
            gr.Warning("Pick a message with versions in the list first.")
            return ChooseOutputs(*settled(conversation, versions=versions), conversation,
                                 *branch_bar(conversation, session), branch_data(conversation, session))
        return self.choose(position, versions[position][0] + delta, conversation, session)

    @staticmethod
    def pick(focus, conversation: Conversation, session: UserSession) -> BranchBar:
        """Another message picked in the bar: the arrows step through its versions."""
        if isinstance(focus, int):
            session.branch_focus = focus
        return branch_bar(conversation, session)

    @staticmethod
    def data(conversation: Conversation, session: UserSession) -> dict:
        """The /branches endpoint: the messages shown, with which version each is, as data."""
        return branch_data(conversation, session)


def _whole(value, name: str) -> int:
    """A whole number from the API (gradio_client sends numbers as floats)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    raise BranchError(f"{name} must be a whole number, not {value!r}.")
