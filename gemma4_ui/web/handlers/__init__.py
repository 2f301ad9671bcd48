"""The handlers the page's events call, one module per concern: chat turns (turns.py), the
inspector (inspector.py), declared tools (tools.py), saving and loading (files.py); shared.py
puts them together for the wiring (web/wiring.py)."""
