"""What each handler returns, by name. Gradio matches a handler's return values to its outputs
by position; each structure here is a NamedTuple that a handler fills with values and the
wiring (app.py) fills with the components, so both lists come from one definition and no one
counts positions. `skipped(Outputs)` leaves every output as the page has it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gradio as gr

from gemma4_ui.core.options import USER_OPTIONS


def skipped(outputs: type[NamedTuple]):
    """`outputs` with gr.skip() in every place."""
    return outputs(*(gr.skip() for _ in outputs._fields))


class TurnOutputs(NamedTuple):
    """A chat turn (send, retry, edit, a client tool's answer or cancel), streamed."""

    history: Any  # the settled turns' Chatbot
    live: Any  # the Chatbot of the turn in progress
    conversation: Any
    restore: Any  # the draft to give back to the composer (None: nothing to give back)


class StageOutputs(NamedTuple):
    """A send, checked and shown before its reply starts."""

    composer: Any
    staged: Any  # the draft on its way to the turn
    history: Any
    live: Any
    stop: Any


class UndoOutputs(NamedTuple):
    history: Any
    live: Any
    conversation: Any
    composer: Any  # the message taken back, as a draft


class ResetOutputs(NamedTuple):
    """A new conversation."""

    history: Any
    live: Any
    conversation: Any
    restore: Any
    composer: Any
    stop: Any
    tool_row: Any
    compare_panel: Any  # a comparison's columns belong to the conversation left
    exported: Any


class InspectorLayers(NamedTuple):
    """The inspector's components, in the one order the refresh and the page share
    (inspector_updates.InspectorShown records what each shows)."""

    counts: Any  # HTML: the token counts and the context meter
    messages: Any  # layer 1, patched pieces
    messages_text: Any  # layer 1 as plain text, while its accordion is open
    template: Any  # layer 2, patched pieces
    template_text: Any  # layer 2 as plain text, while its accordion is open
    expanded: Any  # layer 3 as plain text, while its accordion is open
    note: Any  # why the draft cannot be sent, if it cannot
    maps: Any  # HTML: the soft-token maps
    expanded_colour: Any  # layer 3 coloured by token kind, patched pieces


class BranchBar(NamedTuple):
    """The bar below the chat that steps through a message's versions: ‹ 2 / 3 ›."""

    row: Any  # shown while the chat has a message with versions
    pick: Any  # which message's versions the arrows step through
    count: Any  # "2 / 3"
    previous: Any  # ‹
    next: Any  # ›


class CompareOutputs(NamedTuple):
    """A comparison streaming in its two columns; at its end, the chat with A's version."""

    panel: Any  # the comparison's panel
    a_heading: Any  # what side A ran with
    a_chat: Any
    b_heading: Any  # what side B changed (and, while A runs, that B waits)
    b_chat: Any
    counts: Any  # both prompts' token counts per modality
    diff: Any  # the raw templates' diff
    history: Any
    live: Any
    conversation: Any
    composer: Any  # emptied once the message is answered, given back if refused


class KeepOutputs(NamedTuple):
    """One side of a comparison kept: the chat continues with it."""

    history: Any
    live: Any
    conversation: Any
    panel: Any


class AfterTurn(NamedTuple):
    """What settles after a turn, before the inspector's layers (`after_turn_outputs`)."""

    composer: Any
    stop: Any
    tool_row: Any
    tool_answer: Any
    reply_stats: Any
    raw_output: Any
    parsed_output: Any
    probabilities: Any
    branch_row: Any  # the branch bar (BranchBar), field by field
    branch_pick: Any
    branch_count: Any
    branch_previous: Any
    branch_next: Any
    compare_message: Any  # Compare's list of messages to answer


class ChooseOutputs(NamedTuple):
    """Another version of a message chosen: the chat shows its branch."""

    history: Any
    live: Any
    conversation: Any
    row: Any  # the branch bar, as in BranchBar
    pick: Any
    count: Any
    previous: Any
    next: Any
    data: Any  # the active path and its versions, as data (for scripts)


def after_turn_outputs(settled: AfterTurn, layers: InspectorLayers, session: Any) -> tuple:
    """After a turn: what settles, the inspector's layers, then the session (returned so that
    its time to live counts from this turn)."""
    return (*settled, *layers, session)


class DeclareToolOutputs(NamedTuple):
    enabled: Any  # the enabled-tools checkboxes
    docs: Any
    schema: Any  # the schema editor
    remove_row: Any
    remove_choice: Any
    notice: Any


class RemoveToolOutputs(NamedTuple):
    enabled: Any
    docs: Any
    remove_row: Any
    remove_choice: Any
    notice: Any


# A saved conversation loaded, with every chat option it saved (by ChatOptions field, in
# USER_OPTIONS order) and its declared tools.
LoadOutputs = NamedTuple("LoadOutputs", [("history", Any), ("live", Any), ("conversation", Any),
                                         *((name, Any) for name in USER_OPTIONS), ("docs", Any)])
