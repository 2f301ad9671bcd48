"""The Gradio web app: layout and wiring, per-session handlers, display of the conversation,
and the Gradio workarounds (gradio_compat)."""
