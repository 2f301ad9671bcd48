"""The Gradio Blocks app: layout builders that return their components, and one wiring step
that connects them to `SharedChatHandlers`.

Building the UI loads no model and touches no GPU: the engine is passed in (loaded or not).
Stable elem_ids for browser tests: chatbot (the chat's box; chat-history and chat-live, its
two Chatbots), composer, stop, thinking, system-prompt,
model-status, token-counts, template-messages, template-raw, template-expanded, new-chat,
soft-token-map, template-expanded-colour, token-probabilities.
"""

from __future__ import annotations

import functools
import html
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from gemma4_ui.config import EXAMPLES_DIR, IMAGE_BUDGETS, Settings
from gemma4_ui.core.conversation import Conversation
from gemma4_ui.core.options import MAX_REPETITION_GUARD, USER_OPTIONS, ChatOptions
from gemma4_ui.inspector import probabilities_view
from gemma4_ui.inspector.expanded_view import CSS as EXPANDED_VIEW_CSS
from gemma4_ui.inspector.expanded_view import LEGEND as EXPANDED_LEGEND
from gemma4_ui.inspector.layers import MESSAGES_CSS, TEMPLATE_CSS, TEMPLATE_LEGEND
from gemma4_ui.inspector.soft_token_map import CSS as SOFT_TOKEN_MAP_CSS
from gemma4_ui.tools.registry import ToolRegistry
from gemma4_ui.web.chat_history import ChatHistory
from gemma4_ui.web.gradio_compat import build_files
from gemma4_ui.web.session import SharedChatHandlers, tool_choices, tools_markdown
from gemma4_ui.web.tail_patched_html import CSS as TAIL_PATCHED_CSS
from gemma4_ui.web.tail_patched_html import tail_patched_html

LAYERS = {"Messages": "layer-messages", "Template": "layer-template", "Expanded": "layer-expanded"}
# What layers 2 and 3 say before there is anything to send (layer 1 shows the empty request).
LAYER_EMPTY = "Shows here once there is a message or a file to send."
WIDE_SCREEN = "(min-width: 1800px)"  # a projector or a big monitor: the side column gets half the width
_SHOWN_WHEN_PICKED = "".join(
    f"#layers:has(#layer-choice input[value='{name}']:checked) #{elem_id} {{ display: flex; }}\n"
    for name, elem_id in LAYERS.items())
LAYERS_CSS = """
#layer-choice { margin-bottom: var(--spacing-md); }
#layer-choice .wrap { flex-wrap: nowrap; gap: var(--spacing-sm); }
#layer-choice label { flex: 1 1 0; min-width: 0; justify-content: center; padding: var(--spacing-sm); }
#protocol-layers > .column { display: none; }
""" + _SHOWN_WHEN_PICKED + f"""
@media {WIDE_SCREEN} {{
  #layer-choice {{ display: none; }}
  #protocol-layers > .column {{ display: flex !important; flex: 1 1 0; min-width: 0; }}
  #side-column {{ flex-grow: 3 !important; }}
}}
"""
CSS = """
/* The chat takes the height the screen has (a projector, a laptop, a phone), so the
   composer and the last message are on the first screen; what sits above and below the
   chat (the header, the composer, the buttons) is what the calc subtracts. Set on the chat
   itself: Gradio scopes the rules inside a @media to its container, where :root is not. */
#chatbot { --chat-height: max(320px, calc(100dvh - 250px)); }
#header { flex-wrap: nowrap; align-items: center; gap: 12px; }
#header > * { min-width: 0; }
#title { flex: 0 0 auto; width: auto; }
#title h2 { margin: 0; white-space: nowrap; }
#model-status { flex: 1 1 auto; font-size: 0.95em; }
#model-status summary { cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#model-status details[open] summary { white-space: normal; }
#model-status p { margin: 4px 0 0; }
/* The chat: one scrolling box around the history and the live Chatbot, which grow with
   their messages and look like one chat. */
#chatbot { height: var(--chat-height) !important; overflow-y: auto; flex-wrap: nowrap; gap: 0;
           border: 1px solid var(--block-border-color); border-radius: var(--block-radius);
           background: var(--block-background-fill); }
#chatbot > .block { flex: 0 0 auto; height: auto !important; min-height: 0; max-height: none !important;
                    overflow: visible; border: 0 !important; box-shadow: none; background: transparent; }
#chatbot .wrapper, #chatbot .bubble-wrap { height: auto !important; max-height: none !important;
                                          overflow: visible !important; }
#chat-history .bubble-wrap { padding-bottom: 0; }
/* A long history would be painted, laid out and hit-tested again at each update of the reply
   streaming below it, wherever it is scrolled (~2 ms more per update with 40 messages). So
   while a turn streams (live-turn) its messages out of view are skipped: search still finds
   them and screen readers still read them, but a skipped message has no innerText, hence only
   then. Each message's size is remembered at all times, so a skipped one keeps its height.
   The history is a stacking context of its own: hit testing the reply does not walk it.
   The browser checks each skipped message against the view at every frame, so the messages
   the reply pushes out of view above, then the whole history, are hidden until found instead
   (CHAT_SCROLL_JS), at the size they had; Gradio's `[hidden] { display: none }` would take
   that size away and hide them from search. */
#chat-history { isolation: isolate; contain-intrinsic-size: auto 0px; }
#chat-history[hidden="until-found"] { display: flex; }
#chat-history .message-row[hidden="until-found"] { display: flex; }
#chat-history .message-row { contain-intrinsic-size: auto 160px; }
#chatbot.live-turn #chat-history .message-row:not([hidden]) { content-visibility: auto; }
#chat-live .bubble-wrap { padding-top: var(--spacing-xxl); }
/* The empty chat's prompt, when it wraps (a phone), keeps off the box's edges. */
#chatbot .placeholder { padding-inline: var(--spacing-xl); text-align: center; }
/* live-shown, live-turn: the live part shows a message, a turn (CHAT_SCROLL_JS sets them). */
#chat-live .top-panel, /* its own Clear: the history's clears the whole chat */
#chat-live .placeholder-content,
#chatbot.live-shown #chat-history .placeholder-content { display: none; }
/* The idle Stop button is plainly off, not a faded red. */
#stop:disabled { background: var(--button-secondary-background-fill); color: var(--body-text-color-subdued);
                 border-color: var(--button-secondary-border-color); opacity: 1; }
.ctx-meter { height: 10px; background: var(--block-border-color); border-radius: 5px; overflow: hidden; }
.ctx-meter > div { height: 100%; background: var(--color-accent); }
.ctx-label { font-size: 0.85em; margin: 4px 0 8px; }
.token-counts table { width: 100%; font-size: 0.9em; }
/* Only the last message sent can be edited (the handler refuses the others), so only the
   last user bubble keeps the edit control (none when that bubble is media: a media-only last
   turn). nth-last-child(of) and classes rather than :has() on the chat, which Chromium
   re-checks at every streamed update, restyling every button of a long chat's history.
   Found by its icon, the same in every UI language. */
#chatbot .user-row:not(:nth-last-child(1 of .user-row)) + .message-buttons-right button:has(.feather-edit-2),
#chatbot.live-turn #chat-history button:has(.feather-edit-2) { display: none; }
#chatbot .reply-stats { font-size: 0.75em; opacity: 0.65; margin-top: 4px; font-variant-numeric: tabular-nums; }
#template-raw .textfield { font-family: var(--font-mono); white-space: pre-wrap; font-size: 0.85em; }
#template-expanded textarea, #raw-output textarea { font-family: var(--font-mono); font-size: 0.85em; }
/* Gradio puts a divider after the last footer link when some links are left out. */
footer .divider:last-child { display: none; }
/* Gradio's 32 px side margins take a fifth of a phone's width (the composer's prompt wrapped
   at 320 px): 12 px up to 440 px wide, growing to Gradio's 32 at 640. Not in a @media rule:
   Gradio scopes those inside its page, below the element that has the margins. */
.main.app { padding-inline: clamp(var(--size-3), (100vw - 320px) / 10, var(--size-8)); }
#actions { flex-wrap: nowrap; }
#actions > button { min-width: 0; }
@media (max-width: 640px) {
  #chatbot { --chat-height: max(240px, calc(100dvh - 250px)); }
}
/* A short screen (a phone held sideways): the gaps and the composer's padding tighten, so
   that the chat, the composer and the Stop button all fit; the chat takes what they leave. */
@media (max-height: 560px) {
  #chatbot { --chat-height: max(150px, calc(100dvh - 170px)); }
  #header { margin-bottom: calc(-1 * var(--spacing-md)); }
  #chat-column { gap: var(--spacing-md); }
  #composer .full-container { padding-block: var(--spacing-xs); }
}
@media (max-width: 640px), (max-height: 560px) {
  /* Examples in the empty chat: two compact columns. */
  #chatbot .examples { grid-template-columns: repeat(2, minmax(0, 1fr)); padding: var(--spacing-md);
                       gap: var(--spacing-md); }
  #chatbot .example { padding: var(--spacing-md) var(--spacing-lg); }
  #title h2 { font-size: 1.15em; }
  #model-status { font-size: 0.85em; }
}
""" + (LAYERS_CSS + SOFT_TOKEN_MAP_CSS + probabilities_view.CSS + EXPANDED_VIEW_CSS + MESSAGES_CSS + TEMPLATE_CSS
       + TAIL_PATCHED_CSS)

# The code highlighter's theme in Gradio's markdown styles (Prism's) has the rule
# `.md code[class*="language-"] ::selection`: an attribute selector with a descendant after it.
# For that rule Chromium restyles every element below any element whose class changes, and
# Gradio and the chat box change classes on the chat's ancestors at every turn: ~80 ms for
# each change in a 40-message chat (7,000 elements). Its descendant half is dropped; the
# half on the code element stays, and Chromium's ::selection styles are inherited (highlight
# inheritance), so the code's spans are selected in the same colours. The styles arrive with
# the components that use them, so stylesheets added later are narrowed too.
NARROW_SELECTION_RULES_JS = """
  const narrow = (rules) => {
    for (const rule of rules) {
      if (rule.cssRules && !rule.selectorText) narrow(rule.cssRules);  // @media, @layer...
      else if (rule.selectorText && rule.selectorText.includes('] ::selection'))
        rule.selectorText = rule.selectorText.split(/,\\s*/).filter((s) => !/\\]\\s+::selection$/.test(s)).join(', ');
    }
  };
  const narrowSheet = (sheet) => { try { narrow(sheet.cssRules); } catch (e) { /* not loaded, another origin's */ } };
  const watch = (node) => {
    if (node.tagName !== 'STYLE' && node.tagName !== 'LINK') return;
    if (node.sheet) narrowSheet(node.sheet);
    if (node.tagName === 'LINK') node.addEventListener('load', () => narrowSheet(node.sheet));
  };
  document.querySelectorAll('style, link[rel="stylesheet"]').forEach(watch);
  new MutationObserver((changes) => changes.forEach((change) => change.addedNodes.forEach(watch)))
    .observe(document.head, {childList: true});"""

# Each message of Gradio's Chatbot re-runs its attribute effect whenever the number of
# messages changes (it marks the latest), and that effect ends with `element.dir = element.dir`.
# Chromium treats every write of `dir`, even of the value it has, as a change of direction
# and restyles the element's whole subtree: when a turn settles into a 40-message history,
# all 4,000 elements of the chat (~55 ms). A write of the value already there changes
# nothing, so it is skipped; any real change of direction goes through.
SKIP_UNCHANGED_DIR_JS = """
  const dir = Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'dir');
  Object.defineProperty(HTMLElement.prototype, 'dir', {...dir, set(value) {
    if (this.getAttribute('dir') !== String(value)) dir.set.call(this, value);
  }});"""

# The chat box follows the newest message while its reader is at the bottom, and stays where
# one who scrolled up left it (the Chatbots inside it do not scroll: ui.CSS). It watches the
# sizes of the two Chatbots, so a streamed token, a new message or an image that finished
# loading all count, and it costs no extra layout. When the live part changes it also marks
# the box with what the CSS needs to know of it (live-shown, live-turn).
# While a reply grows below the history, with its reader following it, each message of the
# history it pushes out of view is hidden until found (content-visibility: hidden, at its
# size), then the whole history: they cost the frames nothing, and the browser's search still
# finds what is in them. They are shown again at once when the reader scrolls, when search
# finds something in them, when the turn ends, and when the reply has not grown for a second
# (a tool call waiting for its result). While hidden, screen readers do not read them: that
# is why only then.
CHAT_SCROLL_JS = """
  const follow = () => {
    const box = document.querySelector('#chatbot'), live = document.querySelector('#chat-live'),
          history = document.querySelector('#chat-history');
    if (!box || !live || !history) return setTimeout(follow, 200);
    // The history's messages (it does not change while a turn streams), the first hiddenRows of
    // them hidden. The whole history only at a later update than its last message: hidden at
    // once, it would leave that message's style as it was (content-visibility: auto).
    let resting, rows = null, hiddenRows = 0;
    const show = () => {
      clearTimeout(resting);
      if (!hiddenRows) return;
      history.removeAttribute('hidden');
      rows.slice(0, hiddenRows).forEach((row) => row.removeAttribute('hidden'));
      hiddenRows = 0;
    };
    const rest = (top) => {
      clearTimeout(resting);
      resting = setTimeout(show, 1000);
      rows ??= [...history.querySelectorAll('.message-row')];
      if (rows.length && hiddenRows === rows.length) {  // all hidden at an earlier update
        if (!history.hidden && history.getBoundingClientRect().bottom <= top) {
          history.setAttribute('hidden', 'until-found');
        }
        return;
      }
      // all read before any is hidden: each change would need a new layout to read the next
      let above = hiddenRows;
      while (above < rows.length && rows[above].getBoundingClientRect().bottom <= top) above++;
      for (; hiddenRows < above; hiddenRows++) rows[hiddenRows].setAttribute('hidden', 'until-found');
    };
    // Reaching the bottom, however, pins; only the reader's own scrolling (wheel, touch, keys,
    // the scrollbar) unpins: the browser also scrolls the box when its content is redrawn.
    let pinned = true, readerUntil = 0, dragging = false;
    const reader = () => { readerUntil = performance.now() + 500; show(); };
    for (const type of ['wheel', 'touchmove', 'keydown']) box.addEventListener(type, reader, {passive: true});
    box.addEventListener('pointerdown', () => { dragging = true; }, {passive: true});
    // (a click elsewhere, on a tab say, is not the reader's scrolling of the chat)
    window.addEventListener('pointerup', () => { if (dragging) reader(); dragging = false; }, {passive: true});
    box.addEventListener('scroll', () => {
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 80) pinned = true;
      else {
        if (dragging || performance.now() < readerUntil) pinned = false;
        show();  // whatever scrolled it up shows what is there
      }
    }, {passive: true});
    // The search found something hidden in the history (the browser shows it and goes there;
    // from a message, the event bubbles up).
    history.addEventListener('beforematch', () => { pinned = false; show(); });
    const grown = new ResizeObserver(() => {
      const liveShown = live.querySelector('.message-row') !== null;
      box.classList.toggle('live-shown', liveShown);
      // A turn's end: the switch renders the whole history again (CSS), so it waits for the
      // next frame, not to add to the one that shows the settled turn.
      const turn = () => live.querySelector('.user-row') !== null, inTurn = turn();
      if (inTurn) box.classList.add('live-turn');
      else if (box.classList.contains('live-turn')) {
        requestAnimationFrame(() => { if (!turn()) box.classList.remove('live-turn'); });
      }
      // (an empty chat shows its examples from the first)
      if (pinned && (liveShown || box.querySelector('.message-row'))) box.scrollTop = box.scrollHeight;
      if (inTurn && pinned && !history.contains(document.activeElement)) rest(box.getBoundingClientRect().top);
      else {
        show();
        if (!inTurn) rows = null;
      }
    });
    box.querySelectorAll(':scope > .block').forEach((part) => grown.observe(part));
  };
  follow();"""
# A send asks whether the page shows a conversation (if the app has let it go, the draft
# stays: session.stage). The page answers it from its own messages: with the history as the
# send's input, every message snapshotted, uploaded and validated the whole chat.
SHOWS_MESSAGES_JS = """(draft, conversation, session) =>
  [draft, conversation, session, document.querySelector('#chat-history .message-row') !== null]"""
# The page's own script: Gradio runs it once, when the page has loaded.
PAGE_JS = "() => {%s\n}" % (CHAT_SCROLL_JS + NARROW_SELECTION_RULES_JS + SKIP_UNCHANGED_DIR_JS)


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
    with the fixed Gradio chunks (gradio_compat/build_files.py). Gradio's default theme, with whole bold fonts
    (THEME_FONTS)."""
    return dict(css=CSS, js=PAGE_JS, theme=gr.themes.Default(**THEME_FONTS), run_history=False, ssr_mode=False,
                app_kwargs={"routes": build_files.routes()})


# How the Chatbot renders messages. Gradio's Chatbot re-processes its messages on each
# streamed update, so what a message costs is paid again and again late in a long chat:
# no LaTeX scan (Gemma's replies are markdown and code; `$` in them is money, not maths).
CHAT_RENDERING = dict(latex_delimiters=[])


def _examples(default_tools: list[str]) -> tuple[list[list], list[str]]:
    """One example per capability, with the media shipped in assets/examples/: rows of
    (composer, thinking, enabled tools), and their labels. An example enables the tools it
    needs on top of the session's default ones (the demo model starts with its tools on)."""
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
    rows = [(label, message, thinking, [*default_tools, *(t for t in tools if t not in default_tools)])
            for label, message, thinking, tools in rows]
    return [list(row[1:]) for row in rows], [row[0] for row in rows]


def _chat_examples(default_tools: list[str]) -> list[dict]:
    """The same examples inside the empty chat, where a phone's first screen shows them:
    one tap fills the composer (and the example's settings) as the gallery does."""
    rows, labels = _examples(default_tools)
    return [{"text": message["text"], "display_text": label} for (message, _, _), label in zip(rows, labels)]


# What a declared tool looks like: the model calls it, the user types its result.
EXAMPLE_SCHEMA = json.dumps({
    "name": "lookup_order",
    "description": "Finds an order by its number and tells its status.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "integer", "description": "The order number"}},
                   "required": ["order_id"]},
}, indent=2)


def _status_html(status) -> str:
    """One line (the model, where it runs, how far to trust it); the whole status on a tap."""
    return (f"<details><summary>{html.escape(status.headline())}</summary>"
            f"<p>{html.escape(status.describe())}</p></details>")


QUEUE_POLL_SECONDS = 0.01
# How long Gradio keeps a user's conversation and session after their last turn (or, for the
# session, the last change of the draft): an hour once the page is closed (wire says how).
SESSION_SECONDS = 6 * 3600


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


# -- layout: each builder makes its part of the page and returns its components ---------------

@dataclass
class ChatColumn:
    history: gr.Chatbot  # the settled turns (the Chatbot's own buttons and events live here)
    live: gr.Chatbot  # what the streaming turn adds, then a notice or nothing
    composer: gr.MultimodalTextbox
    staged: gr.MultimodalTextbox  # the draft on its way from `stage` to `respond`
    shows_messages: gr.Checkbox  # whether the page shows a conversation, read at each send (SHOWS_MESSAGES_JS)
    tool_row: gr.Row
    tool_answer: gr.Textbox
    tool_submit: gr.Button
    tool_cancel: gr.Button
    stop: gr.Button
    new_chat: gr.Button
    probabilities_view: gr.Accordion
    probabilities: gr.HTML


@dataclass
class InspectorTab:
    counts: gr.HTML
    note: gr.Markdown
    soft_tokens: gr.HTML
    messages: gr.HTML
    messages_text: gr.Textbox
    template: gr.HTML
    template_text: gr.Textbox
    show_ids: gr.Checkbox
    expanded: gr.Textbox
    expanded_colour: gr.HTML
    reply_stats: gr.JSON
    raw_output: gr.Textbox
    parsed_output: gr.JSON
    export: gr.Button
    exported: gr.File
    upload_chat: gr.UploadButton
    plain_text_views: dict[str, gr.Accordion]  # by layer name (inspector_updates.PLAIN_TEXT)

    @property
    def layers(self) -> list:
        """What `SharedChatHandlers.refresh_inspector` returns, in its order."""
        return [self.counts, self.messages, self.messages_text, self.template, self.template_text, self.expanded,
                self.note, self.soft_tokens, self.expanded_colour]


@dataclass
class ToolsTab:
    tool_docs: gr.Markdown
    schema_box: gr.Code
    declare: gr.Button
    declare_notice: gr.Markdown
    remove_row: gr.Row
    remove_choice: gr.Dropdown
    remove: gr.Button


@dataclass
class Layout:
    conversation: gr.State
    session: gr.State
    restore: gr.State  # a draft to give back to the composer when its turn failed
    chat: ChatColumn
    inspector: InspectorTab
    tools: ToolsTab
    options: dict[str, gr.components.Component]  # by ChatOptions field, in USER_OPTIONS order

    @property
    def option_inputs(self) -> list:
        return [self.options[name] for name in USER_OPTIONS]


def _chat_column(default_tools: list[str]) -> ChatColumn:
    # One scrolling box holds both Chatbots (display.py says why there are two); it follows
    # the newest message (CHAT_SCROLL_JS), theirs do not scroll.
    with gr.Column(elem_id="chatbot"):
        history = ChatHistory(
            elem_id="chat-history", show_label=False, editable="user", buttons=["copy"], autoscroll=False,
            placeholder="Ask something, attach an image, audio or video, or pick an example.",
            group_consecutive_messages=False, examples=_chat_examples(default_tools), **CHAT_RENDERING,
        )
        live = gr.Chatbot(elem_id="chat-live", show_label=False, buttons=["copy"], autoscroll=False,
                          group_consecutive_messages=False, **CHAT_RENDERING)
    composer = gr.MultimodalTextbox(
        elem_id="composer", show_label=False, sources=["upload", "microphone"],
        file_types=["image", "audio", "video"], file_count="multiple",
        placeholder="Message Gemma 4",
    )
    staged = gr.MultimodalTextbox(visible=False, file_count="multiple")
    shows_messages = gr.Checkbox(visible=False)
    with gr.Row(visible=False) as tool_row:
        tool_answer = gr.Textbox(label="Result for the tool call (JSON or text)", scale=4, elem_id="tool-answer")
        tool_submit = gr.Button("Send result", variant="primary", scale=1, elem_id="tool-submit")
        tool_cancel = gr.Button("Cancel call", scale=1, elem_id="tool-cancel")
    with gr.Row(elem_id="actions"):
        stop = gr.Button("⏹ Stop", elem_id="stop", variant="stop", size="sm", interactive=False)
        new_chat = gr.Button("🆕 New conversation", elem_id="new-chat", size="sm")
    with gr.Accordion("🎯 Token probabilities of the last reply", open=False,
                      elem_id="token-probabilities-view") as probabilities_view:
        probabilities = gr.HTML(elem_id="token-probabilities")
    return ChatColumn(history, live, composer, staged, shows_messages, tool_row, tool_answer, tool_submit,
                      tool_cancel, stop, new_chat, probabilities_view, probabilities)


def _inspector_tab() -> InspectorTab:
    counts = gr.HTML(elem_id="token-counts")
    note = gr.Markdown(visible=False, elem_id="inspector-note")
    with gr.Accordion("What the model sees: the soft tokens", open=True):
        soft_tokens = gr.HTML(elem_id="soft-token-map")
    # The three protocol layers: side by side on wide screens; on narrow ones one at a time,
    # picked with the switch above them (CSS alone shows the picked one, see LAYERS_CSS), so
    # all three stay rendered and current whichever is shown.
    with gr.Column(elem_id="layers"):  # its :has() rule stays local to the layers (cheap to restyle)
        gr.Radio(list(LAYERS), value=next(iter(LAYERS)), show_label=False, container=False, interactive=True,
                 elem_id="layer-choice")
        with gr.Row(elem_id="protocol-layers", equal_height=False):
            with gr.Column(elem_id="layer-messages", min_width=0):
                messages = tail_patched_html("template-messages", "Layer 1: data passed to apply_chat_template",
                                             body_class="jv-lines")
                with gr.Accordion("Plain text (copy)", open=False) as messages_text_view:
                    messages_text = gr.Textbox(show_label=False, lines=14, max_lines=30, buttons=["copy"],
                                               interactive=False, elem_id="template-messages-text")
            with gr.Column(elem_id="layer-template", min_width=0):
                template = tail_patched_html("template-raw", "Layer 2: apply_chat_template(tokenize=False)",
                                             head=TEMPLATE_LEGEND, body_class="tv-tokens", empty=LAYER_EMPTY)
                with gr.Accordion("Plain text (copy)", open=False) as template_text_view:
                    template_text = gr.Textbox(show_label=False, lines=14, max_lines=30, buttons=["copy"],
                                               interactive=False, elem_id="template-text")
            with gr.Column(elem_id="layer-expanded", min_width=0):
                expanded_colour = tail_patched_html("template-expanded-colour", "Layer 3: processor(...) input_ids",
                                                    head=EXPANDED_LEGEND, body_class="xv-tokens", empty=LAYER_EMPTY)
                with gr.Accordion("Plain text (copy)", open=False) as expanded_text_view:
                    show_ids = gr.Checkbox(label="Show token ids", value=False)
                    expanded = gr.Textbox(
                        elem_id="template-expanded", lines=14, max_lines=30, buttons=["copy"],
                        label="Layer 3: the processor's input_ids, soft-token runs collapsed",
                    )
    with gr.Tabs(elem_id="reply-and-files"):
        with gr.Tab("Last reply"):
            reply_stats = gr.JSON(label="Reply stats", elem_id="reply-stats")
            raw_output = gr.Textbox(label="Raw output (special tokens kept)", lines=6, elem_id="raw-output",
                                    buttons=["copy"])
            parsed_output = gr.JSON(label="Parsed", elem_id="parsed-output")
        with gr.Tab("Save / load"):
            export = gr.Button("⬇ Export conversation and template", size="sm", elem_id="export")
            exported = gr.File(label="Files", file_count="multiple", interactive=False, elem_id="exported")
            # A button, not gr.File: once a file is uploaded, gr.File makes the page wait a frame
            # each time it reads its value, which Gradio does at every streamed update of a reply.
            upload_chat = gr.UploadButton("⬆ Load a conversation (JSON)", file_types=[".json"], size="sm",
                                          elem_id="upload-chat")
    return InspectorTab(counts, note, soft_tokens, messages, messages_text, template, template_text, show_ids, expanded,
                        expanded_colour, reply_stats, raw_output, parsed_output, export, exported, upload_chat,
                        {"messages_text": messages_text_view, "template_text": template_text_view,
                         "expanded": expanded_text_view})


def _settings_tab(defaults: ChatOptions, settings: Settings) -> dict:
    return {
        "system_prompt": gr.Textbox(label="System prompt", value=defaults.system_prompt, lines=3,
                                    elem_id="system-prompt"),
        "thinking": gr.Checkbox(label="Thinking (enable_thinking)", value=defaults.thinking, elem_id="thinking"),
        "max_new_tokens": gr.Slider(1, settings.max_new_tokens_cap, value=defaults.max_new_tokens, step=1,
                                    label="Max new tokens", elem_id="max-new-tokens"),
        "temperature": gr.Slider(0.0, 2.0, value=defaults.temperature, step=0.05, label="Temperature (0 = greedy)",
                                 elem_id="temperature"),
        "top_p": gr.Slider(0.05, 1.0, value=defaults.top_p, step=0.05, label="Top-p"),
        "top_k": gr.Slider(1, 256, value=defaults.top_k, step=1, label="Top-k"),
        "image_budget": gr.Radio(list(IMAGE_BUDGETS), value=defaults.image_budget, label="Image token budget",
                                 elem_id="image-budget"),
        "repetition_guard": gr.Slider(0, MAX_REPETITION_GUARD, value=defaults.repetition_guard, step=1,
                                      label="Repetition guard: stop a reply that repeats itself this many times "
                                            "(0 = off)", elem_id="repetition-guard"),
    }


def _tools_tab(defaults: ChatOptions, registry: ToolRegistry) -> tuple[ToolsTab, dict]:
    options = {
        "enabled_tools": gr.CheckboxGroup(tool_choices(registry), value=list(defaults.enabled_tools),
                                          label="Enabled tools", elem_id="enabled-tools"),
        "max_tool_rounds": gr.Slider(1, 10, value=defaults.max_tool_rounds, step=1,
                                     label="Tool rounds per reply (limit)"),
    }
    tool_docs = gr.Markdown(tools_markdown(registry), elem_id="tool-docs")
    schema_box = gr.Code(language="json", label="Declare a tool (JSON schema)", lines=8, elem_id="declare-schema",
                         interactive=True)
    gr.Examples([[EXAMPLE_SCHEMA]], inputs=[schema_box], label="Example schema",
                example_labels=["📦 lookup_order: you type the order's status"])
    declare = gr.Button("Add tool", size="sm", elem_id="declare-tool")
    declare_notice = gr.Markdown(elem_id="declare-notice")
    with gr.Row(visible=False, elem_id="remove-tool-row") as remove_row:
        remove_choice = gr.Dropdown([], label="Declared tool", scale=3, elem_id="remove-tool-name")
        remove = gr.Button("Remove tool", size="sm", scale=1, elem_id="remove-tool")
    return ToolsTab(tool_docs, schema_box, declare, declare_notice, remove_row, remove_choice, remove), options


def build_layout(handlers: SharedChatHandlers) -> Layout:
    """The page: title and model status, the chat, and the inspector / settings / tools tabs."""
    defaults = handlers.default_options()
    conversation = gr.State(Conversation(), time_to_live=SESSION_SECONDS)
    session = gr.State(handlers.new_session(), time_to_live=SESSION_SECONDS)
    restore = gr.State(None)

    with gr.Row(equal_height=False, elem_id="header"):
        gr.Markdown("## 💎 Gemma 4 UI", elem_id="title")
        gr.HTML(_status_html(handlers.engine.status), elem_id="model-status", padding=False)

    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=320, elem_id="chat-column"):
            chat = _chat_column(defaults.enabled_tools)
        with gr.Column(scale=2, min_width=320, elem_id="side-column"):
            with gr.Tabs():
                with gr.Tab("Inspector", id="inspector"):
                    inspector = _inspector_tab()
                with gr.Tab("Settings", id="settings"):
                    options = _settings_tab(defaults, handlers.settings)
                with gr.Tab("Tools", id="tools"):
                    tools, tool_options = _tools_tab(defaults, handlers.registry)
                    options.update(tool_options)
            example_rows, example_labels = _examples(defaults.enabled_tools)
            gr.Examples(example_rows, inputs=[chat.composer, options["thinking"], options["enabled_tools"]],
                        label="Examples", example_labels=example_labels, examples_per_page=len(example_rows),
                        elem_id="examples")
    return Layout(conversation, session, restore, chat, inspector, tools, options)


# -- wiring ----------------------------------------------------------------------------------------

def with_options(handlers: SharedChatHandlers, method: Callable, leading: list[tuple[str, Any]]) -> Callable:
    """`method(*leading, options, request=...)` as a Gradio handler taking the leading inputs
    and then one input per chat option. Its signature names every parameter (the API shows
    them by name: `/chat` takes `message`, `system_prompt`, `thinking`, ...), and the option
    values become one `ChatOptions` here, checked against the settings."""
    count = len(leading)
    takes_request = "request" in inspect.signature(method).parameters

    def split(args: tuple):
        values, request = args[:-1], args[-1]  # Gradio passes the request last (see the signature)
        options = ChatOptions.from_inputs(handlers.settings, **dict(zip(USER_OPTIONS, values[count:])))
        return values[:count], options, request

    if inspect.isgeneratorfunction(method):
        def handler(*args):
            leading_values, options, request = split(args)
            yield from method(*leading_values, options, **({"request": request} if takes_request else {}))
    else:
        def handler(*args):
            leading_values, options, request = split(args)
            return method(*leading_values, options, **({"request": request} if takes_request else {}))

    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(name, positional, annotation=kind) for name, kind in leading]
    parameters += [inspect.Parameter(name, positional) for name in USER_OPTIONS]
    parameters.append(inspect.Parameter("request", positional, default=None, annotation=gr.Request))
    handler.__signature__ = inspect.Signature(parameters)
    handler.__annotations__ = {name: kind for name, kind in leading if kind is not inspect.Parameter.empty}
    handler.__annotations__["request"] = gr.Request
    handler.__name__ = handler.__qualname__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


def wire(demo: gr.Blocks, handlers: SharedChatHandlers, layout: Layout) -> None:
    """Connect the components to the handlers: every event, in one place."""
    chat, inspector, tools = layout.chat, layout.inspector, layout.tools
    conversation, session, restore = layout.conversation, layout.session, layout.restore
    options = layout.option_inputs
    empty = inspect.Parameter.empty
    turn = [("conversation", empty), ("session", empty)]
    chat_outputs = [chat.history, chat.live, conversation, restore]
    gpu = dict(concurrency_limit=handlers.settings.gpu_concurrency, concurrency_id="gpu")
    private = dict(api_visibility="private")
    streamed = dict(show_progress_on=[chat.live])  # the history does not change while a turn streams
    # Every event names small components as its progress targets. Gradio's page keeps a
    # loading status for each component any event has had as a target (its outputs, unless
    # show_progress_on says otherwise), and at every streamed update it copies the whole
    # state of each of them: with the chat history and the inspector's layers among them, a
    # long chat made each update of the reply cost tens of ms more, and the first ones
    # hundreds. Hidden progress shows nothing, so its target is a State.
    quiet = dict(show_progress="hidden", show_progress_on=[layout.restore])

    after_turn = with_options(handlers, handlers.after_turn, [("conversation", empty), ("restore", empty),
                                                              ("composer", empty), ("session", empty),
                                                              ("show_ids", empty)])
    after = dict(fn=after_turn, inputs=[conversation, restore, chat.composer, session, inspector.show_ids, *options],
                 outputs=[chat.composer, chat.stop, chat.tool_row, chat.tool_answer, inspector.reply_stats,
                          inspector.raw_output, inspector.parsed_output, chat.probabilities, *inspector.layers,
                          session],
                 **quiet, **private)
    # Gradio forgets a State only if an event has returned it: its time to live counts from the
    # last return (an hour once the page is closed). The handlers change the session in place,
    # so the inspector's refresh (at the page's load, at each change of the draft or a setting)
    # and every turn's end return it too; else a visitor's session (their unsent uploads,
    # decoded, and the inspector as last shown) stayed until 10,000 later visitors had pushed
    # it out of Gradio's store.

    def running():
        return gr.update(interactive=True)  # Stop, as soon as a turn is asked for

    # 1. Send: check and show the message, stream the reply, then settle the composer.
    respond = with_options(handlers, handlers.respond, [("message", empty), *turn])
    # Queued, so that a refusal's toast reaches the browser (a queue=False handler cannot
    # show gr.Warning); decoding is CPU work, apart from the GPU's limit.
    chat.composer.submit(handlers.stage, [chat.composer, conversation, session, chat.shows_messages],
                         [chat.composer, chat.staged, chat.history, chat.live, chat.stop], concurrency_limit=4,
                         concurrency_id="stage", js=SHOWS_MESSAGES_JS, **quiet, **private).then(
        respond, [chat.staged, conversation, session, *options], chat_outputs, api_name="chat",
        show_progress="minimal", **streamed, **gpu,
    ).then(**after)

    # 1b. Token probabilities are recorded only while their view is open (closed, they cost nothing).
    for event, shown in ((chat.probabilities_view.expand, True), (chat.probabilities_view.collapse, False)):
        event(functools.partial(handlers.show_probabilities, shown), [conversation, session], chat.probabilities,
              queue=False, **quiet, **private)

    # 1c. The same turn for scripts, the reply as data (no button: an API endpoint only).
    reply_trigger, reply_out = gr.Button(visible=False), gr.JSON(visible=False)
    reply_trigger.click(with_options(handlers, handlers.reply, [("message", empty), *turn]),
                        [chat.staged, conversation, session, *options], [reply_out, conversation], api_name="reply",
                        **gpu)

    # 1d. An example in the empty chat fills the composer and the example's settings.
    example_rows, _ = _examples(handlers.default_options().enabled_tools)

    def pick_example(evt: gr.SelectData):
        message, thinking, tools_on = example_rows[evt.index]
        return {"text": message["text"], "files": list(message["files"])}, thinking, tools_on

    chat.history.example_select(pick_example, None, [chat.composer, layout.options["thinking"],
                                                     layout.options["enabled_tools"]], queue=False, **private)

    # 2. Stop: the running or queued turn stops (the reply it has so far stays).
    chat.stop.click(handlers.stop, [session], None, queue=False, api_name="stop")

    # 3. Retry, undo and edit of the last message.
    chat.history.retry(running, None, chat.stop, queue=False, **private).then(
        with_options(handlers, handlers.retry, turn), [conversation, session, *options], chat_outputs,
        **private, **streamed, **gpu,
    ).then(**after)
    chat.history.undo(handlers.undo, [conversation, session],
                      [chat.history, chat.live, conversation, chat.composer], **quiet, **private).then(**after)
    chat.history.edit(running, None, chat.stop, queue=False, **private)
    chat.history.edit(with_options(handlers, handlers.edit, [("data", gr.EditData), *turn]),
                      [conversation, session, *options], chat_outputs, **private, **streamed, **gpu).then(**after)

    # 4. Client tools: the user answers (or cancels) a call the model made.
    answer = with_options(handlers, handlers.answer_tool, [("answer", empty), *turn])
    cancel = with_options(handlers, handlers.cancel_tool, turn)
    for trigger, handler, inputs, name in (
        (chat.tool_submit.click, answer, [chat.tool_answer, conversation, session, *options], "tool_result"),
        (chat.tool_answer.submit, answer, [chat.tool_answer, conversation, session, *options], None),
        (chat.tool_cancel.click, cancel, [conversation, session, *options], "cancel_tool"),
    ):
        trigger(running, None, chat.stop, queue=False, **private).then(
            handler, inputs, chat_outputs, api_name=name, api_visibility="public" if name else "private",
            **streamed, **gpu,
        ).then(**after)

    # 5. New conversation, also from the Chatbot's own trash button: a reply still streaming stops.
    reset_outputs = [chat.history, chat.live, conversation, restore, chat.composer, chat.stop, chat.tool_row,
                     inspector.exported]
    chat.new_chat.click(handlers.reset, [session], reset_outputs, api_name="new_conversation", queue=False,
                        **quiet).then(**after)
    chat.history.clear(handlers.reset, [session], reset_outputs, queue=False, **quiet, **private).then(**after)

    # 6. The inspector follows the draft and the settings (always_last: a natural debounce).
    refresh = with_options(handlers, handlers.refresh_inspector_and_keep_session,
                           [("value", empty), *turn, ("show_ids", empty)])
    live = dict(fn=refresh, inputs=[chat.composer, conversation, session, inspector.show_ids, *options],
                outputs=[*inspector.layers, session], **quiet, trigger_mode="always_last",
                concurrency_limit=4, concurrency_id="inspector", **private)
    for name in ("system_prompt", "thinking", "image_budget", "enabled_tools"):
        layout.options[name].change(**live)
    for component in (chat.composer, inspector.show_ids):
        component.change(**live)
    demo.load(**live)
    # A coloured layer that could not apply its patch asks for the whole inspector (tail_patched_html).
    for layer in (inspector.messages, inspector.template, inspector.expanded_colour):
        layer.clear(handlers.resend_inspector, [session], None, queue=False, **private).then(**live)
    # A plain text is filled while its accordion is open (inspector_updates says why).
    for name, view in inspector.plain_text_views.items():
        box = getattr(inspector, name)
        for event, shown in ((view.expand, True), (view.collapse, False)):
            event(functools.partial(handlers.show_plain_text, name, shown), [session], box, queue=False,
                  **quiet, **private).then(**live)
    # A click on a message maps its media (the soft-token map shows that message's).
    chat.history.select(handlers.pick_message, [conversation, session], None, queue=False, **private).then(**live)

    # 7. Declared tools (this user only).
    tools.declare.click(handlers.add_tool, [tools.schema_box, layout.options["enabled_tools"], session],
                        [layout.options["enabled_tools"], tools.tool_docs, tools.schema_box, tools.remove_row,
                         tools.remove_choice, tools.declare_notice], api_name="declare_tool")
    tools.remove.click(handlers.remove_tool, [tools.remove_choice, layout.options["enabled_tools"], session],
                       [layout.options["enabled_tools"], tools.tool_docs, tools.remove_row, tools.remove_choice,
                        tools.declare_notice], api_name="remove_tool")

    # 8. Take it with you: the conversation and the raw template as files; loading back.
    export = with_options(handlers, handlers.export_files, [("conversation", empty), ("session", empty)])
    inspector.export.click(export, [conversation, session, *options], inspector.exported, api_name="export")
    inspector.upload_chat.upload(
        handlers.load_chat, [inspector.upload_chat, session],
        [chat.history, chat.live, conversation, layout.options["system_prompt"], layout.options["thinking"],
         layout.options["enabled_tools"], tools.tool_docs], show_progress_on=[chat.live], **private,
    ).then(**after)


def build_ui(handlers: SharedChatHandlers) -> gr.Blocks:
    """The whole app; builds no model and touches no GPU (the engine is passed in, loaded or not)."""
    with gr.Blocks(title="Gemma 4 UI", fill_height=False, delete_cache=(3600, 7200)) as demo:
        layout = build_layout(handlers)
        wire(demo, handlers, layout)
    return demo
