"""Render the canonical conversation as Gradio Chatbot messages (the display edge).

Fresh dicts every time: Gradio drops in-place edits of messages it has already sent.
Thoughts are collapsible panels (`metadata.title`), pending while they stream and done,
with their duration, once the answer starts; each tool call is its own panel, nested under
the thought when there is one.
"""

from __future__ import annotations

import json

from .conversation import AssistantTurn, Conversation, ToolRound, UserTurn
from .events import ToolCall, ToolResult
from .live import Live

THINKING_TITLE = "💭 Thinking"


def render(conversation: Conversation, live: Live | None = None, notice: str = "") -> list[dict]:
    messages: list[dict] = []
    last = len(conversation.turns) - 1
    for t, turn in enumerate(conversation.turns):
        if isinstance(turn, UserTurn):
            messages.extend(_user(turn))
        else:
            messages.extend(_assistant(turn, t, live if t == last else None))
    if notice:
        messages.append(_notice_message(notice))
    return messages


def _user(turn: UserTurn) -> list[dict]:
    out = [{"role": "user", "content": {"path": item.path, "alt_text": item.name}} for item in turn.media]
    if turn.text or not turn.media:
        out.append({"role": "user", "content": turn.text})
    return out


def _assistant(turn: AssistantTurn, t: int, live: Live | None) -> list[dict]:
    out: list[dict] = []
    for r, round_ in enumerate(turn.rounds):
        running = live.running_call if live is not None and r == len(turn.rounds) - 1 else None
        out.extend(_round(round_, f"{t}-{r}", running))
    key = f"{t}-{len(turn.rounds)}"
    if live is not None:  # the round now streaming
        if live.reasoning:
            out.append(_thinking(live.reasoning, key, live.thinking_seconds))
        pending_calls = live.calls + [None] * (live.calls_started - len(live.calls))
        for c, call in enumerate(pending_calls):
            out.append(_call_panel(call, None, f"{key}-{c}", _parent(live.reasoning, key), running=False))
        if live.content.strip():
            out.append({"role": "assistant", "content": live.content.strip()})
    else:
        if turn.reasoning:
            out.append(_thinking(turn.reasoning, key, turn.thinking_seconds))
        if turn.content:
            out.append({"role": "assistant", "content": turn.content})
    if turn.notice:
        out.append(_notice_message(turn.notice))
    return out


def _round(round_: ToolRound, key: str, running: int | None) -> list[dict]:
    out: list[dict] = []
    if round_.reasoning:
        # The calls nest inside the thought, which folds when done: its title names them.
        calls = ", ".join(dict.fromkeys(c.name for c in round_.calls))
        out.append(_thinking(round_.reasoning, key, round_.thinking_seconds, f" · 🛠️ {calls}"))
    if round_.content:
        out.append({"role": "assistant", "content": round_.content})
    for c, call in enumerate(round_.calls):
        result = round_.results[c] if c < len(round_.results) else None
        out.append(_call_panel(call, result, f"{key}-{c}", _parent(round_.reasoning, key), running=c == running))
    return out


def _thinking(text: str, key: str, seconds: float | None, suffix: str = "") -> dict:
    metadata = {"title": THINKING_TITLE + suffix, "id": f"think-{key}",
                "status": "pending" if seconds is None else "done"}
    if seconds is not None:
        metadata["duration"] = round(seconds, 1)
    return {"role": "assistant", "content": text.strip(), "metadata": metadata}


def _parent(reasoning: str, key: str) -> str | None:
    return f"think-{key}" if reasoning else None


def _call_panel(call: ToolCall | None, result: ToolResult | None, key: str, parent: str | None, running: bool) -> dict:
    """Pending (calling / running / waiting for the user), then done with result and time."""
    if call is None:
        metadata = {"title": "🛠️ Calling a tool…", "status": "pending"}
        body = ""
    else:
        arguments = call.arguments if call.arguments is not None else call.raw
        metadata = {"title": f"🛠️ {call.name}", "log": _short(arguments)}
        body = f"**Arguments**\n```json\n{_json(arguments)}\n```"
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
            body += f"\n\n**{label}**\n```json\n{_json(result.response)}\n```"
    metadata["id"] = f"call-{key}"
    if parent:
        metadata["parent_id"] = parent
    return {"role": "assistant", "content": body, "metadata": metadata}


def _notice_message(text: str) -> dict:
    return {"role": "assistant", "content": f"⚠️ {text}"}


def _json(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _short(value, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
