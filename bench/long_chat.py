"""Long chat: a 2,000-token reply with code blocks streaming into a chat of 40 messages, in
Chromium, with the app's Chatbot settings and, side by side, with the settings the app had
before (Gradio's defaults: LaTeX scanned in every message on every update).

Each variant is the real app in its own process, its replies held to the tokens of a
markdown text with code blocks (`scripted_reply.py`). A fresh tab loads the 40-message
conversation through the app's own "Load a conversation", then streams the reply while the
page records, from inside: visible updates (animation frames in which the chat changed),
the long tasks Chromium reports (main-thread tasks over 50 ms), and DevTools' main-thread
CPU time per update. The same reply into an empty chat gives the early-chat cost, so the
late chat can be compared with it: an empty conversation loaded the same way, so that the two
differ in their length alone. A second empty chat, measured the same way, shows how far the
machine's noise alone moves that comparison.
"""

from __future__ import annotations

import json
import time

from tests.conftest import CHAT_FILE_INPUT

from .app_server import CHAT_RENDERING, ONE_CHATBOT, SCRIPTED_TOKENS, UPDATES_PER_SECOND, AppProcess
from .browser import main_thread_clock, task_seconds
from .chromium import app_page, browser
from .context import Context
from .harness import Figure, Section, Target, interleaved, paired
from .scripted_reply import long_chat

MESSAGES = 40
# The app as it was before: the whole chat in one Chatbot with Gradio's defaults, re-sent on
# every update, up to 25 updates a second.
BEFORE = {CHAT_RENDERING: json.dumps({}), UPDATES_PER_SECOND: "25", ONE_CHATBOT: "1"}
PROMPT = "Show me the next steps, with code."
# A change of the chat asks for the frame that shows it, and that frame is counted: no loop
# of its own at every frame, which would make the page render 60 times a second and weigh
# the history's share of every frame on the figures, not the app's.
MONITOR = """() => {
    const m = window.__bench = {visible: [], longTasks: [], stop: false};
    let asked = false;
    new MutationObserver(() => {
        if (asked || m.stop) return;
        asked = true;
        requestAnimationFrame((now) => { m.visible.push(now); asked = false; });
    }).observe(document.querySelector('#chatbot'), {subtree: true, childList: true, characterData: true});
    new PerformanceObserver(list => list.getEntries().forEach(e => m.longTasks.push([e.startTime, e.duration])))
        .observe({type: 'longtask'});
}"""
PHASES = {"sending": "typing the prompt and sending it, before the chat's first change",
          "streaming": "from the chat's first change to its last",
          "settling": "after the chat's last change, until the composer is back"}
MESSAGES_SHOWN = "() => document.querySelectorAll('#chatbot .message-row').length"
STREAMING = "() => document.querySelector('#composer textarea').disabled"


def load_chat(page, saved, messages: int) -> None:
    page.get_by_role("tab", name="Save / load").click()  # tabs render when first shown
    page.set_input_files(CHAT_FILE_INPUT, str(saved))
    page.wait_for_selector(".toast-item", timeout=120_000)  # loaded (an empty chat shows no other sign)
    page.wait_for_function(f"() => ({MESSAGES_SHOWN})() >= {messages}", timeout=120_000)
    page.get_by_role("tab", name="Inspector").click()
    time.sleep(1.0)  # the inspector's refresh after loading
    # The "Conversation loaded." toast goes first: while one is up, its countdown restyles the
    # page at every frame, whatever the chat's length (this figure is about the length).
    page.wait_for_function("() => !document.querySelector('.toast-item')", timeout=30_000)


def stream(page) -> dict:
    """Send the prompt; the reply's visible updates, long tasks and main-thread ms per update."""
    cdp = main_thread_clock(page)
    page.evaluate(MONITOR)
    page.fill("#composer textarea", PROMPT)
    busy0 = task_seconds(cdp)
    page.keyboard.press("Enter")
    page.wait_for_function(STREAMING, timeout=120_000)
    samples = []  # (busy seconds, visible updates so far), while the reply streams
    while page.evaluate(STREAMING):
        samples.append((task_seconds(cdp), page.evaluate("window.__bench.visible.length")))
        time.sleep(0.25)
    busy = task_seconds(cdp) - busy0
    page.evaluate("window.__bench.stop = true")
    monitor = page.evaluate("window.__bench")
    cdp.detach()
    visible = monitor["visible"]
    seconds = (visible[-1] - visible[0]) / 1000
    tasks = monitor["longTasks"]
    phases = {"sending": [d for t, d in tasks if t < visible[0]],
              "streaming": [d for t, d in tasks if visible[0] <= t < visible[-1]],
              "settling": [d for t, d in tasks if t >= visible[-1]]}
    return {"updates per second": (len(visible) - 1) / seconds, "longest task": max((d for _, d in tasks), default=0.0),
            "ms per update": 1000 * busy / max(1, len(visible)),
            "ms per update streaming": streaming_cost(samples, len(visible)),
            **{f"longest task {phase}": max(durations, default=0.0) for phase, durations in phases.items()}}


def streaming_cost(samples: list[tuple[float, int]], updates: int) -> float:
    """Main-thread ms per visible update between the 10 % and the 90 % update: the reply's
    streaming alone, without the send (the inspector's refresh of the whole chat lands then)
    or the settling."""
    window = [s for s in samples if 0.1 * updates <= s[1] <= 0.9 * updates]
    (busy0, updates0), (busy1, updates1) = window[0], window[-1]
    return 1000 * (busy1 - busy0) / max(1, updates1 - updates0)


def one_reply(chromium, app: AppProcess, saved, messages: int, tokens: int) -> dict:
    before = len(app.recorded_rounds())
    with app_page(chromium, app.url) as page:
        load_chat(page, saved, messages)
        result = stream(page)
    generated = [r["generated_tokens"] for r in app.recorded_rounds()[before:]]
    assert generated == [tokens], f"the server generated {generated}, not [{tokens}]"
    return result


def long_chat_streaming(ctx: Context) -> Section:
    tokens = ctx.sizes.browser_tokens
    # Both chats are loaded: having used "Load a conversation" (the upload, the inspector's
    # refresh of a loaded chat) costs a few per cent per update of its own, whatever the length.
    saved, empty = ctx.workdir / "long-chat.json", ctx.workdir / "empty-chat.json"
    # A conversation loaded brings its settings: the reply's length is the one it saved. The 40
    # messages are a longer prompt than the CPU's default prompt limit takes: this measures the
    # page, so the context alone limits it.
    saved.write_text(long_chat(MESSAGES, tokens), encoding="utf-8")
    empty.write_text(long_chat(0, tokens), encoding="utf-8")
    scripted = {SCRIPTED_TOKENS: str(tokens), "GEMMA4_MAX_NEW_TOKENS": str(tokens), "GEMMA4_MAX_PROMPT_TOKENS": "0"}
    app = ctx.fresh_app(scripted)
    before = ctx.fresh_app({**scripted, **BEFORE})
    with browser() as chromium:
        sides = {
            "app, 40 messages": lambda: one_reply(chromium, app, saved, MESSAGES, tokens),
            "app, empty chat": lambda: one_reply(chromium, app, empty, 0, tokens),
            "app, empty chat again": lambda: one_reply(chromium, app, empty, 0, tokens),
            "before, 40 messages": lambda: one_reply(chromium, before, saved, MESSAGES, tokens),
            "before, empty chat": lambda: one_reply(chromium, before, empty, 0, tokens),
        }
        runs = interleaved(sides, ctx.runs)
    column = lambda side, key: [r[key] for r in runs[side]]  # noqa: E731
    figures = []
    for side in ("app, 40 messages", "before, 40 messages"):
        app_side = side.startswith("app")
        figures += [
            Figure(f"{side}: visible updates/s, {tokens}-token reply with code", column(side, "updates per second"),
                   "/s", Target("≥", 10) if app_side else None, digits=1,
                   note="animation frames in which the chat changed"),
            Figure(f"{side}: longest main-thread task", column(side, "longest task"), "ms",
                   Target("≤", 50) if app_side else None, digits=0,
                   note="PerformanceObserver 'longtask' reports tasks over 50 ms; 0 when none"),
            Figure(f"{side}: main-thread ms per visible update, whole turn", column(side, "ms per update"), "ms",
                   digits=1, note="sending and settling included"),
            Figure(f"{side}: main-thread ms per visible update, streaming", column(side, "ms per update streaming"),
                   "ms", digits=1, note="between the 10 % and the 90 % update"),
        ]
        if app_side:  # where the longest tasks are
            figures += [Figure(f"{side}: longest task {phase}", column(side, f"longest task {phase}"), "ms", digits=0,
                               note=note) for phase, note in PHASES.items()]
    for side in ("app", "before"):
        for key, what in (("ms per update streaming", "streaming"), ("ms per update", "whole turn")):
            late, early = column(f"{side}, 40 messages", key), column(f"{side}, empty chat", key)
            target = Target("≤", 1.0) if side == "app" and what == "streaming" else None
            figures.append(Figure(f"{side}: late chat ÷ early chat, main-thread ms per update, {what}",
                                  paired(late, early, lambda a, b: a / b), "", target,
                                  note="40 messages vs an empty chat, both loaded, the same reply"))
            if side == "app" and what == "streaming":
                again = column("app, empty chat again", key)
                figures.append(Figure("app: early chat ÷ the same early chat again, main-thread ms per update, "
                                      "streaming", paired(again, early, lambda a, b: a / b), "",
                                      note="two identical sides (an A/A comparison): the bench's own noise"))
    return Section("long chat", figures)
