"""What one page's inspector shows, so that a refresh sends it only what changed.

A long chat's inspector is hundreds of KB of values (three coloured layers and their plain texts),
and every value that reaches the page costs it work in proportion to its size (Gradio copies
and serialises each several times), whatever little changed: a keystroke in a draft, or a
refresh that lands while a reply streams. So a layer the page already shows is skipped, the
three coloured layers travel as patches of their end (`TailPatches`), and the plain texts
("Plain text (copy)", the whole chat's text again) only while their accordion is open.
"""

from __future__ import annotations

import threading

import gradio as gr

from gemma4_ui.web.outputs import InspectorLayers
from gemma4_ui.web.tail_patched_html import TailPatches

LAYERS = InspectorLayers._fields  # the inspector's components, by name
PATCHED = frozenset({"messages", "template", "expanded_colour"})  # tail_patched_html views
PLAIN_TEXT = frozenset({"messages_text", "template_text", "expanded"})  # each in a closed accordion at first


class InspectorShown:
    """One page's inspector as last sent (Gradio keeps one per tab, in its UserSession). Refreshes
    of one page may run at once (a keystroke, a setting, a turn's end): the lock keeps what is
    recorded as shown in step with the patches made from it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._shown: dict[str, tuple[object, int]] = {}  # layer: (value, version of its patch)
        self._patches = TailPatches()
        self._open: set[str] = set()  # plain texts whose accordion is open

    def updates(self, layers: InspectorLayers) -> InspectorLayers:
        """What to send for the new `layers`: gr.skip() where the page has it."""
        out = []
        with self._lock:
            for name, value in zip(LAYERS, layers, strict=True):
                shown = self._shown.get(name)
                if (name in PLAIN_TEXT and name not in self._open) or (shown is not None and shown[0] == value):
                    out.append(gr.skip())
                elif name in PATCHED:
                    patch, version = self._patches.patch(*(shown or (None, -1)), value)
                    self._shown[name] = (value, version)
                    out.append(patch)
                else:
                    self._shown[name] = (value, 0)
                    out.append(value)
        return InspectorLayers(*out)

    def forget(self) -> None:
        """The page lost track (a patch it could not apply): the next refresh sends everything."""
        with self._lock:
            self._shown.clear()

    def show_plain_text(self, name: str, shown: bool) -> None:
        """A plain text's accordion opened (the next refresh fills it) or closed (it empties)."""
        with self._lock:
            self._shown.pop(name, None)
            (self._open.add if shown else self._open.discard)(name)
