"""The Chatbot that holds the chat's settled turns."""

from __future__ import annotations

from typing import Any

import gradio as gr


class ChatHistory(gr.Chatbot):
    """Gradio's Chatbot, with its API description computed once for the class.

    While a reply streams, every update leaves the history as it is (`gr.skip()`), and Gradio
    treats a skip as an update of the component's properties: it builds a new Chatbot from
    the old one's arguments and recomputes its config, whose API description pydantic
    generates afresh from the message model each time. That was the largest part of the
    server's own work per streamed update (py-spy showed it), while the description depends
    on the class alone."""

    is_template = True  # Gradio's page renders it as the Chatbot it is (the base class's name)
    _api_description: dict[str, Any] | None = None

    def api_info(self) -> dict[str, Any]:
        if ChatHistory._api_description is None:
            ChatHistory._api_description = super().api_info()
        return ChatHistory._api_description
