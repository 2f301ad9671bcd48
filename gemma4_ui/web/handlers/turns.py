"""The chat's turns: staging a message, streaming its reply, retry, undo, edit, a client tool's
answer or cancel, Stop, a new conversation, and what settles once a turn has ended.

A turn runs once, as a stream of `Step`s (`ChatTurns._turn`: the turn loop of turns.py, paced
for the page, stopped by the user's Stop or New conversation); the chat shows each step as
the two Chatbots (`_in_the_chat`), the /reply endpoint as the reply's data (`reply`). Each
turn that ends is settled into the session's tree of versions (core/branches.py): Retry and
Edit fork it, so the version they replace stays as an alternative.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass

import gradio as gr

from gemma4_ui.core.branches import Branches
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.reply_data import reply_data
from gemma4_ui.core.streaming import Live
from gemma4_ui.core.transcript import last_reply
from gemma4_ui.engines.base import Engine
from gemma4_ui.media.decoding import MediaError, check_conversation_media
from gemma4_ui.turns import Snapshot, TurnRunner
from gemma4_ui.web.display import StreamingRender, edited_text, render, settled, turn_of_message
from gemma4_ui.web.gradio_compat.queue import enqueue_time
from gemma4_ui.web.handlers.branches import branch_bar, compare_choices
from gemma4_ui.web.handlers.common import Shared, lost_conversation, pending_client_call, without_waiting_call
from gemma4_ui.web.handlers.inspector import InspectorHandlers
from gemma4_ui.web.outputs import (
    AfterTurn,
    ResetOutputs,
    StageOutputs,
    TurnOutputs,
    UndoOutputs,
    after_turn_outputs,
    skipped,
)
from gemma4_ui.web.pacing import UpdatePacer
from gemma4_ui.web.safe_markdown import toast_text
from gemma4_ui.web.session import Draft, UserSession


@dataclass(frozen=True)
class Step:
    """One point of a turn to show.
    kind: "streaming" (the turn in progress, `live` its streaming round), "settled" (a turn at
    rest: refused, failed, or cut short by an error, with its `notice`), "ended" (the turn
    finished: the chat moves it into the history) or "skip" (the user replaced the
    conversation: nothing more to show)."""

    conversation: Conversation | None
    kind: str = "streaming"
    live: Live | None = None
    notice: str = ""
    restore: dict | None = None  # the draft to give back to the composer


SKIP = Step(None, kind="skip")


class ChatTurns:
    def __init__(self, shared: Shared, inspector: InspectorHandlers):
        self.shared = shared
        self.inspector = inspector

    # -- sending ---------------------------------------------------------------------------------

    def stage(self, value, conversation: Conversation, session: UserSession,
              shows_messages: bool = False) -> StageOutputs:
        """Composer submit: check the draft before anything else happens. A bad file keeps the
        draft in the composer and warns; a good draft shows at once and goes to `respond`.
        `shows_messages`: whether the page shows a conversation, which the app no longer holds
        if its own is empty; then the draft stays, and nothing is sent."""
        draft = Draft.from_value(value)
        if draft.empty:
            return StageOutputs(gr.update(), None, gr.update(), gr.update(), gr.update())
        if shows_messages and not conversation.turns:
            return StageOutputs(gr.update(), None, *lost_conversation(" Your message stays in the box."), gr.update())
        try:
            turn = self.shared.user_turn(draft, session)
            check_conversation_media(conversation.media(), turn.media, self.shared.settings.limits)
        except MediaError as err:
            # Both stay until the user acts: the toast until closed, the notice until the
            # next message; the draft stays in the composer.
            gr.Warning(toast_text(err), duration=None)
            return StageOutputs(gr.update(), None, *settled(conversation, notice=str(err)), gr.update())
        for item in turn.media:
            if item.warning:
                gr.Warning(toast_text(item.warning))
        preview = Conversation(without_waiting_call(conversation).turns + [turn])
        session.in_flight = (None, preview)
        session.mapped_turn = None  # the map follows the new message
        return StageOutputs(gr.update(value=None, interactive=False), draft.as_value(),
                            *StreamingRender(conversation)(preview), gr.update(interactive=True))

    def respond(self, message, conversation: Conversation, session: UserSession, options: ChatOptions,
                request: gr.Request = None) -> Iterator[TurnOutputs]:
        """The /chat endpoint: a message (text and files) in, the streamed chat out. A client
        tool still waiting for its result is cancelled, visibly: the user moved on."""
        draft = Draft.from_value(message)
        if draft.empty:  # also when the browser's check refused the draft: its notice stays
            yield TurnOutputs(gr.update(), gr.update(), conversation, None)
            return
        yield from _in_the_chat(self._send(draft, conversation, session, options), conversation, session)

    def reply(self, message, conversation: Conversation, session: UserSession, options: ChatOptions,
              request: gr.Request = None):
        """The /reply endpoint: the same turn as /chat, the reply streamed as data (answer,
        thought, tool calls with their results, stats; notices apart)."""
        draft = Draft.from_value(message)
        if draft.empty:
            steps = _only(Step(conversation, kind="settled", notice="The message is empty: send text or a file."))
        else:
            steps = self._send(draft, conversation, session, options)
        sent = None
        with closing(steps):
            for step in steps:
                if step.kind == "ended":  # its last streamed step was the settled reply already
                    continue
                if step.kind == "skip":
                    data, conv = gr.skip(), gr.skip()
                else:
                    data, conv = reply_data(step.conversation, step.live, step.notice), step.conversation
                if data is not None and data != sent:
                    sent = data
                    yield data, conv

    def _send(self, draft: Draft, conversation: Conversation, session: UserSession,
              options: ChatOptions) -> Iterator[Step]:
        """The user's message, then its reply. A refused file hands the draft back."""
        session.branches_of(conversation)
        try:
            turn = self.shared.user_turn(draft, session)
            check_conversation_media(conversation.media(), turn.media, self.shared.settings.limits)
        except MediaError as err:
            yield Step(conversation, kind="settled", notice=str(err), restore=draft.as_value())
            return
        session.uploads.sent(turn.media)
        started = Conversation(without_waiting_call(conversation).turns + [turn])
        yield from self._turn(started, options, session, on_fail=(conversation, draft))

    # -- retry, undo, edit, client tools ------------------------------------------------------------

    def retry(self, conversation: Conversation, session: UserSession, options: ChatOptions,
              request: gr.Request = None) -> Iterator[TurnOutputs]:
        """Regenerate the last reply; the reply it replaces stays as another version."""
        if not conversation.turns:
            yield _lost(conversation)
            return
        index = conversation.last_user_index
        if index is None:
            yield TurnOutputs(*settled(conversation), conversation, None)
            return
        session.branches_of(conversation)
        trimmed = Conversation(conversation.turns[: index + 1])
        yield from _in_the_chat(self._turn(trimmed, options, session, on_fail=(conversation, None), fork_at=index + 1),
                                conversation, session)

    def edit(self, data: gr.EditData, conversation: Conversation, session: UserSession, options: ChatOptions,
             request: gr.Request = None) -> Iterator[TurnOutputs]:
        """Edit the text of a message the user sent (any of them) and answer it again; the
        message as it was, with everything after it, stays as another version."""
        if not conversation.turns:
            yield _lost(conversation)
            return
        tree = session.branches_of(conversation)
        index = user_text_turn(conversation, data.index if isinstance(data.index, int) else data.index[0])
        if index is None:
            gr.Warning("Only the text of a message you sent can be edited.")
            yield TurnOutputs(*settled(conversation, versions=tree.versions()), conversation, None)
            return
        old = conversation.turns[index]
        edited = Conversation(conversation.turns[:index] + [UserTurn(edited_text(str(data.value), old), old.media)])
        yield from _in_the_chat(self._turn(edited, options, session, on_fail=(conversation, None), fork_at=index),
                                conversation, session)

    @staticmethod
    def undo(conversation: Conversation, session: UserSession) -> UndoOutputs:
        """Take back the last message: the chat returns to before it, the draft to the composer.
        That version of the message goes (its other versions stay, and the next message
        sent joins them)."""
        if not conversation.turns:
            return UndoOutputs(*lost_conversation(), conversation, gr.update())
        tree = session.branches_of(conversation)
        index = conversation.last_user_index
        if index is None:
            return UndoOutputs(*settled(conversation, versions=tree.versions()), conversation, gr.update())
        last = conversation.turns[index]
        kept = Conversation(conversation.turns[:index])
        tree.settle(kept)
        draft = Draft(last.text, [m.path for m in last.media])
        return UndoOutputs(*settled(kept, versions=tree.versions()), kept, gr.update(value=draft.as_value()))

    def answer_tool(self, answer: str, conversation: Conversation, session: UserSession, options: ChatOptions,
                    request: gr.Request = None) -> Iterator[TurnOutputs]:
        """The /tool_result endpoint: the user typed a client tool's result (JSON, or text)."""
        if not conversation.turns:
            yield _lost(conversation)
            return
        if pending_client_call(conversation) is None:
            gr.Warning("No tool call is waiting for a result.")
            yield TurnOutputs(*settled(conversation), conversation, None)
            return
        text = (answer or "").strip()
        try:
            response = json.loads(text) if text else ""
        except json.JSONDecodeError:
            response = text
        session.branches_of(conversation)
        resumed = TurnRunner(self.shared.engine, session.tools()).answer_client_tool(conversation, response)
        yield from _in_the_chat(self._turn(resumed, options, session), conversation, session)

    def cancel_tool(self, conversation: Conversation, session: UserSession, options: ChatOptions,
                    request: gr.Request = None) -> Iterator[TurnOutputs]:
        """The /cancel_tool endpoint: tell the model the user gave up on its call."""
        if not conversation.turns:
            yield _lost(conversation)
            return
        if pending_client_call(conversation) is None:
            yield TurnOutputs(*settled(conversation), conversation, None)
            return
        session.branches_of(conversation)
        runner = TurnRunner(self.shared.engine, session.tools())
        resumed = runner.answer_client_tool(conversation, None, cancelled=True)
        yield from _in_the_chat(self._turn(resumed, options, session), conversation, session)

    # -- stop and new conversation --------------------------------------------------------------------

    @staticmethod
    def stop(session: UserSession) -> None:
        """The /stop endpoint: stop this user's turn, running or still queued."""
        session.turns.stop()

    @staticmethod
    def reset(session: UserSession) -> ResetOutputs:
        """New conversation (or the Chatbot's clear button), also in the middle of a reply:
        the reply stops and nothing from it reaches the new chat.
        The files exported from the last conversation go from the list."""
        session.turns.reset()
        session.in_flight = None
        session.mapped_turn = None
        session.branches, session.branch_focus, session.compared = Branches(), None, None
        return ResetOutputs(history=[], live=[], conversation=Conversation(), restore=None,
                            composer=gr.update(value=None, interactive=True), stop=gr.update(interactive=False),
                            tool_row=gr.update(visible=False), compare_panel=gr.update(visible=False),
                            exported=None)

    # -- the turn itself ---------------------------------------------------------------------------

    def _turn(self, conversation: Conversation, options: ChatOptions, session: UserSession,
              on_fail: tuple[Conversation, Draft | None] | None = None, fork_at: int | None = None,
              engine: Engine | None = None) -> Iterator[Step]:
        """Run the turn, as steps at a bounded rate: `conversation` first, then the turn as it
        streams, then how it ended (`_ending`), settled into the session's tree of versions
        (a new version of the turn at `fork_at`, for a retry or an edit). A turn the user
        replaced with a new conversation ends with SKIP. `on_fail`: the conversation (and
        draft) to hand back if the engine fails before producing anything. `engine`: another
        model than the chat's (Compare's side B)."""
        ticket = session.turns.begin(enqueue_time())
        options.token_probabilities = session.probabilities_shown
        snapshot: Snapshot | None = None
        try:
            if session.turns.superseded(ticket):
                yield SKIP
                return
            session.in_flight = (ticket, conversation)
            yield Step(conversation)
            pacer = UpdatePacer()
            runner = TurnRunner(engine or self.shared.engine, session.tools())
            for snapshot in runner.run(conversation, options, ticket.cancel):
                if session.turns.superseded(ticket):
                    break
                if snapshot.live is not None and not pacer.due():
                    continue
                if snapshot.error:
                    break
                started = time.perf_counter()
                yield Step(snapshot.conversation, live=snapshot.live)
                pacer.sent(started)
            if session.turns.superseded(ticket):
                yield SKIP
                return
        finally:
            if session.in_flight and session.in_flight[0] is ticket:
                session.in_flight = None
            session.turns.end(ticket)
        ending = _ending(snapshot, conversation, on_fail)
        handed_back = on_fail is not None and ending.conversation is on_fail[0]
        session.branches.settle(ending.conversation, None if handed_back else fork_at)
        yield ending

    # -- after a turn ------------------------------------------------------------------------------

    def after_turn(self, conversation: Conversation, restore_value, composer_value, compared_message,
                   session: UserSession, show_ids: bool, options: ChatOptions) -> tuple:
        """Re-enable the composer (giving back a draft that failed) and disable Stop, show the
        client-tool box if a call waits, and bring the inspector and last-reply panels up to
        date. While another turn of this user is on its way (a message sent after a New
        conversation), the composer and Stop stay as that turn set them. The session comes
        last, so that its time to live counts from this turn (wiring.wire)."""
        waiting = gr.update(visible=pending_client_call(conversation) is not None)
        bar = branch_bar(conversation, session)
        branch = dict(branch_row=bar.row, branch_pick=bar.pick, branch_count=bar.count,
                      branch_previous=bar.previous, branch_next=bar.next,
                      compare_message=compare_choices(conversation, compared_message))
        stats, raw, parsed = last_reply(conversation)
        layers = self.inspector.refresh(restore_value or composer_value, conversation, session, show_ids, options)
        probabilities = self.inspector.probabilities_html(conversation)
        if not session.turns.at_rest:
            after = AfterTurn(composer=gr.skip(), stop=gr.skip(), tool_row=waiting, tool_answer=gr.skip(),
                              reply_stats=stats, raw_output=raw, parsed_output=parsed, probabilities=probabilities,
                              **branch)
        else:
            composer = (gr.update(interactive=True, value=restore_value) if restore_value
                        else gr.update(interactive=True))
            after = AfterTurn(composer=composer, stop=gr.update(interactive=False), tool_row=waiting,
                              tool_answer=gr.update(value=""), reply_stats=stats, raw_output=raw, parsed_output=parsed,
                              probabilities=probabilities, **branch)
        return after_turn_outputs(after, layers, session)


def _in_the_chat(steps: Iterator[Step], shown: Conversation, session: UserSession) -> Iterator[TurnOutputs]:
    """The turn's steps as the chat's outputs: the streaming turn below the history `shown`
    (StreamingRender), a turn at rest all in the history (`settled`), each message with other
    versions marked. Closing this closes the turn, which stops it."""
    streaming = StreamingRender(shown, session.branches_of(shown).versions())
    with closing(steps):
        for step in steps:
            if step.kind == "skip":
                yield skipped(TurnOutputs)
            elif step.kind == "streaming":
                yield TurnOutputs(*streaming(step.conversation, step.live), step.conversation, None)
            else:
                versions = session.branches.versions() if session.branches.holds(step.conversation) else ()
                yield TurnOutputs(*settled(step.conversation, notice=step.notice, versions=versions),
                                  step.conversation, step.restore)


def _ending(snapshot: Snapshot | None, conversation: Conversation,
            on_fail: tuple[Conversation, Draft] | None) -> Step:
    """How the turn from `conversation` ended, its last snapshot `snapshot`. An engine error is
    a warning; the partial reply stays and says why, or, if nothing was produced, the message
    goes back to the composer (`on_fail`)."""
    if snapshot is None or not snapshot.error:
        return Step(snapshot.conversation if snapshot is not None else conversation, kind="ended")
    gr.Warning(toast_text(snapshot.error))
    if snapshot.conversation is not conversation:  # the turn kept a partial reply and says why
        return Step(snapshot.conversation, kind="settled")
    if on_fail is not None:  # nothing was produced: the message goes back to the composer
        before, draft = on_fail
        return Step(before, kind="settled", notice=snapshot.error, restore=draft.as_value() if draft else None)
    return Step(conversation, kind="settled", notice=snapshot.error)


def _only(step: Step) -> Iterator[Step]:
    yield step


def _lost(conversation: Conversation) -> TurnOutputs:
    """For a turn asked on a conversation the app has let go (see lost_conversation)."""
    return TurnOutputs(*lost_conversation(), conversation, None)


def last_user_text_position(conversation: Conversation) -> int | None:
    """Where the last user message's text bubble sits in the rendered chat; None when that
    message is media only."""
    index = conversation.last_user_index
    if index is None or not conversation.turns[index].text:
        return None
    return _text_position(conversation, index)


def user_text_turn(conversation: Conversation, message: int) -> int | None:
    """The user turn whose text bubble is rendered chat message `message`; None when that
    message is not the text of a message the user sent."""
    index = turn_of_message(conversation, message)
    if index is None or not isinstance(conversation.turns[index], UserTurn) or not conversation.turns[index].text:
        return None
    return index if _text_position(conversation, index) == message else None


def _text_position(conversation: Conversation, index: int) -> int:
    return len(render(Conversation(conversation.turns[:index]))) + len(conversation.turns[index].media)
