"""Parse the model's output into thinking, answer text and tool calls, while it streams.

Built on transformers' response parser (`tokenizer.get_response_parser`), driven by a
`response_template`. The loaded model's own template is used when its tokenizer has one;
Hub configs of some Gemma 4 revisions carry only the older `response_schema`, which
transformers drops on load, so `GEMMA4_RESPONSE_TEMPLATE` is the fallback (and what the
bundled tokenizer ships).
"""

from __future__ import annotations

import re
from typing import Any

from .events import Done, ReplyStats, TextDelta, ThinkingDelta, ToolCall, ToolCallStarted

# Gemma 4 output, in order: an optional thought, optional calls, optional text, a stop token.
GEMMA4_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    # The model's part starts after the generation prompt, or after a tool response when the
    # model turn stays open for the answer.
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
    "fields": {
        "reasoning_content": {
            # "thought" and its newline are written by the model (or by the generation prompt
            # after a tool response); tolerate a missing newline rather than leak the marker.
            "open_pattern": r"<\|channel>(?:thought\n?)?",
            "close": "<channel|>",
            "content": "text",
        },
        "tool_calls": {
            # Function names may hold dots and dashes (OpenAI allows [A-Za-z0-9_-]).
            "open_pattern": r"<\|tool_call>call:(?P<name>[\w.\-]+)",
            "close": "<tool_call|>",
            "repeats": True,
            "content": "json",
            "content_args": {
                "unquoted_keys": True,
                "string_delims": [['<|"|>', '<|"|>']],
                # Malformed arguments come back as text, so the chat can report them to the
                # model instead of crashing the stream.
                "allow_non_json": True,
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {
            "close": ["<turn|>", "<|tool_response>", "<eos>"],
            "content": "text",
        },
    },
}

_REASONING, _CALLS, _CONTENT = "reasoning_content", "tool_calls", "content"
_INCOMPLETE_NAMES = {_REASONING: "thought", _CALLS: "tool call"}


def response_template_for(tokenizer) -> dict:
    """The tokenizer's own response template when it has one, else ours."""
    return getattr(tokenizer, "response_template", None) or GEMMA4_RESPONSE_TEMPLATE


def control_tokens_of(tokenizer) -> list[str]:
    """Every special token string the tokenizer knows (longest first, for stripping)."""
    tokens = set(tokenizer.all_special_tokens)
    tokens.update(t.content for t in tokenizer.added_tokens_decoder.values() if t.special)
    return sorted((t for t in tokens if t), key=len, reverse=True)


class ReplyParser:
    """Incremental parser for one generation round: `feed` raw decoded text (special tokens
    kept), get typed events; `finish` returns the whole reply as a `Done`.

    Answer and thinking deltas never carry a control token: any marker the template does not
    consume (a stray `<|"|>`, say) is dropped from what the user sees but kept in `raw`.
    """

    def __init__(self, tokenizer, prompt: str, template: dict | None = None, control_tokens: list[str] | None = None):
        self._template = template or response_template_for(tokenizer)
        self._parser = tokenizer.get_response_parser(self._template, prefix=prompt)
        tokens = control_tokens if control_tokens is not None else control_tokens_of(tokenizer)
        self._strip_re = re.compile("|".join(map(re.escape, tokens))) if tokens else None
        self.raw = ""
        self._open: str | None = None
        self._broken: str | None = None  # set when the parser gave up; text then streams as-is
        self._calls: list[ToolCall] = []
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._pending: list = self._translate(self._parser.initial_events)

    def feed(self, text: str) -> list:
        self.raw += text
        events, self._pending = self._pending, []
        if self._broken:
            return events + self._text_event(text)
        try:
            return events + self._translate(self._parser.feed(text))
        except ValueError as err:  # the parser cannot continue (e.g. reserved bytes in a string)
            self._broken = str(err)
            return events + self._text_event(text)

    def finish(self, stats: ReplyStats | None = None) -> tuple[list, Done]:
        """Close the stream. Output cut off inside a thought or a call is reported as
        `incomplete`; a half-written call is never returned as a call."""
        events: list = []
        incomplete = _INCOMPLETE_NAMES.get(self._open) if not self._broken else "parse"
        if incomplete == "tool call":
            self._open = None  # drop the half call: finalize would parse it as text
            message = {}
        elif not self._broken:
            try:
                message, final_events = self._parser.finalize()
                events = self._translate(final_events)
            except ValueError as err:
                self._broken = str(err)
                incomplete, message = "parse", {}
        else:
            message = {}
        done = Done(
            stats=stats or ReplyStats(),
            raw=self.raw,
            reasoning=self._clean(message.get(_REASONING) or "".join(self._reasoning)).strip(),
            content=self._clean(message.get(_CONTENT) or "".join(self._content)).strip(),
            tool_calls=list(self._calls),
            incomplete=incomplete,
        )
        return events, done

    # -- internals -------------------------------------------------------------------------

    def _clean(self, text: str) -> str:
        return self._strip_re.sub("", text) if self._strip_re else text

    def _text_event(self, text: str) -> list:
        text = self._clean(text)
        self._content.append(text)
        return [TextDelta(text)] if text else []

    def _translate(self, parser_events: list[dict]) -> list:
        out: list = []
        for event in parser_events:
            kind, name = event["type"], event["field"]
            if kind == "region_open":
                self._open = name
                if name == _CALLS:
                    out.append(ToolCallStarted())
            elif kind == "region_close":
                self._open = None
                if name == _CALLS:
                    out.append(self._tool_call(event["value"]))
            elif kind == "region_chunk" and name in (_REASONING, _CONTENT):
                text = self._clean(event["text"])
                if not text:
                    continue
                if name == _REASONING:
                    self._reasoning.append(text)
                    out.append(ThinkingDelta(text))
                else:
                    self._content.append(text)
                    out.append(TextDelta(text))
        return out

    def _tool_call(self, value: Any) -> ToolCall:
        function = value.get("function", {}) if isinstance(value, dict) else {}
        name, arguments = str(function.get("name", "")), function.get("arguments")
        call_id = f"call_{len(self._calls)}"
        if isinstance(arguments, dict):
            call = ToolCall(name=name, arguments=arguments, raw=_render_raw(name, arguments), id=call_id)
        else:
            call = ToolCall(
                name=name,
                arguments=None,
                raw=str(arguments),
                error="the arguments are not a valid Gemma 4 argument object",
                id=call_id,
            )
        self._calls.append(call)
        return call


def _render_raw(name: str, arguments: dict) -> str:
    import json

    return f"{name}({json.dumps(arguments, ensure_ascii=False)})"


def parse_reply(tokenizer, output: str, prompt: str) -> Done:
    """Parse a complete output in one go (same rules as streaming)."""
    parser = ReplyParser(tokenizer, prompt)
    parser.feed(output)
    return parser.finish()[1]
