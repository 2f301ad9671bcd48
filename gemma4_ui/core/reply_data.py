"""The last reply as plain data, for scripts (the `/reply` endpoint): what `/chat` shows as
bubbles and panels, as fields a program reads without parsing a display.

    {"text": the answer, "thought": the model's thinking ("" without),
     "tool_calls": [{"name", "arguments", "status", "result", "seconds"}, ...],
     "stats": {"prompt_tokens", "generated_tokens", "generations", ...} or None,
     "notices": ["Cut off at the max new tokens limit.", ...], "done": bool}

While the reply streams, `done` is false and the fields hold what has arrived so far.
"""

from __future__ import annotations

from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound
from gemma4_ui.core.events import ReplyStats, ToolCall, ToolResult
from gemma4_ui.core.streaming import Live

# A declared tool's result comes from the script: it says where to send it.
WAITING_NOTICE = "The model called {name}, a declared tool: send its result to /tool_result."


def reply_data(conversation: Conversation, live: Live | None = None, notice: str = "") -> dict | None:
    """The conversation's last reply as data; None while no reply has started. A `notice`
    alone is a reply that never started (a refused file, an engine failure): no fields but
    the notice, and the conversation is as it was."""
    if notice:
        return _data("", "", [], None, [notice], done=True)
    turn = conversation.turns[-1] if conversation.turns else None
    if not isinstance(turn, AssistantTurn):
        return None
    calls = [_call(call, result) for r in turn.rounds for call, result in _pairs(r)]
    texts = [r.content for r in turn.rounds]
    thoughts = [r.reasoning for r in turn.rounds]
    if live is not None:  # the round now streaming
        calls += [_call(call, None) for call in live.calls]
        texts.append(live.content.strip())
        thoughts.append(live.reasoning.strip())
    else:
        texts.append(turn.content)
        thoughts.append(turn.reasoning)
    notices = [turn.notice] if turn.notice else []
    notices += [WAITING_NOTICE.format(name=c["name"]) for c in calls if c["status"] == "waiting"]
    generations = [r.stats for r in turn.rounds if r.stats] + ([turn.stats] if turn.stats else [])
    return _data(_join(texts), _join(thoughts), calls, _stats(generations), notices, done=live is None)


def _data(text: str, thought: str, calls: list, stats: dict | None, notices: list, done: bool) -> dict:
    return {"text": text, "thought": thought, "tool_calls": calls, "stats": stats, "notices": notices,
            "done": done}


def _join(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)


def _pairs(round_: ToolRound):
    for c, call in enumerate(round_.calls):
        yield call, round_.results[c] if c < len(round_.results) else None


def _call(call: ToolCall, result: ToolResult | None) -> dict:
    """One call and its outcome: status "ok", "error", "timeout", "cancelled", "waiting" (for
    the script's answer) or "running"."""
    entry = {"name": call.name, "arguments": call.arguments if call.arguments is not None else call.raw}
    if result is None:
        return {**entry, "status": "running", "result": None, "seconds": None}
    status = "waiting" if result.status == "client" else result.status
    return {**entry, "status": status, "result": None if status == "waiting" else result.response,
            "seconds": round(result.duration, 3)}


def _stats(generations: list[ReplyStats]) -> dict | None:
    """The whole reply: tokens summed over its generations (one per tool round, then the
    answer); the prompt, speed and stop reason of the last one; the first one's latency."""
    if not generations:
        return None
    last = generations[-1].as_dict()
    return {
        "prompt_tokens": last["prompt_tokens"],
        "generated_tokens": sum(g.generated_tokens for g in generations),
        "time_to_first_token_s": generations[0].as_dict()["time_to_first_token_s"],
        "tokens_per_second": last["tokens_per_second"],
        "duration_s": round(sum(g.duration for g in generations), 3),
        "stop_reason": last["stop_reason"],
        "generations": len(generations),
    }
