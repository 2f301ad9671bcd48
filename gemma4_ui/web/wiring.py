"""The wiring: every event of the page, connected to its handler, in one place (`wire`). Each
handler's outputs are the NamedTuple of outputs.py that it returns, filled here with the
components; `with_options` gives a handler the chat options as one `ChatOptions`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from gemma4_ui.core.options import USER_OPTIONS, ChatOptions
from gemma4_ui.web.examples import examples
from gemma4_ui.web.handlers import compare
from gemma4_ui.web.handlers.shared import SharedChatHandlers
from gemma4_ui.web.layout import Layout
from gemma4_ui.web.outputs import (
    AfterTurn,
    ChooseOutputs,
    CompareOutputs,
    DeclareToolOutputs,
    KeepOutputs,
    LoadOutputs,
    RemoveToolOutputs,
    ResetOutputs,
    StageOutputs,
    TurnOutputs,
    UndoOutputs,
    after_turn_outputs,
)

# A send asks whether the page shows a conversation (if the app has let it go, the draft
# stays: ChatTurns.stage). The page answers it from its own messages: with the history as the
# send's input, every message snapshotted, uploaded and validated the whole chat.
SHOWS_MESSAGES_JS = """(draft, conversation, session) =>
  [draft, conversation, session, document.querySelector('#chat-history .message-row') !== null]"""


def with_options(handlers: SharedChatHandlers, method: Callable, leading: list[tuple[str, Any]]) -> Callable:
    """`method(*leading, options, request=...)` as a Gradio handler taking the leading inputs
    and then one input per chat option. Its signature names every parameter (the API shows
    them by name: `/chat` takes `message`, `system_prompt`, `thinking`, ...), and the option
    values become one `ChatOptions` here, checked against the settings."""
    count = len(leading)
    takes_request = "request" in inspect.signature(method).parameters

    def split(args: tuple):
        values, request = args[:-1], args[-1]  # Gradio passes the request last (see the signature)
        options = ChatOptions.from_inputs(handlers.settings, **dict(zip(USER_OPTIONS, values[count:])))
        return values[:count], options, request

    if inspect.isgeneratorfunction(method):
        def handler(*args):
            leading_values, options, request = split(args)
            yield from method(*leading_values, options, **({"request": request} if takes_request else {}))
    else:
        def handler(*args):
            leading_values, options, request = split(args)
            return method(*leading_values, options, **({"request": request} if takes_request else {}))

    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(name, positional, annotation=kind) for name, kind in leading]
    parameters += [inspect.Parameter(name, positional) for name in USER_OPTIONS]
    parameters.append(inspect.Parameter("request", positional, default=None, annotation=gr.Request))
    handler.__signature__ = inspect.Signature(parameters)
    handler.__annotations__ = {name: kind for name, kind in leading if kind is not inspect.Parameter.empty}
    handler.__annotations__["request"] = gr.Request
    handler.__name__ = handler.__qualname__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


@dataclass(frozen=True)
class _Wiring:
    """What the events of every concern share: the handlers, the layout, the chat options'
    inputs, and the settings each kind of event takes."""

    demo: gr.Blocks
    handlers: SharedChatHandlers
    layout: Layout
    turn: list  # the leading parameters of a turn's handler: the conversation and the session
    chat_outputs: list  # TurnOutputs' components
    gpu: dict  # a generating event: at most gpu_concurrency at once
    own: dict  # a step that touches only the user's own state: no shared slot
    private: dict  # not an API endpoint
    streamed: dict  # a streamed turn shows its progress on the live part only
    quiet: dict  # no progress shown (see wire)
    after: dict  # what settles once a turn has ended


def wire(demo: gr.Blocks, handlers: SharedChatHandlers, layout: Layout) -> None:
    """Connect the components to the handlers: every event, by concern."""
    chat, inspector = layout.chat, layout.inspector
    conversation, session, restore = layout.conversation, layout.session, layout.restore
    options = layout.option_inputs
    empty = inspect.Parameter.empty
    turn = [("conversation", empty), ("session", empty)]
    chat_outputs = list(TurnOutputs(history=chat.history, live=chat.live, conversation=conversation, restore=restore))
    gpu = dict(concurrency_limit=handlers.settings.gpu_concurrency, concurrency_id="gpu")
    # Gradio gives every queued event a slot of its own function's (concurrency_id = id(fn)),
    # limited by the queue's default (gpu_concurrency): one end-of-turn function shared by
    # every chain made every user's composer wait for every other user's inspector refresh.
    # Steps that touch only the user's own state run at once, for every user.
    own = dict(concurrency_limit=None)
    private = dict(api_visibility="private")
    streamed = dict(show_progress_on=[chat.live])  # the history does not change while a turn streams
    # Every event names small components as its progress targets. Gradio's page keeps a
    # loading status for each component any event has had as a target (its outputs, unless
    # show_progress_on says otherwise), and at every streamed update it copies the whole
    # state of each of them: with the chat history and the inspector's layers among them, a
    # long chat made each update of the reply cost much more, and the first ones most.
    # Hidden progress shows nothing, so its target is a State.
    quiet = dict(show_progress="hidden", show_progress_on=[layout.restore])

    after_turn = with_options(handlers, handlers.turns.after_turn, [("conversation", empty), ("restore", empty),
                                                                    ("composer", empty), ("compared_message", empty),
                                                                    ("session", empty), ("show_ids", empty)])
    bar = chat.branches
    settles = AfterTurn(composer=chat.composer, stop=chat.stop, tool_row=chat.tool_row, tool_answer=chat.tool_answer,
                        reply_stats=inspector.reply_stats, raw_output=inspector.raw_output,
                        parsed_output=inspector.parsed_output, probabilities=chat.probabilities,
                        branch_row=bar.row, branch_pick=bar.pick, branch_count=bar.count,
                        branch_previous=bar.previous, branch_next=bar.next, compare_message=layout.compare.message)
    after = dict(fn=after_turn, inputs=[conversation, restore, chat.composer, layout.compare.message, session,
                                        inspector.show_ids, *options],
                 outputs=list(after_turn_outputs(settles, inspector.layers, session)), **quiet, **private, **own)
    # Gradio forgets a State only if an event has returned it: its time to live counts from the
    # last return (an hour once the page is closed). The handlers change the session in place,
    # so the inspector's refresh (at the page's load, at each change of the draft or a setting)
    # and every turn's end return it too; else a visitor's session (their unsent uploads,
    # decoded, and the inspector as last shown) stayed until 10,000 later visitors had pushed
    # it out of Gradio's store.
    w = _Wiring(demo, handlers, layout, turn, chat_outputs, gpu, own, private, streamed, quiet, after)
    _wire_turns(w)
    _wire_branches(w)
    _wire_compare(w)
    _wire_inspector(w)
    _wire_tools(w)
    _wire_files(w)


def running():
    return gr.update(interactive=True)  # Stop, as soon as a turn is asked for


def _wire_turns(w: _Wiring) -> None:
    """The chat's turns: send, stop, retry, undo, edit, a client tool's answer, new conversation."""
    handlers, layout, chat, inspector = w.handlers, w.layout, w.layout.chat, w.layout.inspector
    conversation, session, restore, options = layout.conversation, layout.session, layout.restore, layout.option_inputs
    turn, chat_outputs, gpu, private, streamed, quiet, after = (w.turn, w.chat_outputs, w.gpu, w.private, w.streamed,
                                                                w.quiet, w.after)
    empty = inspect.Parameter.empty

    # 1. Send: check and show the message, stream the reply, then settle the composer.
    respond = with_options(handlers, handlers.turns.respond, [("message", empty), *turn])
    # Queued, so that a refusal's toast reaches the browser (a queue=False handler cannot
    # show gr.Warning); decoding is CPU work, apart from the GPU's limit.
    staged = StageOutputs(composer=chat.composer, staged=chat.staged, history=chat.history, live=chat.live,
                          stop=chat.stop)
    chat.composer.submit(handlers.turns.stage, [chat.composer, conversation, session, chat.shows_messages],
                         list(staged), concurrency_limit=4, concurrency_id="stage", js=SHOWS_MESSAGES_JS, **quiet,
                         **private).then(
        respond, [chat.staged, conversation, session, *options], chat_outputs, api_name="chat",
        show_progress="minimal", **streamed, **gpu,
    ).then(**after)

    # 1c. The same turn for scripts, the reply as data (no button: an API endpoint only).
    reply_trigger, reply_out = gr.Button(visible=False), gr.JSON(visible=False)
    reply_trigger.click(with_options(handlers, handlers.turns.reply, [("message", empty), *turn]),
                        [chat.staged, conversation, session, *options], [reply_out, conversation], api_name="reply",
                        **gpu)

    # 1d. An example in the empty chat fills the composer and the example's settings.
    example_rows, _ = examples(handlers.default_options().enabled_tools)

    def pick_example(evt: gr.SelectData):
        message, thinking, tools_on = example_rows[evt.index]
        return {"text": message["text"], "files": list(message["files"])}, thinking, tools_on

    chat.history.example_select(pick_example, None, [chat.composer, layout.options["thinking"],
                                                     layout.options["enabled_tools"]], queue=False, **private)

    # 2. Stop: the running or queued turn stops (the reply it has so far stays).
    chat.stop.click(handlers.turns.stop, [session], None, queue=False, api_name="stop")

    # 3. Retry, undo and edit of the last message.
    # /retry is public: a script makes another version of the last reply (/choose_branch switches).
    chat.history.retry(running, None, chat.stop, queue=False, **private).then(
        with_options(handlers, handlers.turns.retry, turn), [conversation, session, *options], chat_outputs,
        api_name="retry", **streamed, **gpu,
    ).then(**after)
    undone = UndoOutputs(history=chat.history, live=chat.live, conversation=conversation, composer=chat.composer)
    chat.history.undo(handlers.turns.undo, [conversation, session], list(undone), **quiet, **private,
                      **w.own).then(**after)
    chat.history.edit(running, None, chat.stop, queue=False, **private)
    chat.history.edit(with_options(handlers, handlers.turns.edit, [("data", gr.EditData), *turn]),
                      [conversation, session, *options], chat_outputs, **private, **streamed, **gpu).then(**after)

    # 4. Client tools: the user answers (or cancels) a call the model made.
    answer = with_options(handlers, handlers.turns.answer_tool, [("answer", empty), *turn])
    cancel = with_options(handlers, handlers.turns.cancel_tool, turn)
    for trigger, handler, inputs, name in (
        (chat.tool_submit.click, answer, [chat.tool_answer, conversation, session, *options], "tool_result"),
        (chat.tool_answer.submit, answer, [chat.tool_answer, conversation, session, *options], None),
        (chat.tool_cancel.click, cancel, [conversation, session, *options], "cancel_tool"),
    ):
        trigger(running, None, chat.stop, queue=False, **private).then(
            handler, inputs, chat_outputs, api_name=name, api_visibility="public" if name else "private",
            **streamed, **gpu,
        ).then(**after)

    # 5. New conversation, also from the Chatbot's own trash button: a reply still streaming stops.
    reset_outputs = list(ResetOutputs(history=chat.history, live=chat.live, conversation=conversation, restore=restore,
                                      composer=chat.composer, stop=chat.stop, tool_row=chat.tool_row,
                                      compare_panel=layout.compare.panel, exported=inspector.exported))
    chat.new_chat.click(handlers.turns.reset, [session], reset_outputs, api_name="new_conversation", queue=False,
                        **quiet).then(**after)
    chat.history.clear(handlers.turns.reset, [session], reset_outputs, queue=False, **quiet, **private).then(**after)


def _wire_branches(w: _Wiring) -> None:
    """The conversation's versions: the branch bar's arrows and list, and /choose_branch."""
    handlers, layout, chat = w.handlers, w.layout, w.layout.chat
    conversation, session, bar = layout.conversation, layout.session, chat.branches
    data = gr.JSON(visible=False)
    chosen = list(ChooseOutputs(history=chat.history, live=chat.live, conversation=conversation, row=bar.row,
                                pick=bar.pick, count=bar.count, previous=bar.previous, next=bar.next, data=data))
    # Each step waits for the one before it (a user's clicks are queued in order), and runs
    # beside every other user's events: it touches this user's state only.
    for button, delta in ((bar.previous, -1), (bar.next, 1)):
        button.click(functools.partial(handlers.branches.step, delta), [bar.pick, conversation, session], chosen,
                     **w.quiet, **w.private, **w.own).then(**w.after)
    bar.pick.input(handlers.branches.pick, [bar.pick, conversation, session], list(bar), **w.quiet, **w.private,
                   **w.own)
    message, version = gr.Number(visible=False, precision=0), gr.Number(visible=False, precision=0)
    trigger = gr.Button(visible=False)
    trigger.click(handlers.branches.choose, [message, version, conversation, session], chosen,
                  api_name="choose_branch", **w.quiet, **w.own).then(**w.after)
    trigger.click(handlers.branches.data, [conversation, session], data, api_name="branches", **w.quiet, **w.own)


def _wire_compare(w: _Wiring) -> None:
    """Compare: the same turn under two settings, in two columns; keep one."""
    handlers, layout, chat, panel = w.handlers, w.layout, w.layout.chat, w.layout.compare
    conversation, session, options = layout.conversation, layout.session, layout.option_inputs
    empty = inspect.Parameter.empty
    side_b = [(name, empty) for name in panel.side_b]
    leading = [("message", empty), *side_b, (compare.MESSAGE, empty), *w.turn]
    shown = list(CompareOutputs(panel=panel.panel, a_heading=panel.a_heading, a_chat=panel.a_chat,
                                b_heading=panel.b_heading, b_chat=panel.b_chat, counts=panel.counts, diff=panel.diff,
                                history=chat.history, live=chat.live, conversation=conversation,
                                composer=chat.composer))
    # At once: Stop, and the columns saying they wait (the comparison may queue behind other users').
    queued = [chat.stop, panel.panel, panel.a_heading, panel.a_chat, panel.b_heading, panel.b_chat]
    panel.run.click(handlers.compare.queued, None, queued, queue=False, **w.private).then(
        with_options(handlers, handlers.compare.compare, leading),
        [chat.composer, *panel.side_b.values(), panel.message, conversation, session, *options], shown,
        api_name="compare_columns", show_progress="minimal", show_progress_on=[panel.counts], **w.private, **w.gpu,
    ).then(**w.after)
    # /compare for scripts: both replies as data, like /reply.
    trigger, message, out = gr.Button(visible=False), gr.MultimodalTextbox(visible=False), gr.JSON(visible=False)
    # Which message to answer, for scripts: any index, checked by the handler (the page's list
    # offers only the messages shown).
    answer = gr.Textbox(compare.LAST, visible=False)
    trigger.click(with_options(handlers, handlers.compare.compare_data, leading),
                  [message, *panel.side_b.values(), answer, conversation, session, *options],
                  [out, conversation], api_name="compare", **w.gpu)
    kept = list(KeepOutputs(history=chat.history, live=chat.live, conversation=conversation, panel=panel.panel))
    for button, side in ((panel.keep_a, "a"), (panel.keep_b, "b")):
        button.click(functools.partial(handlers.compare.keep, side), [conversation, session], kept, **w.quiet,
                     **w.private, **w.own).then(**w.after)


def _wire_inspector(w: _Wiring) -> None:
    """The inspector follows the draft and the settings; the token probabilities are recorded
    while their view is open."""
    handlers, layout, chat, inspector = w.handlers, w.layout, w.layout.chat, w.layout.inspector
    conversation, session, options = layout.conversation, layout.session, layout.option_inputs
    demo, turn, private, quiet = w.demo, w.turn, w.private, w.quiet
    empty = inspect.Parameter.empty

    # Token probabilities are recorded only while their view is open (closed, they cost nothing).
    for event, shown in ((chat.probabilities_view.expand, True), (chat.probabilities_view.collapse, False)):
        event(functools.partial(handlers.inspector.show_probabilities, shown), [conversation, session],
              chat.probabilities, queue=False, **quiet, **private)

    # The inspector follows the draft and the settings (always_last: a natural debounce).
    refresh = with_options(handlers, handlers.inspector.refresh_and_keep_session,
                           [("value", empty), *turn, ("show_ids", empty)])
    refresh_inspector = dict(fn=refresh, inputs=[chat.composer, conversation, session, inspector.show_ids, *options],
                             outputs=[*inspector.layers, session], **quiet, trigger_mode="always_last",
                             concurrency_limit=4, concurrency_id="inspector", **private)
    for name in ("system_prompt", "thinking", "image_budget", "enabled_tools"):
        layout.options[name].change(**refresh_inspector)
    for component in (chat.composer, inspector.show_ids):
        component.change(**refresh_inspector)
    demo.load(**refresh_inspector)
    # A coloured layer that could not apply its patch asks for the whole inspector (tail_patched_html).
    for layer in (inspector.messages, inspector.template, inspector.expanded_colour):
        layer.clear(handlers.inspector.resend, [session], None, queue=False, **private).then(**refresh_inspector)
    # A plain text is filled while its accordion is open (inspector_updates says why).
    for name, view in inspector.plain_text_views.items():
        box = getattr(inspector, name)
        for event, shown in ((view.expand, True), (view.collapse, False)):
            event(functools.partial(handlers.inspector.show_plain_text, name, shown), [session], box, queue=False,
                  **quiet, **private).then(**refresh_inspector)
    # A click on a message maps its media (the soft-token map shows that message's).
    chat.history.select(handlers.inspector.pick_message, [conversation, session], None, queue=False,
                        **private).then(**refresh_inspector)


def _wire_tools(w: _Wiring) -> None:
    """Tools the user declares (for this user only)."""
    handlers, layout, tools, session = w.handlers, w.layout, w.layout.tools, w.layout.session
    enabled = layout.options["enabled_tools"]
    declared = DeclareToolOutputs(enabled=enabled, docs=tools.tool_docs, schema=tools.schema_box,
                                  remove_row=tools.remove_row, remove_choice=tools.remove_choice,
                                  notice=tools.declare_notice)
    tools.declare.click(handlers.tools.add_tool, [tools.schema_box, enabled, session], list(declared),
                        api_name="declare_tool", **w.own)
    removed = RemoveToolOutputs(enabled=enabled, docs=tools.tool_docs, remove_row=tools.remove_row,
                                remove_choice=tools.remove_choice, notice=tools.declare_notice)
    tools.remove.click(handlers.tools.remove_tool, [tools.remove_choice, enabled, session], list(removed),
                       api_name="remove_tool", **w.own)


def _wire_files(w: _Wiring) -> None:
    """Take it with you: the conversation and the raw template as files; loading back."""
    handlers, layout, chat, inspector, tools = w.handlers, w.layout, w.layout.chat, w.layout.inspector, w.layout.tools
    conversation, session, options = layout.conversation, layout.session, layout.option_inputs
    empty, private, after = inspect.Parameter.empty, w.private, w.after
    export = with_options(handlers, handlers.files.export_files, [("conversation", empty), ("session", empty)])
    inspector.export.click(export, [conversation, session, *options], inspector.exported, api_name="export",
                           **w.own)
    loaded = LoadOutputs(history=chat.history, live=chat.live, conversation=conversation, docs=tools.tool_docs,
                         **layout.options)
    inspector.upload_chat.upload(handlers.files.load_chat, [inspector.upload_chat, session], list(loaded),
                                 show_progress_on=[chat.live], **private, **w.own).then(**after)
