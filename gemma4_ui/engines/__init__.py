"""Engines: the contract every backend offers the chat, model loading, and the backends (a
local transformers model, an OpenAI-compatible server)."""
