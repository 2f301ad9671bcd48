"""Conversations as JSON files: export with media embedded, import with validation.

The file carries the canonical turns (so calls, results and thoughts survive a round trip)
and, for reading, the Gemma 4 message dicts they render to.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import re
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .chat import ChatOptions
from .conversation import AssistantTurn, Conversation, ToolRound, UserTurn, to_gemma_messages
from .events import ReplyStats, ToolCall
from .media import MediaError, MediaLimits, load_media
from .tools import ToolResult

FORMAT = "gemma4_ui.conversation"
VERSION = 1


class TranscriptError(ValueError):
    """The file is not a conversation we can load; the message says what is wrong."""


# -- export -----------------------------------------------------------------------------------

def _media_entry(item) -> dict:
    data = Path(item.path).read_bytes()
    mime = mimetypes.guess_type(item.name)[0] or "application/octet-stream"
    return {"name": item.name, "kind": item.kind, "data": f"data:{mime};base64,{base64.b64encode(data).decode()}"}


def _round_entry(r: ToolRound) -> dict:
    return {
        "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments, "raw": c.raw, "error": c.error} for c in r.calls],
        "results": [asdict(res) for res in r.results],
        "reasoning": r.reasoning,
        "content": r.content,
        "raw": r.raw,
        "stats": r.stats.as_dict() if r.stats else None,
    }


def dumps(conversation: Conversation, options: ChatOptions) -> str:
    turns: list[dict] = []
    for turn in conversation.turns:
        if isinstance(turn, UserTurn):
            turns.append({"role": "user", "text": turn.text, "media": [_media_entry(m) for m in turn.media]})
        else:
            turns.append({
                "role": "assistant",
                "rounds": [_round_entry(r) for r in turn.rounds],
                "reasoning": turn.reasoning,
                "content": turn.content,
                "raw": turn.raw,
                "notice": turn.notice,
                "stats": turn.stats.as_dict() if turn.stats else None,
            })
    messages = to_gemma_messages(conversation, options.system_prompt)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "settings": {
            "system_prompt": options.system_prompt,
            "thinking": options.thinking,
            "enabled_tools": options.enabled_tools,
            "image_budget": options.image_budget,
        },
        "turns": turns,
        "messages": _describe_media(messages),
    }
    return json.dumps(document, ensure_ascii=False, indent=2, default=str)


def _describe_media(value: Any) -> Any:
    """Gemma message dicts for reading: decoded media replaced by their kind."""
    if isinstance(value, dict):
        kind = value.get("type")
        if kind in ("image", "audio", "video") and kind in value:
            return {"type": kind}
        return {k: _describe_media(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_describe_media(v) for v in value]
    return value


# -- import -----------------------------------------------------------------------------------

def _require(condition: bool, message: str) -> None:
    if not condition:
        raise TranscriptError(message)


def _string(entry: dict, key: str, where: str) -> str:
    value = entry.get(key, "")
    _require(isinstance(value, str), f"{where}.{key} must be a string")
    return value


def _load_media(entry: Any, where: str, folder: Path, limits: MediaLimits):
    _require(isinstance(entry, dict), f"{where} must be an object")
    name = re.sub(r"[^\w.\-]", "_", str(entry.get("name") or "file"))[:80] or "file"
    data = entry.get("data")
    _require(isinstance(data, str) and data.startswith("data:") and ";base64," in data,
             f"{where}.data must be a base64 data URL")
    encoded = data.split(";base64,", 1)[1]
    _require(len(encoded) * 3 / 4 <= limits.max_file_mb * 1024 * 1024, f"{where} ({name}) is over the file size limit")
    try:
        payload = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise TranscriptError(f"{where}.data is not valid base64") from None
    path = folder / name
    path.write_bytes(payload)
    try:
        return load_media(str(path), limits)
    except MediaError as err:
        raise TranscriptError(f"{where}: {err}") from None


def _load_round(entry: Any, where: str) -> ToolRound:
    _require(isinstance(entry, dict), f"{where} must be an object")
    calls_raw, results_raw = entry.get("calls", []), entry.get("results", [])
    _require(isinstance(calls_raw, list) and calls_raw, f"{where}.calls must be a non-empty list")
    _require(isinstance(results_raw, list), f"{where}.results must be a list")
    calls = []
    for i, c in enumerate(calls_raw):
        _require(isinstance(c, dict) and isinstance(c.get("name"), str), f"{where}.calls[{i}] needs a name")
        arguments = c.get("arguments")
        _require(arguments is None or isinstance(arguments, dict), f"{where}.calls[{i}].arguments must be an object")
        calls.append(ToolCall(c["name"], arguments, str(c.get("raw") or ""), c.get("error"), str(c.get("id") or f"call_{i}")))
    results = []
    for i, r in enumerate(results_raw):
        _require(isinstance(r, dict) and isinstance(r.get("name"), str), f"{where}.results[{i}] needs a name")
        status = r.get("status", "ok")
        _require(status in ("ok", "error", "timeout", "client", "cancelled"), f"{where}.results[{i}].status is unknown")
        results.append(ToolResult(r["name"], str(r.get("call_id") or ""), status, r.get("response"),
                                  float(r.get("duration") or 0.0), r.get("error")))
    _require(len(results) <= len(calls), f"{where} has more results than calls")
    return ToolRound(calls=calls, results=results, reasoning=_string(entry, "reasoning", where),
                     content=_string(entry, "content", where), raw=_string(entry, "raw", where))


def load(text: str, limits: MediaLimits) -> tuple[Conversation, dict]:
    """Parse and validate a saved conversation. Returns it and its saved settings."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise TranscriptError(f"not JSON ({err.msg} at line {err.lineno})") from None
    _require(isinstance(document, dict) and document.get("format") == FORMAT,
             f"not a Gemma 4 UI conversation (expected \"format\": \"{FORMAT}\")")
    _require(document.get("version") == VERSION, f"unsupported version {document.get('version')!r}")
    turns_raw = document.get("turns")
    _require(isinstance(turns_raw, list), "turns must be a list")
    folder = Path(tempfile.mkdtemp(prefix="gemma4_import_"))
    conversation = Conversation()
    for i, entry in enumerate(turns_raw):
        where = f"turns[{i}]"
        _require(isinstance(entry, dict), f"{where} must be an object")
        role = entry.get("role")
        if role == "user":
            media_raw = entry.get("media", [])
            _require(isinstance(media_raw, list), f"{where}.media must be a list")
            media = [_load_media(m, f"{where}.media[{j}]", folder, limits) for j, m in enumerate(media_raw)]
            conversation.turns.append(UserTurn(_string(entry, "text", where), media))
        elif role == "assistant":
            _require(i > 0 and isinstance(conversation.turns[-1], UserTurn),
                     f"{where}: an assistant turn must follow a user turn")
            rounds_raw = entry.get("rounds", [])
            _require(isinstance(rounds_raw, list), f"{where}.rounds must be a list")
            turn = AssistantTurn(
                rounds=[_load_round(r, f"{where}.rounds[{j}]") for j, r in enumerate(rounds_raw)],
                reasoning=_string(entry, "reasoning", where),
                content=_string(entry, "content", where),
                raw=_string(entry, "raw", where),
                notice=_string(entry, "notice", where),
            )
            conversation.turns.append(turn)
        else:
            raise TranscriptError(f"{where}.role must be \"user\" or \"assistant\"")
    settings = document.get("settings") if isinstance(document.get("settings"), dict) else {}
    return conversation, settings


# -- the last reply, for the inspector ------------------------------------------------------------

def last_reply(conversation: Conversation) -> tuple[dict | None, str, dict | None]:
    """(stats, raw output, parsed result) of the last assistant turn, rounds included."""
    turn = conversation.turns[-1] if conversation.turns else None
    if not isinstance(turn, AssistantTurn):
        return None, "", None
    stats: list[dict] = [r.stats.as_dict() for r in turn.rounds if r.stats]
    if turn.stats:
        stats.append(turn.stats.as_dict())
    raws = [r.raw for r in turn.rounds] + ([turn.raw] if turn.raw or not turn.rounds else [])
    raw = "\n".join(f"── generation {i + 1} ──\n{text}" for i, text in enumerate(raws)) if len(raws) > 1 else "".join(raws)
    parsed = {
        "rounds": [
            {"reasoning_content": r.reasoning or None, "content": r.content or None,
             "tool_calls": [{"name": c.name, "arguments": c.arguments if c.arguments is not None else c.raw}
                            for c in r.calls],
             "tool_responses": [{"name": res.name, "response": res.response} for res in r.results]}
            for r in turn.rounds
        ],
        "reasoning_content": turn.reasoning or None,
        "content": turn.content,
    }
    if not parsed["rounds"]:
        del parsed["rounds"]
    return {"generations": stats} if stats else None, raw, parsed


__all__ = ["TranscriptError", "dumps", "load", "last_reply", "ReplyStats"]
