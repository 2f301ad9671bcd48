"""Workarounds for Gradio (and its build files), each with the version it was written for."""
