"""Conversations as JSON files: export with media embedded, import with validation.

The file carries the canonical turns (so calls, results, thoughts with their durations and
reply stats survive a round trip), the settings and the tools the user declared, and, for
reading, the Gemma 4 message dicts they render to. Export, import, export gives the same
file, byte for byte.

Version 2 adds the conversation's other versions (core/branches.py): "turns" is still the
conversation shown (the active path), and "branches" lists every node of the tree depth first,
each with its parent's place in that list and the child it goes on with; a node of the active
path names its turn by its index in "turns", any other carries its turn. A version 1 file is a
conversation without alternatives.
"""

from __future__ import annotations

import base64
import json
import math
import mimetypes
import shutil
import tempfile
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gemma4_ui.config import MediaLimits
from gemma4_ui.core.branches import Branches, Node
from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn, to_gemma_messages
from gemma4_ui.core.events import ReplyStats, ToolCall, ToolResult
from gemma4_ui.core.options import USER_OPTIONS, ChatOptions
from gemma4_ui.media.decoding import MediaError, check_conversation_media
from gemma4_ui.media.files import load_bytes

FORMAT = "gemma4_ui.conversation"
VERSION = 2
VERSIONS = (1, 2)  # the versions this app loads


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
        "stats": _stats_entry(r.stats),
        "thinking_seconds": r.thinking_seconds,
    }


def _stats_entry(stats: ReplyStats | None) -> dict | None:
    return asdict(stats) if stats else None


def _turn_entry(turn) -> dict:
    if isinstance(turn, UserTurn):
        return {"role": "user", "text": turn.text, "media": [_media_entry(m) for m in turn.media]}
    return {
        "role": "assistant",
        "rounds": [_round_entry(r) for r in turn.rounds],
        "reasoning": turn.reasoning,
        "content": turn.content,
        "raw": turn.raw,
        "notice": turn.notice,
        "stats": _stats_entry(turn.stats),
        "thinking_seconds": turn.thinking_seconds,
    }


def _branches_entry(branches: Branches) -> dict:
    """The tree, flat (a long chat must not nest as deep as it is long): depth first."""
    path = {id(node): index for index, node in enumerate(branches.path())}
    nodes = branches.nodes()
    place = {id(node): index for index, (_, node) in enumerate(nodes)}
    entries = []
    for parent, node in nodes:
        entries.append({"parent": None if parent is None else place[id(parent)], "chosen": node.chosen,
                        "turn": path[id(node)] if id(node) in path else _turn_entry(node.turn)})
    return {"chosen": branches.root.chosen, "nodes": entries}


def dumps(conversation: Conversation, options: ChatOptions, declared: list[dict] = (),
          branches: Branches | None = None) -> str:
    """The conversation as a JSON document: `options` are the settings it was made with,
    `declared` the schemas of the tools the user declared, `branches` its tree of versions,
    whose active path is `conversation` (None: a conversation without alternatives)."""
    if branches is None or not branches.holds(conversation):
        branches = Branches.linear(conversation)
    messages = to_gemma_messages(conversation, options.system_prompt)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "settings": {name: getattr(options, name) for name in USER_OPTIONS},
        "declared_tools": list(declared),
        "turns": [_turn_entry(turn) for turn in conversation.turns],
        "branches": _branches_entry(branches),
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


class ExportFolder:
    """Where one session's exports are written: one folder, made at the first export, whose
    files each export overwrites (Gradio serves its own copy of them), and which is deleted
    when the session is (Gradio lets it go when the visitor leaves or it expires). So a
    visitor who exports many times leaves one export on disk, and none once gone."""

    def __init__(self) -> None:
        self._path: Path | None = None

    def path(self) -> Path:
        if self._path is None or not self._path.is_dir():
            self._path = Path(tempfile.mkdtemp(prefix="gemma4_export_"))
            weakref.finalize(self, shutil.rmtree, str(self._path), ignore_errors=True)
        return self._path


# -- import -----------------------------------------------------------------------------------

def _require(condition: bool, message: str) -> None:
    if not condition:
        raise TranscriptError(message)


def _string(entry: dict, key: str, where: str) -> str:
    value = entry.get(key, "")
    _require(isinstance(value, str), f"{where}.{key} must be a string")
    return value


def _load_media(entry: Any, where: str, limits: MediaLimits):
    _require(isinstance(entry, dict), f"{where} must be an object")
    name = entry.get("name") or "file"
    _require(isinstance(name, str), f"{where}.name must be a string")
    data = entry.get("data")
    _require(isinstance(data, str) and data.startswith("data:") and ";base64," in data,
             f"{where}.data must be a base64 data URL")
    encoded = data.split(";base64,", 1)[1]
    _require(len(encoded) * 3 / 4 <= limits.max_file_mb * 1024 * 1024, f"{where} ({name}) is over the file size limit")
    try:
        payload = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise TranscriptError(f"{where}.data is not valid base64") from None
    try:
        return load_bytes(payload, name, limits)
    except MediaError as err:
        raise TranscriptError(f"{where}: {err}") from None


def _seconds(entry: dict, key: str, where: str) -> float | None:
    value = entry.get(key)
    _require(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                               and math.isfinite(value) and value >= 0),
             f"{where}.{key} must be a number of seconds or null")
    return None if value is None else float(value)


def _load_stats(entry: Any, where: str) -> ReplyStats | None:
    if entry is None:
        return None
    _require(isinstance(entry, dict), f"{where}.stats must be an object or null")
    if "duration_s" in entry and "duration" not in entry:  # files written before stats were kept whole
        entry = {"prompt_tokens": entry.get("prompt_tokens"), "generated_tokens": entry.get("generated_tokens"),
                 "time_to_first_token": entry.get("time_to_first_token_s"), "duration": entry.get("duration_s"),
                 "stop_reason": entry.get("stop_reason")}
    counts = {}
    for key in ("prompt_tokens", "generated_tokens"):
        value = entry.get(key) or 0
        _require(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                 f"{where}.stats.{key} must be a whole number")
        counts[key] = value
    for key in ("drafted_tokens", "accepted_tokens"):  # None: the reply was not drafted
        value = entry.get(key)
        _require(value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0),
                 f"{where}.stats.{key} must be a whole number or null")
        counts[key] = value
    stop_reason = entry.get("stop_reason") or ""
    _require(isinstance(stop_reason, str), f"{where}.stats.stop_reason must be a string")
    return ReplyStats(counts["prompt_tokens"], counts["generated_tokens"],
                      _seconds(entry, "time_to_first_token", f"{where}.stats"),
                      _seconds(entry, "duration", f"{where}.stats") or 0.0, stop_reason,
                      counts["drafted_tokens"], counts["accepted_tokens"])


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
        _require(c.get("error") is None or isinstance(c.get("error"), str),
                 f"{where}.calls[{i}].error must be a string or null")
        calls.append(ToolCall(c["name"], arguments, str(c.get("raw") or ""), c.get("error"), str(c.get("id") or f"call_{i}")))
    results = []
    for i, r in enumerate(results_raw):
        _require(isinstance(r, dict) and isinstance(r.get("name"), str), f"{where}.results[{i}] needs a name")
        status = r.get("status", "ok")
        _require(status in ("ok", "error", "timeout", "client", "cancelled"), f"{where}.results[{i}].status is unknown")
        _require(r.get("error") is None or isinstance(r.get("error"), str),
                 f"{where}.results[{i}].error must be a string or null")
        results.append(ToolResult(r["name"], str(r.get("call_id") or ""), status, r.get("response"),
                                  _seconds(r, "duration", f"{where}.results[{i}]") or 0.0, r.get("error")))
    _require(len(results) <= len(calls), f"{where} has more results than calls")
    return ToolRound(calls=calls, results=results, reasoning=_string(entry, "reasoning", where),
                     content=_string(entry, "content", where), raw=_string(entry, "raw", where),
                     stats=_load_stats(entry.get("stats"), where),
                     thinking_seconds=_seconds(entry, "thinking_seconds", where))


def _check_media_counts(turns_raw: list, limits: MediaLimits) -> None:
    """The limits on files a composer message and a conversation take, before any is decoded."""
    total = 0
    for i, entry in enumerate(turns_raw):
        media_raw = entry.get("media", []) if isinstance(entry, dict) and entry.get("role") == "user" else []
        count = len(media_raw) if isinstance(media_raw, list) else 0
        _require(count <= limits.max_files_per_message,
                 f"turns[{i}] has {count} files; a message holds at most {limits.max_files_per_message}")
        total += count
    _require(total <= limits.max_files_per_conversation,
             f"the conversation has {total} files; a conversation holds at most {limits.max_files_per_conversation}")


@dataclass
class Loaded:
    conversation: Conversation
    settings: dict = field(default_factory=dict)  # chat options by name, as saved
    declared: list[dict] = field(default_factory=list)  # schemas of the tools the user declared
    branches: Branches | None = None  # the tree of versions; its active path is `conversation`

    def __post_init__(self):
        if self.branches is None:
            self.branches = Branches.linear(self.conversation)


class _TurnLoader:
    """Turns from their entries, the media of every version held to the conversation's limits."""

    def __init__(self, limits: MediaLimits):
        self.limits = limits
        self.media: list = []  # of every turn loaded so far, alternatives included

    def __call__(self, entry: Any, where: str, previous) -> UserTurn | AssistantTurn:
        _require(isinstance(entry, dict), f"{where} must be an object")
        role = entry.get("role")
        if role == "user":
            media_raw = entry.get("media", [])
            _require(isinstance(media_raw, list), f"{where}.media must be a list")
            media = []
            for j, m in enumerate(media_raw):
                media.append(_load_media(m, f"{where}.media[{j}]", self.limits))
                try:  # as each is decoded: a file over the limit stops the load at once
                    check_conversation_media(self.media, media, self.limits)
                except MediaError as err:
                    raise TranscriptError(f"{where}.media[{j}]: {err}") from None
            self.media.extend(media)
            return UserTurn(_string(entry, "text", where), media)
        if role == "assistant":
            _require(isinstance(previous, UserTurn), f"{where}: an assistant turn must follow a user turn")
            rounds_raw = entry.get("rounds", [])
            _require(isinstance(rounds_raw, list), f"{where}.rounds must be a list")
            return AssistantTurn(
                rounds=[_load_round(r, f"{where}.rounds[{j}]") for j, r in enumerate(rounds_raw)],
                reasoning=_string(entry, "reasoning", where),
                content=_string(entry, "content", where),
                raw=_string(entry, "raw", where),
                notice=_string(entry, "notice", where),
                stats=_load_stats(entry.get("stats"), where),
                thinking_seconds=_seconds(entry, "thinking_seconds", where),
            )
        raise TranscriptError(f"{where}.role must be \"user\" or \"assistant\"")


def _index(value: Any, limit: int, where: str, nullable: bool = True) -> int | None:
    _require((value is None and nullable) or (isinstance(value, int) and not isinstance(value, bool)
                                              and 0 <= value < limit), f"{where} is out of range")
    return value


def _load_branches(raw: Any, conversation: Conversation, load_turn: _TurnLoader) -> Branches:
    """The tree of versions (see the module's docstring), checked to have `conversation` as its
    active path."""
    _require(isinstance(raw, dict) and isinstance(raw.get("nodes"), list), "branches.nodes must be a list")
    root = Node(None)
    nodes: list[Node] = []
    used: set[int] = set()
    for i, entry in enumerate(raw["nodes"]):
        where = f"branches.nodes[{i}]"
        _require(isinstance(entry, dict), f"{where} must be an object")
        parent_at = _index(entry.get("parent"), i, f"{where}.parent")  # parents come first
        parent = root if parent_at is None else nodes[parent_at]
        turn = entry.get("turn")
        if isinstance(turn, int) and not isinstance(turn, bool):
            _index(turn, len(conversation.turns), f"{where}.turn", nullable=False)
            _require(turn not in used, f"{where}.turn: turns[{turn}] is in the tree twice")
            used.add(turn)
            turn = conversation.turns[turn]
        else:
            turn = load_turn(turn, f"{where}.turn", parent.turn)
            _require(not isinstance(turn, AssistantTurn) or isinstance(parent.turn, UserTurn),
                     f"{where}: an assistant turn must follow a user turn")
        node = Node(turn, chosen=entry.get("chosen"))
        parent.children.append(node)
        nodes.append(node)
    for i, node in enumerate([root, *nodes]):
        _index(node.chosen, len(node.children), "branches.chosen" if i == 0 else f"branches.nodes[{i - 1}].chosen")
    root.chosen = _index(raw.get("chosen"), len(root.children), "branches.chosen")
    branches = Branches(root)
    _require(branches.holds(conversation), "branches: the chosen versions are not the turns")
    return branches


def load(text: str, limits: MediaLimits) -> Loaded:
    """Parse and validate a saved conversation, with its settings, declared tools and versions."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise TranscriptError(f"not JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise TranscriptError("the JSON is nested too deeply to be a conversation") from None
    _require(isinstance(document, dict) and document.get("format") == FORMAT,
             f"not a Gemma 4 UI conversation (expected \"format\": \"{FORMAT}\")")
    version = document.get("version")
    _require(version in VERSIONS and not isinstance(version, bool), f"unsupported version {version!r}")
    turns_raw = document.get("turns")
    _require(isinstance(turns_raw, list), "turns must be a list")
    branches_raw = document.get("branches") if version >= 2 else None
    nodes_raw = branches_raw.get("nodes") if isinstance(branches_raw, dict) else None
    alternatives = [n["turn"] for n in nodes_raw if isinstance(n, dict) and isinstance(n.get("turn"), dict)
                    ] if isinstance(nodes_raw, list) else []
    _check_media_counts(turns_raw + alternatives, limits)
    conversation = Conversation()
    load_turn = _TurnLoader(limits)
    for i, entry in enumerate(turns_raw):
        previous = conversation.turns[-1] if conversation.turns else None
        conversation.turns.append(load_turn(entry, f"turns[{i}]", previous))
    saved = document.get("settings") if isinstance(document.get("settings"), dict) else {}
    settings = {name: saved[name] for name in USER_OPTIONS if name in saved}
    _require(isinstance(settings.get("system_prompt", ""), str), "settings.system_prompt must be a string")
    _require(isinstance(settings.get("enabled_tools", []), list)
             and all(isinstance(n, str) for n in settings.get("enabled_tools", [])),
             "settings.enabled_tools must be a list of names")
    declared = document.get("declared_tools", [])
    _require(isinstance(declared, list) and all(isinstance(d, dict) for d in declared),
             "declared_tools must be a list of schemas")
    branches = _load_branches(branches_raw, conversation, load_turn) if branches_raw is not None else None
    return Loaded(conversation, settings, declared, branches)


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
