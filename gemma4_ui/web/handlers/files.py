"""Take a conversation with you: export it (media embedded) with its raw template, and load one
back with its settings and declared tools."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from gemma4_ui.core import transcript
from gemma4_ui.core.conversation import Conversation
from gemma4_ui.core.options import USER_OPTIONS, ChatOptions
from gemma4_ui.core.prompt import build_spec, template_text
from gemma4_ui.tools.registry import ToolSchemaError
from gemma4_ui.web.display import settled
from gemma4_ui.web.handlers.common import Shared
from gemma4_ui.web.handlers.tools import tool_choices, tools_markdown
from gemma4_ui.web.outputs import LoadOutputs, skipped
from gemma4_ui.web.safe_markdown import toast_text
from gemma4_ui.web.session import UserSession


class FileHandlers:
    def __init__(self, shared: Shared):
        self.shared = shared

    def export_files(self, conversation: Conversation, session: UserSession, options: ChatOptions) -> list[str]:
        """The /export endpoint: the conversation (media embedded, every version kept) and its
        raw template (what apply_chat_template makes of the conversation shown with these
        settings; empty where the processor is not available), as files."""
        folder = session.exports.path()
        chat_path, template_path = folder / "gemma4_conversation.json", folder / "gemma4_prompt.txt"
        chat_path.write_text(transcript.dumps(conversation, options, session.declared, session.branches_of(conversation)),
                             encoding="utf-8")
        spec = build_spec(conversation, options, session.tools(), self.shared.engine.audio_first)
        processor = self.shared.engine.processor
        template_path.write_text(template_text(processor, spec) if processor and spec.messages else "",
                                 encoding="utf-8")
        return [str(chat_path), str(template_path)]

    def load_chat(self, file, session: UserSession) -> LoadOutputs:
        """Load a saved conversation with its settings and declared tools. A file that cannot
        be loaded is a warning; the chat and the settings keep what they had."""
        if file is None:
            return skipped(LoadOutputs)
        settings = self.shared.settings
        try:
            loaded = transcript.load(Path(file).read_text(encoding="utf-8"), settings.limits)
            options = ChatOptions.from_inputs(settings, **loaded.settings)
        except (OSError, UnicodeDecodeError, TypeError, ValueError) as err:  # TranscriptError is a ValueError
            gr.Warning(toast_text(f"Could not load that conversation: {err}"))
            return skipped(LoadOutputs)
        for schema in loaded.declared:
            try:
                session.declare(schema)
            except ToolSchemaError as err:
                gr.Warning(toast_text(f"A declared tool in the file was skipped: {err}"))
        session.turns.reset()  # a reply still streaming belongs to the conversation replaced
        session.mapped_turn = None
        session.branches, session.branch_focus, session.compared = loaded.branches, None, None
        tools = session.tools()
        enabled = [name for name in options.enabled_tools if tools.get(name)]
        gr.Info("Conversation loaded.", duration=3)  # a toast restyles the page every frame it is up
        history, live = settled(loaded.conversation, versions=loaded.branches.versions())
        # Each setting the file holds is restored; one it does not hold is left as the page has it.
        shown = {name: getattr(options, name) if name in loaded.settings else gr.skip() for name in USER_OPTIONS}
        shown["enabled_tools"] = gr.update(choices=tool_choices(tools), value=enabled)
        return LoadOutputs(history=history, live=live, conversation=loaded.conversation, docs=tools_markdown(tools),
                           **shown)
