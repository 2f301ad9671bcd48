"""Browser: a 2,000-token reply streamed into Chromium, without freezing the page.

While the reply streams, the page records every animation frame (a frame much longer than
16 ms is jank), the long tasks the browser reports (main-thread tasks over 50 ms), and
every DOM update of the chat. Chrome DevTools' Performance metrics give the main thread's
CPU time, sampled with the count of updates and the reply's length, so the cost of one
update early in the reply can be compared with one late in it: re-rendering the whole
reply on each update would make that cost grow with the reply, and the total quadratic.
"""

from __future__ import annotations

import time

from .chromium import app_page, browser
from .context import Context
from .harness import Figure, Section, Target

PROMPT = "Write a long story."
MONITOR = """() => {
    const m = window.__bench = {frames: [], longTasks: [], updates: [], stop: false};
    let last = performance.now();
    const tick = (now) => { m.frames.push(now - last); last = now; if (!m.stop) requestAnimationFrame(tick); };
    requestAnimationFrame(tick);
    new PerformanceObserver(list => list.getEntries().forEach(e => m.longTasks.push(e.duration)))
        .observe({type: 'longtask'});
    const chat = document.querySelector('#chatbot');
    new MutationObserver(() => m.updates.push(performance.now())).observe(
        chat, {subtree: true, childList: true, characterData: true});
}"""
REPLY_LENGTH = """() => [...document.querySelectorAll('#chatbot [data-testid="bot"]')]
                           .reduce((length, bot) => length + bot.textContent.length, 0)"""
STREAMING = "() => document.querySelector('#composer textarea').disabled"


def set_reply_length(page, tokens: int) -> None:
    page.get_by_role("tab", name="Settings").click()
    field = page.locator("#max-new-tokens input[type=number]")
    field.fill(str(tokens))
    field.press("Enter")
    page.get_by_role("tab", name="Inspector").click()
    # The slider keeps it (its range input follows the value the page will send).
    page.wait_for_function(f"""() => [...document.querySelectorAll('#max-new-tokens input')]
                                     .every((input) => input.value === '{tokens}')""", timeout=10_000)


def main_thread_clock(page):
    """A DevTools session whose TaskDuration counts the main thread's CPU time, not the wall
    clock: on two cores the app's server, generating the reply, often preempts the page, and
    that wait is the machine's noise, not the page's work."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
    return cdp


def task_seconds(cdp) -> float:
    """Main-thread CPU time so far (DevTools' TaskDuration, in thread ticks)."""
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "TaskDuration")


def stream_one_reply(page, tokens: int) -> dict:
    """Send the prompt and sample (busy time, updates, reply length) until the reply ends."""
    cdp = main_thread_clock(page)
    set_reply_length(page, tokens)
    page.evaluate(MONITOR)
    page.fill("#composer textarea", PROMPT)
    page.keyboard.press("Enter")
    page.wait_for_function(STREAMING, timeout=30_000)
    samples = []
    while page.evaluate(STREAMING):
        samples.append((task_seconds(cdp), page.evaluate("window.__bench.updates.length"), page.evaluate(REPLY_LENGTH)))
        time.sleep(0.25)
    page.evaluate("window.__bench.stop = true")
    monitor = page.evaluate("window.__bench")
    cdp.detach()
    return {"samples": samples, **monitor}


def cost_per_update(samples: list[tuple], low: float, high: float) -> float:
    """Main-thread ms per DOM update while the reply was between `low` and `high` of its
    final length."""
    final = samples[-1][2]
    window = [s for s in samples if low * final <= s[2] <= high * final]
    (busy0, updates0, _), (busy1, updates1, _) = window[0], window[-1]
    return 1000 * (busy1 - busy0) / max(1, updates1 - updates0)


def summarise(run: dict) -> dict:
    updates = run["updates"]
    streaming_seconds = (updates[-1] - updates[0]) / 1000
    return {
        "updates per second": (len(updates) - 1) / streaming_seconds,
        "longest frame": max(run["frames"]),
        "longest task": max(run["longTasks"], default=0.0),
        "early cost": cost_per_update(run["samples"], 0.1, 0.35),
        "late cost": cost_per_update(run["samples"], 0.65, 0.9),
    }


def browser_streaming(ctx: Context) -> Section:
    from gemma4_ui.web.pacing import MAX_UPDATES_PER_SECOND

    tokens = ctx.sizes.browser_tokens
    runs = []
    with browser() as chromium:
        for _ in range(min(ctx.runs, 3)):
            before = len(ctx.app.recorded_rounds())
            with app_page(chromium, ctx.app.url) as page:
                runs.append(summarise(stream_one_reply(page, tokens)))
            generated = [r["generated_tokens"] for r in ctx.app.recorded_rounds()[before:]]
            assert generated == [tokens], f"the server generated {generated}, not [{tokens}]"
    column = lambda key: [r[key] for r in runs]  # noqa: E731
    growth = [r["late cost"] / r["early cost"] for r in runs]
    return Section("browser", [
        Figure(f"Chromium: chat DOM updates/s, {tokens}-token reply", column("updates per second"), "/s",
               Target("≤", MAX_UPDATES_PER_SECOND), digits=1, note="MAX_UPDATES_PER_SECOND caps what the server sends"),
        Figure("Chromium: longest main-thread task while streaming", column("longest task"), "ms", Target("<", 100),
               digits=0, note="PerformanceObserver 'longtask' (tasks over 50 ms); 0 when none"),
        Figure("Chromium: longest animation frame while streaming", column("longest frame"), "ms", Target("<", 200),
               digits=0),
        Figure("Chromium: main-thread ms per update, late in the reply", column("late cost"), "ms", digits=1),
        Figure("  late ÷ early in the reply (quadratic if it grows)", growth, "", Target("≤", 2.0),
               note="reply at 65–90% vs 10–35% of its final length"),
    ])
