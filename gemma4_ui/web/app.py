"""The Gradio app: the layout (layout.py) wired to the handlers (wiring.py), with the page's
styles, script and theme (`page_options`) and the queue (`enable_queue`).

Building the UI loads no model and touches no GPU: the engine is passed in (loaded or not).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from gemma4_ui.inspector import probabilities_view
from gemma4_ui.inspector.expanded_view import CSS as EXPANDED_VIEW_CSS
from gemma4_ui.inspector.layers import MESSAGES_CSS, TEMPLATE_CSS
from gemma4_ui.inspector.soft_token_map import CSS as SOFT_TOKEN_MAP_CSS
from gemma4_ui.web.gradio_compat import build_files, updates
from gemma4_ui.web.gradio_compat.page import page_fixes_js
from gemma4_ui.web.gradio_compat.queue import poll_progress_slower, poll_queue_slower, wake_queue_on_work
from gemma4_ui.web.handlers.shared import SharedChatHandlers
from gemma4_ui.web.layout import LAYERS_CSS, build_layout
from gemma4_ui.web.tail_patched_html import CSS as TAIL_PATCHED_CSS
from gemma4_ui.web.wiring import wire

# The page's own styles and script are files in assets/, read once at start.
ASSETS = Path(__file__).parent / "assets"
CSS = ((ASSETS / "app.css").read_text(encoding="utf-8") + LAYERS_CSS + SOFT_TOKEN_MAP_CSS + probabilities_view.CSS
       + EXPANDED_VIEW_CSS + MESSAGES_CSS + TEMPLATE_CSS + TAIL_PATCHED_CSS)
CHAT_SCROLL_JS = (ASSETS / "chat_scroll.js").read_text(encoding="utf-8")

# The page's own script: Gradio runs it once, when the page has loaded.
PAGE_JS = "() => {\n%s\n}" % (CHAT_SCROLL_JS + page_fixes_js())

# Gradio's default theme declares its fonts at weights 400 and 600, and the 600 files it ships
# hold a handful of glyphs each: every bold word (the title, table headers, <b>, bold code) was
# drawn in two fonts, those few letters in the theme's and the rest in the system's fallback.
# The full Bold files it also ships serve the heavier weights instead.
THEME_FONTS = dict(
    font=[gr.themes.LocalFont("Source Sans Pro", weights=(400, 700)), "ui-sans-serif", "system-ui", "sans-serif"],
    font_mono=[gr.themes.LocalFont("IBM Plex Mono", weights=(400, 700)), "ui-monospace", "Consolas", "monospace"])


def page_options() -> dict:
    """What the page gets besides the components, for every launch (the app, the tests, the
    bench): a new dict each time, since Gradio adds to the FastAPI arguments it is given.
    No run history: Gradio would keep every call's inputs and outputs (whole conversations,
    uploads' paths) in the browser's localStorage, where the next person at a shared demo
    machine finds them, and re-write all of it to storage twice a second while a reply streams.
    Rendered in the browser, also where GRADIO_SSR_MODE (a Space's setting) would have Gradio
    render it on the server with its Node build: this is the page the browser tests check,
    with the fixed Gradio chunks (gradio_compat/build_files.py). Gradio's default theme, with
    whole bold fonts (THEME_FONTS)."""
    return dict(css=CSS, js=PAGE_JS, theme=gr.themes.Default(**THEME_FONTS), run_history=False, ssr_mode=False,
                app_kwargs={"routes": build_files.routes()})


def enable_queue(demo: gr.Blocks, concurrency: int) -> gr.Blocks:
    """Queue every event, at most `concurrency` generations at once (one GPU is never
    oversubscribed; waiting users see their place), polled less often than Gradio's default
    (gradio_compat/queue.py)."""
    demo.queue(default_concurrency_limit=concurrency)
    poll_queue_slower(demo)
    poll_progress_slower(demo)
    wake_queue_on_work(demo)
    return demo


def build_ui(handlers: SharedChatHandlers) -> gr.Blocks:
    """The whole app; builds no model and touches no GPU (the engine is passed in, loaded or not)."""
    with gr.Blocks(title="Gemma 4 UI", fill_height=False, delete_cache=(3600, 7200)) as demo:
        layout = build_layout(handlers)
        wire(demo, handlers, layout)
    # Every streamed update leaves the history as it is and sets two States: Gradio's work on
    # those changed nothing the page or the session sees (gradio_compat/updates.py).
    updates.send_skips_as_they_are(demo)
    updates.keep_state_configs()
    return demo
