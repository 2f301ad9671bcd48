"""Render the canonical conversation as Gradio Chatbot messages (the display edge).

Fresh dicts every time: Gradio drops in-place edits of messages it has already sent.
Thoughts are collapsible panels (`metadata.title`), pending while they stream and done,
with their duration, once the answer starts; each tool call is its own panel, nested under
the thought when there is one.

Every text shown here is untrusted (the user's, the model's, a tool's, a loaded file's):
it goes through `safe_markdown`, titles through `literal`, and JSON into a fence that
nothing inside it can close.
"""

from __future__ import annotations

import json

import gradio as gr

from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn
from gemma4_ui.core.events import ToolCall, ToolResult
from gemma4_ui.core.streaming import Live
from gemma4_ui.web.safe_markdown import code_block, literal, safe_markdown, unescape_markdown

THINKING_TITLE = "💭 Thinking"


def turn_of_message(conversation: Conversation, index: int) -> int | None:
    """The turn that rendered chat message `index` belongs to (None past the end)."""
    shown = 0
    for t, turn in enumerate(conversation.turns):
        shown += len(_user(turn) if isinstance(turn, UserTurn) else _assistant(turn, t, None))
        if index < shown:
            return t
    return None


Versions = list[tuple[int, int]]  # (which, of how many) per turn: core.branches.Branches.versions


def render(conversation: Conversation, live: Live | None = None, notice: str = "", start: int = 0,
           versions: Versions = ()) -> list[dict]:
    """The messages of the turns from `start` on (`live`: the last turn's streaming round); a
    turn with other versions says which it is (`versions`), without adding a message, so that
    a message's place is the same with and without them."""
    messages: list[dict] = []
    last = len(conversation.turns) - 1
    for t, turn in enumerate(conversation.turns[start:], start):
        if isinstance(turn, UserTurn):
            shown = _user(turn)
        else:
            shown = _assistant(turn, t, live if t == last else None)
        if t < len(versions) and versions[t][1] > 1 and shown and isinstance(shown[-1]["content"], str):
            # under the answer, rather than under a notice that follows it
            at = -2 if getattr(turn, "notice", "") and len(shown) > 1 and "metadata" not in shown[-2] else -1
            shown[at] = {**shown[at], "content": shown[at]["content"] + version_mark(*versions[t])}
        messages.extend(shown)
    if notice:
        messages.append(_notice_message(notice))
    return messages


def version_mark(which: int, count: int) -> str:
    """‹ 2/3 › under a message with other versions (the branch bar below the chat switches)."""
    return f"{VERSION_MARK_START}‹ {which + 1}/{count} ›</span>"


VERSION_MARK_START = "\n\n<span class='branch-mark'>"


# The chat is two Chatbots, one above the other: the history holds every settled turn and is
# left alone while a turn streams; the live part holds only what this turn adds. Gradio
# re-processes, diffs and re-draws every message of a Chatbot on each update, so a reply
# streaming into a long chat would cost more with every message above it (on the server,
# and far more in the browser); this way an update costs the same however long the chat.


def settled(conversation: Conversation, notice: str = "", versions: Versions = ()) -> tuple[list[dict], list[dict]]:
    """(history, live) of a chat at rest: every turn in the history; a notice (a refusal, an
    error) below it, in the live part, so that the history is always `render(conversation)`."""
    return render(conversation, versions=versions), [_notice_message(notice)] if notice else []


def beside_history(notice: str) -> tuple:
    """(history, live) that leave the history on screen as it is, the notice below it: where
    the conversation the page shows is no longer the app's to render."""
    return gr.skip(), [_notice_message(notice)]


def common_turns(shown: Conversation, conversation: Conversation) -> int:
    """How many leading turns `conversation` shares with `shown` (the same turn objects)."""
    n = 0
    for a, b in zip(shown.turns, conversation.turns):
        if a is not b:
            break
        n += 1
    return n


class StreamingRender:
    """(history, live) for the updates of one streaming turn, given the conversation the history
    shows now. The turns the stream keeps stay in the history: it is sent once, on the first
    update, only if the stream dropped or replaced some of its turns (a retry, an edit, a
    client tool's answer), and skipped after that. Everything from the first new turn on is
    the live part, rendered on each update."""

    def __init__(self, shown: Conversation, versions: Versions = ()):
        self.shown = shown
        self.versions = versions  # of the turns shown
        self.start: int | None = None

    def __call__(self, conversation: Conversation, live: Live | None = None, notice: str = "") -> tuple:
        history = gr.skip()
        if self.start is None:
            self.start = common_turns(self.shown, conversation)
            if self.start < len(self.shown.turns):
                history = render(Conversation(conversation.turns[: self.start]), versions=self.versions)
        return history, render(conversation, live, notice, start=self.start)


def _user(turn: UserTurn) -> list[dict]:
    out = [{"role": "user", "content": {"path": item.shown_path or item.path, "alt_text": item.name}}
           for item in turn.media]
    notes = media_notes(turn)
    if turn.text or notes or not turn.media:
        text = safe_markdown(turn.text)
        out.append({"role": "user", "content": f"{text}\n\n{notes}" if text and notes else text or notes})
    return out


def media_notes(turn: UserTurn) -> str:
    """What the sent message says about its files (audio cut, a name that lies...), one
    quoted line each; each note is one line of escaped text, so quoting it is safe."""
    return "\n".join("> " + safe_markdown("⚠️ " + " ".join(item.warning.split()))
                      for item in turn.media if item.warning)


def edited_text(shown: str, turn: UserTurn) -> str:
    """The user's text from the chat's editor, which holds the text as shown: escaped for
    display, and followed by the notes about the files."""
    if VERSION_MARK_START.strip() in shown:  # the ‹ 2/3 › a message with versions shows
        shown = shown[: shown.rindex(VERSION_MARK_START.strip())]
    notes = media_notes(turn)
    if notes and shown.rstrip().endswith(notes):
        shown = shown.rstrip()[: -len(notes)]
    return unescape_markdown(shown).strip()


def _assistant(turn: AssistantTurn, t: int, live: Live | None) -> list[dict]:
    out: list[dict] = []
    for r, round_ in enumerate(turn.rounds):
        running = live.running_call if live is not None and r == len(turn.rounds) - 1 else None
        out.extend(_round(round_, f"{t}-{r}", running))
    key = f"{t}-{len(turn.rounds)}"
    if live is not None:  # the round now streaming
        if live.reasoning:
            out.append(_thinking(live.reasoning, key, live.thinking_seconds, done=live.thinking_seconds is not None))
        pending_calls = live.calls + [None] * (live.calls_started - len(live.calls))
        for c, call in enumerate(pending_calls):
            out.append(_call_panel(call, None, f"{key}-{c}", _parent(live.reasoning, key), running=False))
        if live.content.strip():
            out.append({"role": "assistant", "content": safe_markdown(live.content.strip())})
    else:
        if turn.reasoning:
            out.append(_thinking(turn.reasoning, key, turn.thinking_seconds))
        if turn.content:
            out.append({"role": "assistant", "content": safe_markdown(turn.content) + stats_line(turn)})
    if turn.notice:
        out.append(_notice_message(turn.notice))
    return out


def _round(round_: ToolRound, key: str, running: int | None) -> list[dict]:
    out: list[dict] = []
    if round_.reasoning:
        # The calls nest inside the thought, which folds when done: its title names them.
        calls = ", ".join(dict.fromkeys(literal(c.name) for c in round_.calls))
        out.append(_thinking(round_.reasoning, key, round_.thinking_seconds, f" · 🛠️ {calls}"))
    if round_.content:
        out.append({"role": "assistant", "content": safe_markdown(round_.content)})
    for c, call in enumerate(round_.calls):
        result = round_.results[c] if c < len(round_.results) else None
        out.append(_call_panel(call, result, f"{key}-{c}", _parent(round_.reasoning, key), running=c == running))
    return out


def _thinking(text: str, key: str, seconds: float | None, suffix: str = "", done: bool = True) -> dict:
    """`done` is False only while the thought streams (a loaded thought has no duration)."""
    metadata = {"title": THINKING_TITLE + suffix, "id": f"think-{key}", "status": "done" if done else "pending"}
    if seconds is not None:
        metadata["duration"] = round(seconds, 1)
    return {"role": "assistant", "content": safe_markdown(text.strip()), "metadata": metadata}


def _parent(reasoning: str, key: str) -> str | None:
    return f"think-{key}" if reasoning else None


def _call_panel(call: ToolCall | None, result: ToolResult | None, key: str, parent: str | None, running: bool) -> dict:
    """Pending (calling / running / waiting for the user), then done with result and time."""
    if call is None:
        metadata = {"title": "🛠️ Calling a tool…", "status": "pending"}
        body = ""
    else:
        arguments = call.arguments if call.arguments is not None else call.raw
        metadata = {"title": f"🛠️ {literal(call.name)}", "log": _short(arguments)}
        body = f"**Arguments**\n{code_block(_json(arguments), 'json')}"
        if result is None:
            metadata["status"] = "pending"
            body += "\n\n_Running…_" if running else ""
        elif result.status == "client":
            metadata["status"] = "pending"
            body += "\n\n⏳ **Waiting for you**: type this tool's result below the chat, or cancel the call."
        else:
            metadata["status"] = "done"
            if round(result.duration, 3) > 0:  # a result the user typed has no run time to show ("0s")
                metadata["duration"] = round(result.duration, 3)
            label = {"ok": "Result", "timeout": "⏱️ Timed out", "cancelled": "Cancelled"}.get(result.status, "❌ Error")
            if result.status != "ok":
                metadata["title"] += f" — {label.split(' ', 1)[-1].lower()}"
            body += f"\n\n**{label}**\n{code_block(_json(result.response), 'json')}"
    metadata["id"] = f"call-{key}"
    if parent:
        metadata["parent_id"] = parent
    return {"role": "assistant", "content": body, "metadata": metadata}


def stats_line(turn: AssistantTurn) -> str:
    """A small line under the settled answer: time to first token, tokens/s, tokens in and out
    (all rounds of a tool-calling reply counted, the first token timed from the first round)."""
    rounds = [r.stats for r in turn.rounds if r.stats] + ([turn.stats] if turn.stats else [])
    if not rounds:
        return ""
    first, last = rounds[0], rounds[-1]
    parts = []
    if first.time_to_first_token is not None:
        parts.append(f"{first.time_to_first_token:.2f} s to first token")
    if last.tokens_per_second is not None:
        parts.append(f"{last.tokens_per_second:.1f} tokens/s")
    parts.append(f"{last.prompt_tokens:,} tokens in, {sum(s.generated_tokens for s in rounds):,} out")
    if len(rounds) > 1:
        parts.append(f"{len(rounds)} rounds")
    return f"\n\n<div class='reply-stats'>⏱ {' · '.join(parts)}</div>"


def _notice_message(text: str) -> dict:
    return {"role": "assistant", "content": safe_markdown(f"⚠️ {text}")}


def _json(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _short(value, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
