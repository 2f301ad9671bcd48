"""The Gradio Blocks layout, wired to `ChatSession`'s handlers.

Building the UI loads no model and touches no GPU: the engine is passed in (loaded or not).
Stable elem_ids for browser tests: chatbot, composer, stop, thinking, system-prompt,
model-status, token-counts, template-messages, template-raw, template-expanded, new-chat.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import gradio as gr

from .config import EXAMPLES_DIR, IMAGE_BUDGETS
from .conversation import Conversation
from .display import render
from .inspector import HIGHLIGHT_COLORS
from .session import ChatSession
from .tools import ToolSchemaError, ToolRegistry
from . import transcript

CSS = """
#model-status { font-size: 0.95em; }
#model-status p { margin: 0; }
.ctx-meter { height: 10px; background: var(--block-border-color); border-radius: 5px; overflow: hidden; }
.ctx-meter > div { height: 100%; background: var(--color-accent); }
.ctx-label { font-size: 0.85em; margin: 4px 0 8px; }
.token-counts table { width: 100%; font-size: 0.9em; }
#template-raw .textfield { font-family: var(--font-mono); white-space: pre-wrap; font-size: 0.85em; }
#template-expanded textarea, #raw-output textarea { font-family: var(--font-mono); font-size: 0.85em; }
@media (max-width: 640px) {
  #chatbot { height: 60vh !important; }
  #title h2 { font-size: 1.2em; }
}
"""

def _examples() -> tuple[list[list], list[str]]:
    """One example per capability, with the media shipped in assets/examples/: rows of
    (composer, thinking, enabled tools), and their labels."""
    def files(*names: str) -> list[str]:
        return [str(EXAMPLES_DIR / n) for n in names]

    rows = [
        ("🖼️ Image question", {"text": "What do you see in this image?", "files": files("shapes.png")}, False, []),
        ("🖼️🖼️ Two images", {"text": "How many images did I send?", "files": files("shapes.png", "street.jpg")},
         False, []),
        ("🔊 Audio transcription", {"text": "Transcribe this audio.", "files": files("speech.wav")}, False, []),
        ("🎞️ Video question", {"text": "What happens in this video?", "files": files("bouncing_ball.mp4")},
         False, []),
        ("💭 Thinking", {"text": "Plan a day trip to Lisbon in three steps.", "files": []}, True, []),
        ("🛠️ Tool call", {"text": "What's the weather in Ouagadougou?", "files": []}, True,
         ["get_current_weather"]),
        ("🧮 Calculator", {"text": "What's 17.5% of 2,340?", "files": []}, False, ["calculator"]),
    ]
    return [list(row[1:]) for row in rows], [row[0] for row in rows]


QUEUE_POLL_SECONDS = 0.01


def enable_queue(demo: gr.Blocks, concurrency: int) -> gr.Blocks:
    """Queue every event, at most `concurrency` generations at once (one GPU is never
    oversubscribed; waiting users see their place). Gradio's queue looks for work every
    millisecond by default, which takes about 4% of a CPU from generation; every 10 ms
    delays the start of a queued event by at most that. (A private attribute: no public
    setting exists; without it the default stays.)"""
    demo.queue(default_concurrency_limit=concurrency)
    queue = getattr(demo, "_queue", None)
    if hasattr(queue, "sleep_when_free"):
        queue.sleep_when_free = QUEUE_POLL_SECONDS
    return demo


def _tool_choices(registry: ToolRegistry) -> list[tuple[str, str]]:
    return [(f"{spec.label} — {spec.name}", spec.name) for spec in registry.specs()]


def _tools_markdown(registry: ToolRegistry) -> str:
    parts = []
    for spec in registry.specs():
        kind = {"builtin": "built-in", "python": "Python", "declared": "declared: you type its results"}[spec.source]
        demo = " · **demo, sample data**" if spec.demo else ""
        parts.append(f"<details><summary><b>{spec.label}</b> <code>{spec.name}</code> ({kind}{demo})</summary>\n\n"
                     f"```json\n{json.dumps(spec.schema, indent=2)}\n```\n</details>")
    return "\n".join(parts)


def build_ui(session: ChatSession) -> gr.Blocks:
    settings = session.settings
    registry = session.registry

    with gr.Blocks(title="Gemma 4 UI", fill_height=False, delete_cache=(3600, 7200)) as demo:
        conversation = gr.State(Conversation(), time_to_live=6 * 3600)
        declared = gr.State([])
        restore = gr.State(None)

        with gr.Row(equal_height=False):
            gr.Markdown("## 💎 Gemma 4 UI", elem_id="title")
            status = gr.Markdown(session.engine.status.describe(), elem_id="model-status")

        with gr.Row(equal_height=False):
            # -- the chat -----------------------------------------------------------------------
            with gr.Column(scale=3, min_width=320):
                chatbot = gr.Chatbot(
                    elem_id="chatbot", show_label=False, height=560, editable="user", buttons=["copy"],
                    placeholder="Ask something, attach an image, audio or video, or pick an example below.",
                    group_consecutive_messages=False,
                )
                composer = gr.MultimodalTextbox(
                    elem_id="composer", show_label=False, sources=["upload", "microphone"],
                    file_types=["image", "audio", "video"], file_count="multiple",
                    placeholder="Message Gemma 4 — Enter to send, Shift+Enter for a new line",
                )
                staged = gr.MultimodalTextbox(visible=False, file_count="multiple")
                with gr.Row(visible=False) as tool_row:
                    tool_answer = gr.Textbox(label="Result for the tool call (JSON or text)", scale=4,
                                             elem_id="tool-answer")
                    tool_submit = gr.Button("Send result", variant="primary", scale=1, elem_id="tool-submit")
                    tool_cancel = gr.Button("Cancel call", scale=1, elem_id="tool-cancel")
                with gr.Row():
                    stop = gr.Button("⏹ Stop", elem_id="stop", variant="stop", size="sm", interactive=False)
                    new_chat = gr.Button("🆕 New conversation", elem_id="new-chat", size="sm")

            # -- settings, tools, inspector -------------------------------------------------------
            with gr.Column(scale=2, min_width=320):
                with gr.Tabs():
                    with gr.Tab("Inspector", id="inspector"):
                        counts = gr.HTML(elem_id="token-counts")
                        inspector_note = gr.Markdown(visible=False, elem_id="inspector-note")
                        with gr.Tabs():
                            with gr.Tab("Messages"):
                                layer_messages = gr.Code(language="json", elem_id="template-messages",
                                                         label="Layer 1: data passed to apply_chat_template")
                            with gr.Tab("Template"):
                                layer_template = gr.HighlightedText(
                                    elem_id="template-raw", label="Layer 2: apply_chat_template(tokenize=False)",
                                    color_map=HIGHLIGHT_COLORS, combine_adjacent=False, show_legend=True,
                                )
                                with gr.Accordion("Plain text (copy)", open=False):
                                    template_text = gr.Code(language=None, show_label=False, interactive=False,
                                                            elem_id="template-text")
                            with gr.Tab("Expanded"):
                                show_ids = gr.Checkbox(label="Show token ids", value=False)
                                layer_expanded = gr.Textbox(
                                    elem_id="template-expanded", lines=14, max_lines=30, buttons=["copy"],
                                    label="Layer 3: the processor's input_ids, soft-token runs collapsed",
                                )
                            with gr.Tab("Last reply"):
                                reply_stats = gr.JSON(label="Reply stats", elem_id="reply-stats")
                                raw_output = gr.Textbox(label="Raw output (special tokens kept)", lines=6,
                                                        elem_id="raw-output", buttons=["copy"])
                                parsed_output = gr.JSON(label="Parsed", elem_id="parsed-output")
                            with gr.Tab("Save / load"):
                                export = gr.Button("⬇ Export conversation and template", size="sm",
                                                   elem_id="export")
                                exported = gr.File(label="Files", file_count="multiple", interactive=False,
                                                   elem_id="exported")
                                upload_chat = gr.File(label="Load a conversation (JSON)", file_types=[".json"],
                                                      elem_id="upload-chat")
                    with gr.Tab("Settings", id="settings"):
                        system_prompt = gr.Textbox(label="System prompt", value=settings.system_prompt, lines=3,
                                                   elem_id="system-prompt")
                        thinking = gr.Checkbox(label="Thinking (enable_thinking)", value=settings.thinking,
                                               elem_id="thinking")
                        max_new_tokens = gr.Slider(1, settings.max_new_tokens_cap, value=settings.max_new_tokens,
                                                   step=1, label="Max new tokens", elem_id="max-new-tokens")
                        temperature = gr.Slider(0.0, 2.0, value=1.0, step=0.05,
                                                label="Temperature (0 = greedy)", elem_id="temperature")
                        top_p = gr.Slider(0.05, 1.0, value=0.95, step=0.05, label="Top-p")
                        top_k = gr.Slider(1, 256, value=64, step=1, label="Top-k")
                        image_budget = gr.Radio(list(IMAGE_BUDGETS), value=280, label="Image token budget",
                                                elem_id="image-budget")
                    with gr.Tab("Tools", id="tools"):
                        enabled_tools = gr.CheckboxGroup(_tool_choices(registry), value=[], label="Enabled tools",
                                                         elem_id="enabled-tools")
                        max_tool_rounds = gr.Slider(1, 10, value=settings.max_tool_rounds, step=1,
                                                    label="Tool rounds per reply (limit)")
                        tool_docs = gr.Markdown(_tools_markdown(registry))
                        schema_box = gr.Code(language="json", label="Declare a tool (JSON schema)", lines=8,
                                             elem_id="declare-schema", interactive=True)
                        declare = gr.Button("Add tool", size="sm", elem_id="declare-tool")

                example_rows, example_labels = _examples()
                gr.Examples(example_rows, inputs=[composer, thinking, enabled_tools], label="Examples",
                            example_labels=example_labels, examples_per_page=len(example_rows),
                            elem_id="examples")

        options = [system_prompt, thinking, max_new_tokens, temperature, top_p, top_k, image_budget,
                   enabled_tools, max_tool_rounds]
        chat_outputs = [chatbot, conversation, restore]
        inspector_outputs = [counts, layer_messages, layer_template, template_text, layer_expanded,
                             inspector_note]

        def refresh_inspector(value, conv, decl, ids, *opts):
            view = session.inspect(value, conv, decl, ids, *opts)
            note = gr.update(value=f"⚠️ {view.warning}", visible=True) if view.warning else gr.update(visible=False)
            return view.counts, view.messages, view.template, view.template_raw, view.expanded, note

        def after_turn(conv: Conversation, restore_value, decl, ids, *opts):
            """Re-enable the composer (giving back a draft that failed), show the client-tool
            box if a call waits, and bring the inspector and last-reply panels up to date."""
            pending = session.pending_client_call(conv)
            composer_update = gr.update(interactive=True, value=restore_value) if restore_value else gr.update(
                interactive=True)
            stats, raw, parsed = transcript.last_reply(conv)
            return (composer_update, gr.update(interactive=False), gr.update(visible=pending is not None),
                    gr.update(value=""), stats, raw, parsed, *refresh_inspector(None, conv, decl, ids, *opts))

        after_outputs = [composer, stop, tool_row, tool_answer, reply_stats, raw_output, parsed_output,
                         *inspector_outputs]

        def stage(value, conv):
            composer_update, staged_value, chat = session.stage(value, conv)
            return composer_update, staged_value, chat, gr.update(interactive=staged_value is not None)

        def running():
            return gr.update(interactive=True)

        after_inputs = [conversation, restore, declared, show_ids, *options]
        gpu = dict(concurrency_limit=settings.gpu_concurrency, concurrency_id="gpu")

        # 1. Send: check and show the message, stream the reply, then settle the composer.
        composer.submit(stage, [composer, conversation], [composer, staged, chatbot, stop],
                        api_visibility="private", queue=False).then(
            session.respond, [staged, conversation, declared, *options], chat_outputs, api_name="chat",
            show_progress="minimal", **gpu,
        ).then(after_turn, after_inputs, after_outputs, api_visibility="private", show_progress="hidden")

        # 2. Stop: a flag the running turn checks between tokens (the reply it has so far stays).
        stop.click(session.stop, None, None, queue=False, api_name="stop")

        # 3. Retry, undo and edit of the last message.
        chatbot.retry(running, None, stop, queue=False, api_visibility="private").then(
            session.retry, [conversation, declared, *options], chat_outputs, api_visibility="private", **gpu,
        ).then(after_turn, after_inputs, after_outputs, api_visibility="private", show_progress="hidden")
        chatbot.undo(session.undo, [conversation], [chatbot, conversation, composer], api_visibility="private")
        chatbot.edit(session.edit, [conversation, declared, *options], chat_outputs, api_visibility="private",
                     **gpu).then(after_turn, after_inputs, after_outputs, api_visibility="private",
                                 show_progress="hidden")
        chatbot.edit(running, None, stop, queue=False, api_visibility="private")

        # 4. Client tools: the user answers (or cancels) a call the model made.
        for trigger, handler, inputs, name in (
            (tool_submit.click, session.answer_tool, [tool_answer, conversation, declared, *options], "tool_result"),
            (tool_answer.submit, session.answer_tool, [tool_answer, conversation, declared, *options], None),
            (tool_cancel.click, session.cancel_tool, [conversation, declared, *options], "cancel_tool"),
        ):
            trigger(running, None, stop, queue=False, api_visibility="private").then(
                handler, inputs, chat_outputs, api_name=name, api_visibility="public" if name else "private", **gpu,
            ).then(after_turn, after_inputs, after_outputs, api_visibility="private", show_progress="hidden")

        # 5. New conversation.
        def reset():
            return [], Conversation(), None, gr.update(value=None, interactive=True), gr.update(visible=False)

        new_chat.click(reset, None, [chatbot, conversation, restore, composer, tool_row], api_name="new_conversation",
                       queue=False).then(after_turn, after_inputs, after_outputs, api_visibility="private",
                                         show_progress="hidden")
        # The Chatbot's own trash button clears the display; the conversation goes with it.
        chatbot.clear(reset, None, [chatbot, conversation, restore, composer, tool_row], api_visibility="private",
                      queue=False).then(after_turn, after_inputs, after_outputs, api_visibility="private",
                                        show_progress="hidden")

        # 6. The inspector follows the draft and the settings (always_last: a natural debounce).
        live = dict(fn=refresh_inspector, inputs=[composer, conversation, declared, show_ids, *options],
                    outputs=inspector_outputs, api_visibility="private", show_progress="hidden",
                    trigger_mode="always_last", concurrency_limit=4, concurrency_id="inspector")
        for component in (composer, system_prompt, thinking, image_budget, enabled_tools, show_ids):
            component.change(**live)
        demo.load(**live)

        # 7. Declared tools (this session only).
        def add_tool(schema: str, decl: list, enabled: list):
            """Declare a tool from its JSON schema, for this session; it is enabled at once."""
            text = schema
            try:
                spec = session.registry_for(decl).declare(text)
            except ToolSchemaError as err:
                raise gr.Error(str(err)) from None
            new_declared = decl + [spec.schema]
            reg = session.registry_for(new_declared)
            gr.Info(f"Added {spec.name}: when the model calls it, you type the result.")
            return (new_declared, gr.update(choices=_tool_choices(reg), value=list(enabled) + [spec.name]),
                    _tools_markdown(reg), "")

        declare.click(add_tool, [schema_box, declared, enabled_tools],
                      [declared, enabled_tools, tool_docs, schema_box], api_name="declare_tool")

        # 8. Take it with you: the conversation and the raw template as files; loading back.
        def export_files(conv: Conversation, raw: str, *opts):
            folder = Path(tempfile.mkdtemp(prefix="gemma4_export_"))
            chat_path, template_path = folder / "gemma4_conversation.json", folder / "gemma4_prompt.txt"
            chat_path.write_text(transcript.dumps(conv, session.options(*opts)), encoding="utf-8")
            template_path.write_text(raw or "", encoding="utf-8")
            return [str(chat_path), str(template_path)]

        def load_chat(file):
            if file is None:
                return gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
            try:
                conv, saved = transcript.load(Path(file).read_text(encoding="utf-8"), session.settings.limits)
            except transcript.TranscriptError as err:
                raise gr.Error(f"Could not load that conversation: {err}") from None
            gr.Info("Conversation loaded.")
            return (render(conv), conv, saved.get("system_prompt", ""), bool(saved.get("thinking", False)),
                    [t for t in saved.get("enabled_tools", []) if registry.get(t)])

        export.click(export_files, [conversation, template_text, *options], exported, api_name="export")
        upload_chat.upload(load_chat, upload_chat, [chatbot, conversation, system_prompt, thinking, enabled_tools],
                           api_visibility="private").then(after_turn, after_inputs, after_outputs,
                                                          api_visibility="private", show_progress="hidden")
    return demo
