"""Hostile content in every place the chat renders, in Chromium, with traps: a dialog
(`alert`), a request to any other host, or a popup to another origin means script ran or
a resource loaded that should not have. Every element of every message is hovered and
clicked, with real mouse events for links and synthetic ones for the rest."""

from __future__ import annotations

import json
import threading
from urllib.parse import urlparse

import pytest
from conftest import ARTIFACTS, CHAT_FILE_INPUT, start_app
from replay import ReplayEngine
from test_browser import open_app
from xss_payloads import PAYLOADS

from gemma4_ui.core import transcript
from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn
from gemma4_ui.core.events import ToolCall, ToolResult
from gemma4_ui.core.options import ChatOptions

Q = '<|"|>'

# Everything inside rendered message text (message bodies and panel titles), where no
# untrusted markup may survive.
AUDIT = r"""() => {
    const problems = [];
    const unsafe = /^(javascript|vbscript|livescript|data):/;
    const forbidden = new Set(['script', 'iframe', 'frame', 'object', 'embed', 'svg', 'math', 'form', 'input',
                               'base', 'meta', 'link', 'style', 'img', 'video', 'audio', 'source', 'body',
                               'details', 'noscript', 'foreignobject', 'use', 'animate', 'set']);
    for (const root of document.querySelectorAll('#chatbot .md')) {
        for (const el of root.querySelectorAll('*')) {
            // Gradio's own copy buttons in code blocks, and KaTeX's output (MathML, sized spans)
            if (el.closest('button') || el.closest('.katex')) continue;
            const tag = el.tagName.toLowerCase();
            if (forbidden.has(tag)) problems.push('element ' + tag + ': ' + el.outerHTML.slice(0, 120));
            for (const attr of el.getAttributeNames()) {
                const value = (el.getAttribute(attr) || '').replace(/[\s\u0000-\u001f]/g, '').toLowerCase();
                if (attr.startsWith('on')) problems.push('handler ' + attr + ' on ' + tag);
                if (attr === 'style') problems.push('style on ' + tag);
                if (['href', 'xlink:href', 'src', 'action', 'formaction', 'data', 'srcdoc'].includes(attr)
                    && (unsafe.test(value) || attr === 'srcdoc')) problems.push(attr + '=' + value + ' on ' + tag);
            }
        }
    }
    return problems;
}"""

# Synthetic hover, focus and click on every element of every message.
POKE = r"""() => {
    // A web link's default action opens a tab, and is no script: the audit checks every
    // address. Other clicks keep their default action, `javascript:` links included.
    const web = e => { const a = e.target.closest && e.target.closest('a');
                       if (a && /^https?:$/.test(a.protocol || '')) e.preventDefault(); };
    document.addEventListener('click', web, true);
    let poked = 0;
    for (const root of document.querySelectorAll('#chatbot .md')) {
        for (const el of [root, ...root.querySelectorAll('*')]) {
            if (el.closest('button')) continue;
            for (const type of ['mouseover', 'mouseenter', 'mousedown', 'mouseup', 'click']) {
                el.dispatchEvent(new MouseEvent(type, {bubbles: false, cancelable: true, view: window}));
            }
            el.dispatchEvent(new FocusEvent('focus'));
            poked += 1;
        }
    }
    document.removeEventListener('click', web, true);
    return poked;
}"""


class Traps:
    def __init__(self, page, app_url: str):
        self.fired: list[str] = []
        origin = urlparse(app_url).netloc
        self._lock = threading.Lock()

        def on_request(route):
            host = urlparse(route.request.url).netloc
            if host and host != origin:
                self._fire(f"request to {route.request.url}")
                route.abort()
            else:
                route.continue_()

        def on_dialog(dialog):
            self._fire(f"dialog: {dialog.type} {dialog.message!r}")
            dialog.dismiss()

        def on_popup(popup):
            if urlparse(popup.url).netloc not in ("", origin):
                self._fire(f"popup to {popup.url}")
            popup.close()

        page.context.route("**/*", on_request)
        page.on("dialog", on_dialog)
        page.on("popup", on_popup)

    def _fire(self, what: str) -> None:
        with self._lock:
            self.fired.append(what)


def expand_panels(page) -> None:
    """Open every collapsed thought and tool panel (their bodies render only when open)."""
    for _ in range(6):  # nested panels appear once their parent opens
        opened = page.evaluate("""() => {
            const closed = [...document.querySelectorAll('#chatbot .thought-group > .title:not(.expanded)')];
            closed.forEach(title => title.click());
            return closed.length;
        }""")
        if not opened:
            return
        page.wait_for_timeout(300)


CENTRE = """([selector, k]) => {
    const el = document.querySelectorAll(selector)[k];
    el.scrollIntoView({block: 'center'});
    const r = el.getBoundingClientRect();
    return r.width && r.height ? {x: r.x + Math.min(r.width / 2, 20), y: r.y + r.height / 2} : null;
}"""


def real_pointer(page, selector: str, click: bool) -> int:
    """Move the real mouse onto each element (and click it): the browser's own events. Of
    links, the first of each distinct address (each click opens a tab), web addresses
    (which the audit checks, and which a user's click may rightly follow) left out."""
    indices = page.evaluate("""([s, click]) => {
        const seen = new Set();
        return [...document.querySelectorAll(s)].map((el, k) => [k, el.getAttribute('href') || ''])
            .filter(([k, href]) => !click || (!/^https?:/i.test(href) && !seen.has(href) && seen.add(href)))
            .map(([k]) => k);
    }""", [selector, click])
    for k in indices:
        at = page.evaluate(CENTRE, [selector, k])
        if at:
            page.mouse.move(at["x"], at["y"])
            if click:
                page.mouse.click(at["x"], at["y"])
    return len(indices)


def check_page(page, traps: Traps, name: str) -> None:
    expand_panels(page)
    problems = page.evaluate(AUDIT)
    poked = page.evaluate(POKE)
    links = real_pointer(page, "#chatbot .md a", click=True)
    real_pointer(page, '#chatbot [data-testid="bot"] > .message-content > .md', click=False)
    problems += page.evaluate(AUDIT)
    page.wait_for_timeout(500)  # let any deferred handler or load fire
    assert poked > len(PAYLOADS) and links > 0
    assert not problems, problems[:10]
    assert not traps.fired, traps.fired[:10]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), timeout=120_000)  # the visible part: the page is long


def hostile_transcript() -> str:
    """One exchange per payload, the payload in each place of it: user text, thought,
    reply, notice, tool name, unparsed call arguments, parsed arguments, string result,
    error result."""
    conversation = Conversation()
    for p in PAYLOADS:
        calls = [ToolCall(p, None, raw=p, error="could not parse"), ToolCall("lookup", {"query": p, p: 1})]
        results = [ToolResult(p, "c0", "ok", p, 0.1, None), ToolResult("lookup", "c1", "error", {"error": p}, 0.1, p)]
        round_ = ToolRound(calls, results, reasoning=p, content=p)
        conversation.turns += [UserTurn(p), AssistantTurn(rounds=[round_], reasoning=p, content=p, notice=p)]
    return transcript.dumps(conversation, ChatOptions())


def load_transcript(page, path) -> None:
    page.get_by_role("tab", name="Save / load").click()
    page.set_input_files(CHAT_FILE_INPUT, str(path))


@pytest.mark.timeout(900)  # thousands of elements, each hovered and clicked
def test_hostile_loaded_conversation_runs_nothing(app_server, page, tmp_path):
    path = tmp_path / "hostile.json"
    path.write_text(hostile_transcript(), encoding="utf-8")
    open_app(page, app_server.url)
    traps = Traps(page, app_server.url)
    load_transcript(page, path)
    page.wait_for_function("n => document.querySelectorAll('#chatbot [data-testid=\"user\"]').length >= n",
                           arg=len(PAYLOADS), timeout=60_000)
    check_page(page, traps, "xss-loaded-conversation")
    # Shown as text, not swallowed: each tag payload's text is on the page.
    text = page.inner_text("#chatbot")
    for p in PAYLOADS:
        if p.startswith("<") and "alert(" in p:
            marker = p[p.index("alert("):p.index(")", p.index("alert(")) + 1]
            assert marker in text, p


def test_hostile_file_in_a_toast_runs_nothing(app_server, page, tmp_path):
    """A loaded file's own fields reach the error toast."""
    path = tmp_path / "bad-version.json"
    path.write_text(json.dumps({"format": transcript.FORMAT, "version": "\n".join(PAYLOADS), "turns": []}))
    open_app(page, app_server.url)
    traps = Traps(page, app_server.url)
    load_transcript(page, path)
    toast = page.locator('[data-testid="toast-body"]')
    toast.first.wait_for(timeout=30_000)
    assert "alert(12)" in toast.first.inner_text(), "the message is shown, as text"
    toast.first.hover(force=True)
    page.evaluate("""() => document.querySelectorAll('[data-testid="toast-body"] *').forEach(el =>
        ['mouseover', 'mouseenter', 'click'].forEach(t => el.dispatchEvent(new MouseEvent(t))))""")
    page.wait_for_timeout(300)
    audit = page.evaluate("""() => [...document.querySelectorAll('[data-testid="toast-text"] *')]
        .filter(e => ['svg','img','a','math','iframe','script'].includes(e.tagName.toLowerCase())
                     && !e.closest('button')).map(e => e.outerHTML.slice(0, 80))""")
    assert not audit, audit
    assert not traps.fired, traps.fired


@pytest.fixture(scope="module")
def replay_server(processor):
    """The app on an engine that replays a hostile model output: a thought, a call to a
    tool with a hostile name and arguments, then a hostile reply, streamed."""
    hostile = "\n\n".join(PAYLOADS)
    call = f"<|tool_call>call:get_<svg/onload=alert(99)>{{q:{Q}```\n<img src=x onerror=alert(98)>{Q}}}<tool_call|>"
    outputs = [f"<|channel>thought\n{hostile}<channel|>{call}<|tool_response>", hostile + "<turn|>"]
    server = start_app(ReplayEngine(processor, outputs, chunk=400))
    yield server
    server.demo.close()


def test_hostile_streamed_reply_and_typed_message_run_nothing(replay_server, page):
    open_app(page, replay_server.url)
    traps = Traps(page, replay_server.url)
    page.fill("#composer textarea", PAYLOADS[0] + "\n" + PAYLOADS[11] + "\n[x](javascript:alert(97))")
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('multi-line tag')",
                           timeout=60_000)
    check_page(page, traps, "xss-streamed-reply")


# The parts of the page that show untrusted text outside the chat's messages: the branch
# bar's list of messages with versions (a drop-down list Gradio puts at the page's end), and the comparison's columns, counts and diff.
AUDIT_BRANCHES_AND_COMPARE = r"""() => {
    const problems = [];
    const forbidden = new Set(['script', 'iframe', 'frame', 'object', 'embed', 'svg', 'math', 'form', 'input',
                               'img', 'video', 'audio', 'details', 'style', 'a']);
    const roots = document.querySelectorAll('ul.option-list, #compare-diff, #compare-counts, '
                                            + '#compare-panel .md, #compare-a-heading, #compare-b-heading');
    for (const root of roots) {
        for (const el of root.querySelectorAll('*')) {
            if (el.closest('button')) continue;
            const tag = el.tagName.toLowerCase();
            if (forbidden.has(tag)) problems.push('element ' + tag + ': ' + el.outerHTML.slice(0, 120));
            for (const attr of el.getAttributeNames()) {
                if (attr.startsWith('on')) problems.push('handler ' + attr + ' on ' + tag);
            }
        }
    }
    return [roots.length, problems];
}"""


def test_hostile_versions_and_comparison_run_nothing(app_server, page, tmp_path):
    """Each payload is a version of a message (the branch bar lists them by their text),
    and B's system prompt in a comparison (its template diff shows it)."""
    from gemma4_ui.core.branches import Branches

    tree = Branches()
    for p in PAYLOADS:
        path = tree.conversation().turns
        tree.settle(Conversation(path + [UserTurn("x"), AssistantTurn(content="x")]))
        tree.settle(Conversation(path + [UserTurn(p), AssistantTurn(content=p)]), fork_at=len(path))
    path = tmp_path / "hostile-versions.json"
    path.write_text(transcript.dumps(tree.conversation(), ChatOptions(), branches=tree), encoding="utf-8")
    open_app(page, app_server.url)
    traps = Traps(page, app_server.url)
    load_transcript(page, path)
    page.wait_for_selector("#branch-bar", state="visible", timeout=60_000)
    page.click("#branch-pick input")
    page.wait_for_function("n => document.querySelectorAll('ul.option-list [role=option]').length >= n",
                           arg=len(PAYLOADS), timeout=30_000)
    options = page.inner_text("ul.option-list")
    roots, problems = page.evaluate(AUDIT_BRANCHES_AND_COMPARE)
    assert roots and not problems, problems[:10]
    assert "alert(12)" in options and "<script>alert(25)</script>" in options, "shown as text"
    page.keyboard.press("Escape")
    page.click("#branch-previous")  # a payload's sibling, "x", comes back with its branch
    page.wait_for_function("() => document.querySelector('#branch-count')?.innerText.trim() === '1 / 2'",
                           timeout=30_000)

    page.click("#new-chat")
    page.click("#compare-view > button")
    page.fill("#compare-system textarea", "\n".join(PAYLOADS))
    page.fill("#composer textarea", "Hi")
    page.click("#compare-run")
    page.wait_for_selector("#compare-panel", state="visible", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#stop')?.disabled", timeout=180_000)
    assert "alert(12)" in page.inner_text("#compare-diff")
    roots, problems = page.evaluate(AUDIT_BRANCHES_AND_COMPARE)
    page.wait_for_timeout(500)
    assert roots >= 5 and not problems, problems[:10]
    assert not traps.fired, traps.fired[:10]
    page.screenshot(path=str(ARTIFACTS / "xss-versions-and-compare.png"))
