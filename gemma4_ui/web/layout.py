"""The page's layout: builders that make each part of the page and return its components
(ChatColumn, InspectorTab, ToolsTab, the settings), put together by `build_layout`. The
wiring (wiring.py) connects them to the handlers.

Building the layout loads no model and touches no GPU: the engine is passed in (loaded or not).
Stable elem_ids for browser tests: chatbot (the chat's box; chat-history and chat-live, its
two Chatbots), composer, stop, thinking, system-prompt,
model-status, token-counts, template-messages, template-raw, template-expanded, new-chat,
soft-token-map, template-expanded-colour, token-probabilities.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from gemma4_ui.config import IMAGE_BUDGETS, Settings
from gemma4_ui.core.conversation import Conversation
from gemma4_ui.core.options import MAX_REPETITION_GUARD, USER_OPTIONS, ChatOptions
from gemma4_ui.inspector.expanded_view import LEGEND as EXPANDED_LEGEND
from gemma4_ui.inspector.layers import TEMPLATE_LEGEND
from gemma4_ui.tools.registry import ToolRegistry
from gemma4_ui.web.chat_history import ChatHistory
from gemma4_ui.web.examples import EXAMPLE_SCHEMA, chat_examples, examples
from gemma4_ui.web.handlers import compare
from gemma4_ui.web.handlers.branches import COMPARE_LAST, COMPARE_LAST_LABEL
from gemma4_ui.web.handlers.shared import SharedChatHandlers
from gemma4_ui.web.handlers.tools import tool_choices, tools_markdown
from gemma4_ui.web.outputs import BranchBar, InspectorLayers
from gemma4_ui.web.tail_patched_html import tail_patched_html

LAYERS = {"Messages": "layer-messages", "Template": "layer-template", "Expanded": "layer-expanded"}
# What layers 2 and 3 say before there is anything to send (layer 1 shows the empty request).
LAYER_EMPTY = "Shows here once there is a message or a file to send."
WIDE_SCREEN = "(min-width: 1800px)"  # a projector or a big monitor: the side column gets half the width
_SHOWN_WHEN_PICKED = "".join(
    f"#layers:has(#layer-choice input[value='{name}']:checked) #{elem_id} {{ display: flex; }}\n"
    for name, elem_id in LAYERS.items())
LAYERS_CSS = """
#layer-choice { margin-bottom: var(--spacing-md); }
#layer-choice .wrap { flex-wrap: nowrap; gap: var(--spacing-sm); }
#layer-choice label { flex: 1 1 0; min-width: 0; justify-content: center; padding: var(--spacing-sm); }
#protocol-layers > .column { display: none; }
""" + _SHOWN_WHEN_PICKED + f"""
@media {WIDE_SCREEN} {{
  #layer-choice {{ display: none; }}
  #protocol-layers > .column {{ display: flex !important; flex: 1 1 0; min-width: 0; }}
  #side-column {{ flex-grow: 3 !important; }}
}}
"""
# How the Chatbot renders messages. Gradio's Chatbot re-processes its messages on each
# streamed update, so what a message costs is paid again and again late in a long chat:
# no LaTeX scan (Gemma's replies are markdown and code; `$` in them is money, not maths).
CHAT_RENDERING = dict(latex_delimiters=[])


def _status_html(status, second=None) -> str:
    """One line (the model, where it runs, how far to trust it); the whole status on a tap,
    with the second model Compare can answer with."""
    also = (f"<p>Compare's side B can also answer with {html.escape(second.describe())}</p>"
            if second is not None else "")
    return (f"<details><summary>{html.escape(status.headline())}{' (+1 to compare)' if second else ''}</summary>"
            f"<p>{html.escape(status.describe())}</p>{also}</details>")


# How long Gradio keeps a user's conversation and session after their last turn (or, for the
# session, the last change of the draft): an hour once the page is closed (wire says how).
SESSION_SECONDS = 6 * 3600


# -- layout: each builder makes its part of the page and returns its components ---------------

@dataclass
class ChatColumn:
    history: gr.Chatbot  # the settled turns (the Chatbot's own buttons and events live here)
    live: gr.Chatbot  # what the streaming turn adds, then a notice or nothing
    composer: gr.MultimodalTextbox
    staged: gr.MultimodalTextbox  # the draft on its way from `stage` to `respond`
    shows_messages: gr.Checkbox  # whether the page shows a conversation, read at each send (SHOWS_MESSAGES_JS)
    tool_row: gr.Row
    tool_answer: gr.Textbox
    tool_submit: gr.Button
    tool_cancel: gr.Button
    stop: gr.Button
    new_chat: gr.Button
    branches: BranchBar  # ‹ 2 / 3 › for a message with versions
    probabilities_view: gr.Accordion
    probabilities: gr.HTML


@dataclass
class ComparePanel:
    """Compare: what side B changes, the button, and the two columns with what differed."""

    side_b: dict[str, gr.components.Component]  # by the API's name (handlers.compare.SIDE_B)
    run: gr.Button
    panel: gr.Column
    a_heading: gr.Markdown
    a_chat: gr.Chatbot
    keep_a: gr.Button
    b_heading: gr.Markdown
    b_chat: gr.Chatbot
    keep_b: gr.Button
    counts: gr.HTML
    diff: gr.HTML
    message: gr.Dropdown  # which message both answer (handlers.compare.MESSAGE)


@dataclass
class InspectorTab:
    counts: gr.HTML
    note: gr.Markdown
    soft_tokens: gr.HTML
    messages: gr.HTML
    messages_text: gr.Textbox
    template: gr.HTML
    template_text: gr.Textbox
    show_ids: gr.Checkbox
    expanded: gr.Textbox
    expanded_colour: gr.HTML
    reply_stats: gr.JSON
    raw_output: gr.Textbox
    parsed_output: gr.JSON
    export: gr.Button
    exported: gr.File
    upload_chat: gr.UploadButton
    plain_text_views: dict[str, gr.Accordion]  # by layer name (InspectorLayers, inspector_updates.PLAIN_TEXT)

    @property
    def layers(self) -> InspectorLayers:
        """The components the inspector's refresh updates."""
        return InspectorLayers(counts=self.counts, messages=self.messages, messages_text=self.messages_text,
                               template=self.template, template_text=self.template_text, expanded=self.expanded,
                               note=self.note, maps=self.soft_tokens, expanded_colour=self.expanded_colour)


@dataclass
class ToolsTab:
    tool_docs: gr.Markdown
    schema_box: gr.Code
    declare: gr.Button
    declare_notice: gr.Markdown
    remove_row: gr.Row
    remove_choice: gr.Dropdown
    remove: gr.Button


@dataclass
class Layout:
    conversation: gr.State
    session: gr.State
    restore: gr.State  # a draft to give back to the composer when its turn failed
    chat: ChatColumn
    inspector: InspectorTab
    tools: ToolsTab
    compare: ComparePanel
    options: dict[str, gr.components.Component]  # by ChatOptions field, in USER_OPTIONS order

    @property
    def option_inputs(self) -> list:
        return [self.options[name] for name in USER_OPTIONS]


def _chat_column(default_tools: list[str]) -> ChatColumn:
    # One scrolling box holds both Chatbots (display.py says why there are two); it follows
    # the newest message (CHAT_SCROLL_JS), theirs do not scroll.
    with gr.Column(elem_id="chatbot"):
        history = ChatHistory(
            elem_id="chat-history", show_label=False, editable="user", buttons=["copy"], autoscroll=False,
            placeholder="Ask something, attach an image, audio or video, or pick an example.",
            group_consecutive_messages=False, examples=chat_examples(default_tools), **CHAT_RENDERING,
        )
        live = gr.Chatbot(elem_id="chat-live", show_label=False, buttons=["copy"], autoscroll=False,
                          group_consecutive_messages=False, **CHAT_RENDERING)
    branches = _branch_bar()
    composer = gr.MultimodalTextbox(
        elem_id="composer", show_label=False, sources=["upload", "microphone"],
        file_types=["image", "audio", "video"], file_count="multiple",
        placeholder="Message Gemma 4",
    )
    staged = gr.MultimodalTextbox(visible=False, file_count="multiple")
    shows_messages = gr.Checkbox(visible=False)
    with gr.Row(visible=False) as tool_row:
        tool_answer = gr.Textbox(label="Result for the tool call (JSON or text)", scale=4, elem_id="tool-answer")
        tool_submit = gr.Button("Send result", variant="primary", scale=1, elem_id="tool-submit")
        tool_cancel = gr.Button("Cancel call", scale=1, elem_id="tool-cancel")
    with gr.Row(elem_id="actions"):
        stop = gr.Button("⏹ Stop", elem_id="stop", variant="stop", size="sm", interactive=False)
        new_chat = gr.Button("🆕 New conversation", elem_id="new-chat", size="sm")
    with gr.Accordion("🎯 Token probabilities of the last reply", open=False,
                      elem_id="token-probabilities-view") as probabilities_view:
        probabilities = gr.HTML(elem_id="token-probabilities")
    return ChatColumn(history=history, live=live, composer=composer, staged=staged, shows_messages=shows_messages,
                      tool_row=tool_row, tool_answer=tool_answer, tool_submit=tool_submit, tool_cancel=tool_cancel,
                      stop=stop, new_chat=new_chat, branches=branches, probabilities_view=probabilities_view,
                      probabilities=probabilities)


def _branch_bar() -> BranchBar:
    """Real buttons and a list, so that a mouse, a finger and the keyboard all reach them."""
    with gr.Row(visible=False, elem_id="branch-bar", equal_height=True) as row:
        pick = gr.Dropdown(label="Versions of", choices=[], elem_id="branch-pick", scale=4, min_width=160,
                           allow_custom_value=False)
        previous = gr.Button("‹", elem_id="branch-previous", size="sm", scale=0, min_width=44, interactive=False)
        count = gr.Markdown(elem_id="branch-count")
        next_ = gr.Button("›", elem_id="branch-next", size="sm", scale=0, min_width=44, interactive=False)
    return BranchBar(row=row, pick=pick, count=count, previous=previous, next=next_)


def _compare_panel(models: list[str], tool_names: list[str]) -> ComparePanel:
    """Side A is the chat's settings; B is the same but for what is changed here. The columns
    stand side by side where there is room for both, one above the other on a phone."""
    with gr.Accordion("⚖️ Compare two answers", open=False, elem_id="compare-view"):
        gr.Markdown("Answer a message twice: **A** with the settings, **B** with what you change here.",
                    elem_id="compare-help")
        message = gr.Dropdown([(COMPARE_LAST_LABEL, COMPARE_LAST)], value=COMPARE_LAST, label="Answer",
                              elem_id="compare-message")
        with gr.Row(elem_id="compare-side-b"):
            model = gr.Dropdown([(f"same ({models[0]})", compare.SAME), *((name, name) for name in models[1:])],
                                value=compare.SAME, label="B: model", elem_id="compare-model", min_width=160,
                                visible=len(models) > 1)
            thinking = gr.Radio(list(compare.THINKING_CHOICES), value=compare.SAME, label="B: thinking",
                                elem_id="compare-thinking", min_width=160)
            budget = gr.Dropdown(list(compare.BUDGET_CHOICES), value=compare.SAME, label="B: image budget",
                                 elem_id="compare-budget", min_width=160)
            temperature = gr.Dropdown(list(compare.TEMPERATURE_CHOICES), value=compare.SAME, label="B: temperature",
                                      allow_custom_value=True, elem_id="compare-temperature", min_width=160)
            tools = gr.Dropdown([*compare.TOOLS_CHOICES, *tool_names], value=[], multiselect=True,
                                allow_custom_value=True, label="B: tools (empty: same as A)", elem_id="compare-tools",
                                min_width=160)
            seed = gr.Dropdown([compare.SAME, "-1", "0", "1", "2"], value=compare.SAME, label="B: seed",
                               allow_custom_value=True, elem_id="compare-seed", min_width=160)
        with gr.Row(elem_id="compare-system-row"):
            system_prompt = gr.Textbox("", label="B: system prompt (empty: same as A)", lines=1, scale=3,
                                       elem_id="compare-system")
            no_system_prompt = gr.Checkbox(False, label="B: no system prompt", scale=1, min_width=160,
                                           elem_id="compare-no-system")
        run = gr.Button("⚖️ Compare", variant="primary", size="sm", elem_id="compare-run")
    with gr.Column(visible=False, elem_id="compare-panel") as panel:
        with gr.Row(elem_id="compare-columns", equal_height=False):
            columns = []
            for side in ("A", "B"):
                with gr.Column(min_width=280, elem_id=f"compare-{side.lower()}"):
                    heading = gr.Markdown(elem_id=f"compare-{side.lower()}-heading")
                    shown = gr.Chatbot(show_label=False, height=320, buttons=["copy"], group_consecutive_messages=False,
                                       elem_id=f"compare-{side.lower()}-chat", **CHAT_RENDERING)
                    keep = gr.Button(f"Keep {side}", size="sm", elem_id=f"keep-{side.lower()}")
                    columns.append((heading, shown, keep))
        counts = gr.HTML(elem_id="compare-counts")
        with gr.Accordion("What differed in the raw template (layer 2)", open=True, elem_id="compare-diff-view"):
            diff = gr.HTML(elem_id="compare-diff")
    (a_heading, a_chat, keep_a), (b_heading, b_chat, keep_b) = columns
    side_b = dict(zip(compare.SIDE_B, (thinking, budget, temperature, system_prompt, tools, seed, model,
                                       no_system_prompt), strict=True))
    return ComparePanel(side_b=side_b, run=run, panel=panel, a_heading=a_heading, a_chat=a_chat, keep_a=keep_a,
                        b_heading=b_heading, b_chat=b_chat, keep_b=keep_b, counts=counts, diff=diff, message=message)


def _inspector_tab() -> InspectorTab:
    counts = gr.HTML(elem_id="token-counts")
    note = gr.Markdown(visible=False, elem_id="inspector-note")
    with gr.Accordion("What the model sees: the soft tokens", open=True):
        soft_tokens = gr.HTML(elem_id="soft-token-map")
    # The three protocol layers: side by side on wide screens; on narrow ones one at a time,
    # picked with the switch above them (CSS alone shows the picked one, see LAYERS_CSS), so
    # all three stay rendered and current whichever is shown.
    with gr.Column(elem_id="layers"):  # its :has() rule stays local to the layers (cheap to restyle)
        gr.Radio(list(LAYERS), value=next(iter(LAYERS)), show_label=False, container=False, interactive=True,
                 elem_id="layer-choice")
        with gr.Row(elem_id="protocol-layers", equal_height=False):
            with gr.Column(elem_id="layer-messages", min_width=0):
                messages = tail_patched_html("template-messages", "Layer 1: data passed to apply_chat_template",
                                             body_class="jv-lines")
                with gr.Accordion("Plain text (copy)", open=False) as messages_text_view:
                    messages_text = gr.Textbox(show_label=False, lines=14, max_lines=30, buttons=["copy"],
                                               interactive=False, elem_id="template-messages-text")
            with gr.Column(elem_id="layer-template", min_width=0):
                template = tail_patched_html("template-raw", "Layer 2: apply_chat_template(tokenize=False)",
                                             head=TEMPLATE_LEGEND, body_class="tv-tokens", empty=LAYER_EMPTY)
                with gr.Accordion("Plain text (copy)", open=False) as template_text_view:
                    template_text = gr.Textbox(show_label=False, lines=14, max_lines=30, buttons=["copy"],
                                               interactive=False, elem_id="template-text")
            with gr.Column(elem_id="layer-expanded", min_width=0):
                expanded_colour = tail_patched_html("template-expanded-colour", "Layer 3: processor(...) input_ids",
                                                    head=EXPANDED_LEGEND, body_class="xv-tokens", empty=LAYER_EMPTY)
                with gr.Accordion("Plain text (copy)", open=False) as expanded_text_view:
                    show_ids = gr.Checkbox(label="Show token ids", value=False)
                    expanded = gr.Textbox(
                        elem_id="template-expanded", lines=14, max_lines=30, buttons=["copy"],
                        label="Layer 3: the processor's input_ids, soft-token runs collapsed",
                    )
    with gr.Tabs(elem_id="reply-and-files"):
        with gr.Tab("Last reply"):
            reply_stats = gr.JSON(label="Reply stats", elem_id="reply-stats")
            raw_output = gr.Textbox(label="Raw output (special tokens kept)", lines=6, elem_id="raw-output",
                                    buttons=["copy"])
            parsed_output = gr.JSON(label="Parsed", elem_id="parsed-output")
        with gr.Tab("Save / load"):
            export = gr.Button("⬇ Export conversation and template", size="sm", elem_id="export")
            exported = gr.File(label="Files", file_count="multiple", interactive=False, elem_id="exported")
            # A button, not gr.File: once a file is uploaded, gr.File makes the page wait a frame
            # each time it reads its value, which Gradio does at every streamed update of a reply.
            upload_chat = gr.UploadButton("⬆ Load a conversation (JSON)", file_types=[".json"], size="sm",
                                          elem_id="upload-chat")
    return InspectorTab(counts=counts, note=note, soft_tokens=soft_tokens, messages=messages,
                        messages_text=messages_text, template=template, template_text=template_text, show_ids=show_ids,
                        expanded=expanded, expanded_colour=expanded_colour, reply_stats=reply_stats,
                        raw_output=raw_output, parsed_output=parsed_output, export=export, exported=exported,
                        upload_chat=upload_chat,
                        plain_text_views={"messages_text": messages_text_view, "template_text": template_text_view,
                                          "expanded": expanded_text_view})


def _settings_tab(defaults: ChatOptions, settings: Settings) -> dict:
    return {
        "system_prompt": gr.Textbox(label="System prompt", value=defaults.system_prompt, lines=3,
                                    elem_id="system-prompt"),
        "thinking": gr.Checkbox(label="Thinking (enable_thinking)", value=defaults.thinking, elem_id="thinking"),
        "max_new_tokens": gr.Slider(1, settings.max_new_tokens_cap, value=defaults.max_new_tokens, step=1,
                                    label="Max new tokens", elem_id="max-new-tokens"),
        "temperature": gr.Slider(0.0, 2.0, value=defaults.temperature, step=0.05, label="Temperature (0 = greedy)",
                                 elem_id="temperature"),
        "top_p": gr.Slider(0.05, 1.0, value=defaults.top_p, step=0.05, label="Top-p"),
        "top_k": gr.Slider(1, 256, value=defaults.top_k, step=1, label="Top-k"),
        "image_budget": gr.Radio(list(IMAGE_BUDGETS), value=defaults.image_budget, label="Image token budget",
                                 elem_id="image-budget"),
        "repetition_guard": gr.Slider(0, MAX_REPETITION_GUARD, value=defaults.repetition_guard, step=1,
                                      label="Repetition guard: stop a reply that repeats itself this many times "
                                            "(0 = off)", elem_id="repetition-guard"),
        "seed": gr.Number(value=defaults.seed, precision=0, minimum=-1, label="Seed (-1 = a fresh one each reply)",
                          elem_id="seed"),
    }


def _tools_tab(defaults: ChatOptions, registry: ToolRegistry) -> tuple[ToolsTab, dict]:
    options = {
        "enabled_tools": gr.CheckboxGroup(tool_choices(registry), value=list(defaults.enabled_tools),
                                          label="Enabled tools", elem_id="enabled-tools"),
        "max_tool_rounds": gr.Slider(1, 10, value=defaults.max_tool_rounds, step=1,
                                     label="Tool rounds per reply (limit)"),
    }
    tool_docs = gr.Markdown(tools_markdown(registry), elem_id="tool-docs")
    schema_box = gr.Code(language="json", label="Declare a tool (JSON schema)", lines=8, elem_id="declare-schema",
                         interactive=True)
    gr.Examples([[EXAMPLE_SCHEMA]], inputs=[schema_box], label="Example schema",
                example_labels=["📦 lookup_order: you type the order's status"])
    declare = gr.Button("Add tool", size="sm", elem_id="declare-tool")
    declare_notice = gr.Markdown(elem_id="declare-notice")
    with gr.Row(visible=False, elem_id="remove-tool-row") as remove_row:
        remove_choice = gr.Dropdown([], label="Declared tool", scale=3, elem_id="remove-tool-name")
        remove = gr.Button("Remove tool", size="sm", scale=1, elem_id="remove-tool")
    return ToolsTab(tool_docs=tool_docs, schema_box=schema_box, declare=declare, declare_notice=declare_notice,
                    remove_row=remove_row, remove_choice=remove_choice, remove=remove), options


def build_layout(handlers: SharedChatHandlers) -> Layout:
    """The page: title and model status, the chat, and the inspector / settings / tools tabs."""
    defaults = handlers.default_options()
    conversation = gr.State(Conversation(), time_to_live=SESSION_SECONDS)
    session = gr.State(handlers.new_session(), time_to_live=SESSION_SECONDS)
    restore = gr.State(None)

    with gr.Row(equal_height=False, elem_id="header"):
        gr.Markdown("## 💎 Gemma 4 UI", elem_id="title")
        second = handlers.shared.second
        gr.HTML(_status_html(handlers.engine.status, second.status if second else None), elem_id="model-status",
                padding=False)

    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=320, elem_id="chat-column"):
            chat = _chat_column(defaults.enabled_tools)
            compare = _compare_panel(handlers.shared.models(), [spec.name for spec in handlers.registry.specs()])
        with gr.Column(scale=2, min_width=320, elem_id="side-column"):
            with gr.Tabs():
                with gr.Tab("Inspector", id="inspector"):
                    inspector = _inspector_tab()
                with gr.Tab("Settings", id="settings"):
                    options = _settings_tab(defaults, handlers.settings)
                with gr.Tab("Tools", id="tools"):
                    tools, tool_options = _tools_tab(defaults, handlers.registry)
                    options.update(tool_options)
            example_rows, example_labels = examples(defaults.enabled_tools)
            gr.Examples(example_rows, inputs=[chat.composer, options["thinking"], options["enabled_tools"]],
                        label="Examples", example_labels=example_labels, examples_per_page=len(example_rows),
                        elem_id="examples")
    return Layout(conversation=conversation, session=session, restore=restore, chat=chat, inspector=inspector,
                  tools=tools, compare=compare, options=options)
