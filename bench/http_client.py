"""A minimal client of the app's documented HTTP API (`POST /gradio_api/call/chat`, then the
event stream), timestamping every streamed update as it arrives.

Used where the exact arrival time matters (time to first token): gradio_client polls its
message queue every 50 ms, which would add up to 50 ms of the client's own latency to every
figure. Updates carry the chat's two parts (Gradio's simple format), as gradio_client gives
them; an update's chat is what they hold (while a turn streams, the live part only).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from gemma4_ui.core.options import USER_OPTIONS
from tests.conftest import chat_messages

# One value per chat option, in the order /chat takes them (core.options.USER_OPTIONS). The
# repetition guard is off: every side generates the same number of tokens, loops included.
CHAT_DEFAULTS = dict(system_prompt="", thinking=False, max_new_tokens=64, temperature=0.0, top_p=0.95, top_k=64,
                     image_budget=280, enabled_tools=[], max_tool_rounds=5, repetition_guard=0, seed=-1)


@dataclass
class StreamedReply:
    requested: float  # perf_counter when the request (upload included) started
    updates: list[tuple[float, list]] = field(default_factory=list)  # (arrival, chat)

    def first_visible(self) -> float:
        """When the first update showing any of the reply arrived."""
        return next(at for at, chat in self.updates if reply_text(chat))

    @property
    def last(self) -> float:
        return self.updates[-1][0]

    @property
    def final_chat(self) -> list:
        return self.updates[-1][1]


def reply_text(chat: list) -> str:
    """The assistant's text in a chat as the client receives it (after the last user message)."""
    last_user = max((i for i, m in enumerate(chat) if m["role"] == "user"), default=-1)
    parts = []
    for message in chat[last_user + 1:]:
        for part in message["content"] if isinstance(message["content"], list) else [message["content"]]:
            text = part.get("text", "") if isinstance(part, dict) else str(part)
            parts.append(text)
    return "".join(parts).strip()


class ChatClient:
    def __init__(self, url: str):
        self.url = url.rstrip("/") + "/gradio_api"
        self._http = httpx.Client(timeout=600)

    def close(self) -> None:
        self._http.close()

    def upload(self, path: Path) -> dict:
        with path.open("rb") as file:
            response = self._http.post(f"{self.url}/upload", files={"files": (path.name, file)})
        response.raise_for_status()
        return {"path": response.json()[0], "meta": {"_type": "gradio.FileData"}, "orig_name": path.name}

    def chat(self, text: str, files: tuple[Path, ...] = (), session_hash: str | None = None,
             **settings) -> StreamedReply:
        """Send one message and collect the streamed chat: in a new session, or in the
        session `session_hash` (another client's, say), whose conversation it continues."""
        options = {**CHAT_DEFAULTS, **settings}
        reply = StreamedReply(requested=time.perf_counter())
        message = {"text": text, "files": [self.upload(p) for p in files]}
        data = [message, *(options[name] for name in USER_OPTIONS)]
        body = {"data": data, **({"session_hash": session_hash} if session_hash else {})}
        response = self._http.post(f"{self.url}/call/chat", json=body)
        response.raise_for_status()
        event_id = response.json()["event_id"]
        with self._http.stream("GET", f"{self.url}/call/chat/{event_id}") as stream:
            event = None
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event in ("generating", "complete"):
                    payload = json.loads(line.removeprefix("data:"))
                    if payload:  # the chat's history (not sent while a turn streams), its live part
                        reply.updates.append((time.perf_counter(), chat_messages(payload[:2])))
                elif line.startswith("data:") and event == "error":
                    raise RuntimeError(f"the app answered with an error: {line}")
        return reply
