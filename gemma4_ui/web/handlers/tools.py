"""Tools a user declares for themselves (the model calls them, the user types the result), and
how the Tools tab shows every tool."""

from __future__ import annotations

import html
import json

import gradio as gr

from gemma4_ui.tools.registry import ToolRegistry, ToolSchemaError
from gemma4_ui.web.outputs import DeclareToolOutputs, RemoveToolOutputs, skipped
from gemma4_ui.web.safe_markdown import code_block, literal, toast_text
from gemma4_ui.web.session import UserSession


class ToolHandlers:
    @staticmethod
    def add_tool(schema: str, enabled: list, session: UserSession) -> DeclareToolOutputs:
        """The /declare_tool endpoint: declare a tool from its JSON schema, for this user only;
        it is enabled at once. A refused schema is a warning and a notice saying why; every
        other component keeps its content (the schema stays in the editor, to be fixed)."""
        try:
            spec = session.declare(schema)
        except ToolSchemaError as err:
            message = f"The tool was not added: {err}"
            gr.Warning(toast_text(message))
            return skipped(DeclareToolOutputs)._replace(notice=literal(f"⚠️ {message}"))
        message = f"Added {spec.name}: when the model calls it, you type the result."
        gr.Info(toast_text(message))
        enabled = [name for name in (enabled or []) if name != spec.name] + [spec.name]
        row, choice = declared_tools_row(session)
        return DeclareToolOutputs(enabled=gr.update(choices=tool_choices(session.tools()), value=enabled),
                                  docs=tools_markdown(session.tools()), schema="", remove_row=row,
                                  remove_choice=choice, notice=literal(f"✅ {message}"))

    @staticmethod
    def remove_tool(name: str, enabled: list, session: UserSession) -> RemoveToolOutputs:
        """The /remove_tool endpoint: forget one of this user's declared tools."""
        session.remove_declared(name)
        enabled = [tool for tool in (enabled or []) if tool != name]
        row, choice = declared_tools_row(session)
        return RemoveToolOutputs(enabled=gr.update(choices=tool_choices(session.tools()), value=enabled),
                                 docs=tools_markdown(session.tools()), remove_row=row, remove_choice=choice,
                                 notice=literal(f"Removed {name}."))


def tool_choices(registry: ToolRegistry) -> list[tuple[str, str]]:
    return [(spec.name if spec.label == spec.name else f"{spec.label} — {spec.name}", spec.name)
            for spec in registry.specs()]


def declared_tools_row(session: UserSession) -> tuple:
    """(the remove-a-tool row, its choice): shown while the user has declared tools."""
    names = session.declared_names()
    return gr.update(visible=bool(names)), gr.update(choices=names, value=names[-1] if names else None)


def tools_markdown(registry: ToolRegistry) -> str:
    parts = []
    for spec in registry.specs():
        kind = {"builtin": "built-in", "python": "Python", "declared": "declared: you type its results"}[spec.source]
        demo = " · <i>demo, sample data</i>" if spec.demo and "sample data" not in spec.label else ""
        # Raw HTML (markdown is not read inside it): the names are escaped as HTML.
        parts.append(f"<details><summary><b>{html.escape(spec.label)}</b> <code>{html.escape(spec.name)}</code> "
                     f"({kind}{demo})</summary>\n\n{code_block(json.dumps(spec.schema, indent=2), 'json')}\n"
                     "</details>")
    return "\n".join(parts)
