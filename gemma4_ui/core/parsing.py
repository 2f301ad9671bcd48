"""Parse the model's output into thinking, answer text and tool calls, while it streams.

Built on transformers' response parser (`tokenizer.get_response_parser`), driven by a
`response_template`. The loaded model's own template is used when its tokenizer has one;
Hub configs of some Gemma 4 revisions carry only the older `response_schema`, which
transformers drops on load, so `GEMMA4_RESPONSE_TEMPLATE` is the fallback (and what the
bundled tokenizer ships).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from gemma4_ui.core.events import Done, ReplyStats, TextDelta, ThinkingDelta, ToolCall, ToolCallStarted

# Gemma 4 output, in order: an optional thought, optional calls, optional text, a stop token.
GEMMA4_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    # The model's part starts after the generation prompt, or after a tool response when the
    # model turn stays open for the answer.
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
    "fields": {
        "reasoning_content": {
            # "thought" and its newline are written by the model (or by the generation prompt
            # after a tool response); a missing newline or name is tolerated rather than leak the
            # marker. While streaming, the name arrives in pieces and the `regex` module prefers a
            # shorter complete match over a partial one, so `(?:thought\n?)?` would commit a bare
            # "<|channel>" and put "thought" into the reasoning. The alternatives below only match
            # once the text after "<|channel>" is known to be the name, or not to be it, or ends.
            "open_pattern": (
                r"<\|channel>(?:thought\n?|(?:t|th|tho|thou|thoug|though)?\Z"
                r"|(?=[^t]|t[^h]|th[^o]|tho[^u]|thou[^g]|thoug[^h]|though[^t]))"
            ),
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
WORD_JOINER = "\u2060"  # invisible; stands between text that would otherwise join into a marker


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
    consume (a stray `<|"|>`, say) is dropped from what the user sees but kept in `raw`. A
    marker split across two `feed` calls is held back until it is complete, so how the text is
    chunked never changes what comes out.
    """

    def __init__(self, tokenizer, prompt: str, template: dict | None = None, control_tokens: list[str] | None = None):
        self._template = template or response_template_for(tokenizer)
        self._parser = tokenizer.get_response_parser(self._template, prefix=_shield(prompt))
        tokens = control_tokens if control_tokens is not None else control_tokens_of(tokenizer)
        self._tokens = [t for t in tokens if t]
        self._longest = max(map(len, self._tokens), default=0)
        self._prefixes = _proper_prefixes(tuple(self._tokens))
        self._strip_re = re.compile("|".join(map(re.escape, self._tokens))) if self._tokens else None
        self.raw = ""
        self._open: str | None = None
        self._broken: str | None = None  # set when the parser gave up; text then streams as-is
        self._calls: list[ToolCall] = []
        self._text: dict[str, list[str]] = {_REASONING: [], _CONTENT: []}
        self._held: dict[str, str] = {_REASONING: "", _CONTENT: ""}  # a marker cut by a chunk edge
        self._tail: dict[str, str] = {_REASONING: "", _CONTENT: ""}  # the end of what each field holds
        self._pending: list = self._translate(self._parser.initial_events)

    def feed(self, text: str) -> list:
        self.raw += text
        events, self._pending = self._pending, []
        if self._broken:
            return events + self._text_event(_CONTENT, text)
        try:
            return events + self._translate(self._parser.feed(_shield(text)))
        except ValueError as err:  # the parser cannot continue (a foreign template, say)
            self._broken = str(err)
            return events + self._text_event(_CONTENT, text)

    def finish(self, stats: ReplyStats | None = None) -> tuple[list, Done]:
        """Close the stream. Output cut off inside a thought or a call is reported as
        `incomplete`; a half-written call is never returned as a call."""
        events, self._pending = self._pending, []
        incomplete = "parse" if self._broken else _INCOMPLETE_NAMES.get(self._open)
        # A half call is not finalized: that would parse it as a malformed call.
        if incomplete in (None, "thought"):
            try:
                final = self._parser.finalize()[1]
            except ValueError as err:
                self._broken, incomplete, final = str(err), "parse", []
            # A delimiter still waiting at the very end (`<|channel>thought\n` with nothing after
            # it) only opens its region now, and the end of the stream closes it: cut off too.
            cut = next((i for i, e in enumerate(final) if e["type"] == "region_open" and e["field"] in _INCOMPLETE_NAMES), None)
            if cut is not None:
                incomplete = _INCOMPLETE_NAMES[final[cut]["field"]]
                if final[cut]["field"] == _CALLS:
                    final = final[:cut]
            events += self._translate(final)
        events += self._flush(_REASONING) + self._flush(_CONTENT)
        done = Done(
            stats=stats or ReplyStats(),
            raw=self.raw,
            reasoning="".join(self._text[_REASONING]).strip(),
            content="".join(self._text[_CONTENT]).strip(),
            tool_calls=list(self._calls),
            incomplete=incomplete,
        )
        return events, done

    # -- internals -------------------------------------------------------------------------

    def _text_event(self, field: str, text: str) -> list:
        """Emit `text` into `field`, holding back a trailing piece that may be the start of a
        marker; the rest is cleaned of markers and kept for `Done`."""
        text = self._held[field] + text
        cut = self._marker_start(text)
        self._held[field] = text[cut:]
        return self._emit(field, text[:cut])

    def _flush(self, field: str) -> list:
        text, self._held[field] = self._held[field], ""
        return self._emit(field, text)

    def _emit(self, field: str, text: str) -> list:
        text = self._without_markers(field, text)
        if not text:
            return []
        self._text[field].append(text)
        self._tail[field] = (self._tail[field] + text)[-self._longest:]
        return [ThinkingDelta(text) if field == _REASONING else TextDelta(text)]

    def _without_markers(self, field: str, text: str) -> str:
        """`text` with its markers dropped, to follow what the field already holds. Where the
        two sides of a dropped marker ("<ima" before a stray "<tool_response|>ge|>"), or the
        field's text and `text` (the same words on both sides of a thought), would join into
        a marker, a word joiner stands between them: the text shown, and sent back in the
        next prompt, never holds a control token."""
        if self._strip_re is None:
            return text
        kept, last = [], 0
        before = self._tail[field]
        for marker in self._strip_re.finditer(text):
            kept.append(text[last:marker.start()])
            tail = (before + "".join(kept))[-self._longest:]
            kept.append(WORD_JOINER if self._marker_start(tail) < len(tail) else "")
            last = marker.end()
        kept.append(text[last:])
        text = "".join(kept)
        if before and self._strip_re.search(before + text[:self._longest]):
            text = WORD_JOINER + text
        return text

    def _marker_start(self, text: str) -> int:
        """Where a trailing, not yet complete control token starts in `text` (else its end).
        Runs at every streamed token: one set lookup per candidate start."""
        for start in range(max(0, len(text) - self._longest + 1), len(text)):
            if text[start:] in self._prefixes:
                return start
        return len(text)

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
                elif name in self._held:
                    out += self._flush(name)
            elif kind == "region_chunk" and name in self._held:
                out += self._text_event(name, event["text"])
        return out

    def _tool_call(self, value: Any) -> ToolCall:
        function = value.get("function", {}) if isinstance(value, dict) else {}
        name, arguments = str(function.get("name", "")), function.get("arguments")
        if isinstance(arguments, str) and (read := _read_arguments(arguments)) is not None:
            arguments = read
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


@functools.lru_cache(maxsize=8)
def _proper_prefixes(tokens: tuple[str, ...]) -> frozenset[str]:
    """Every proper prefix of a control token: a text ending in one may end in half a marker.
    Cached: a real checkpoint's tokenizer has hundreds of special tokens, and every round of
    every reply makes a parser."""
    return frozenset(t[:i] for t in tokens for i in range(1, len(t)))


def _shield(text: str) -> str:
    """transformers' lax-JSON reader refuses any text holding \\x01 or \\x02 (its own string
    placeholders) and the stream could not go on; the parser sees U+FFFD in their place
    (`raw` keeps the original)."""
    return text.replace("\x01", "\ufffd").replace("\x02", "\ufffd")


_QUOTE = '<|"|>'
_BARE_KEY = re.compile(r"[^:{}\[\],]+")
_LITERAL = re.compile(r"true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _read_arguments(text: str) -> dict | None:
    """Gemma argument notation read directly, for what transformers' lax-JSON reader cannot
    take: its bare keys must be plain words, while the template writes any key bare (a
    `first-name` property, say). Strict otherwise; None unless `text` is exactly one object."""
    try:
        value, end = _read_value(text, 0)
    except (ValueError, IndexError, RecursionError):  # RecursionError: nested too deeply to be arguments
        return None
    return value if isinstance(value, dict) and end == len(text) else None


def _read_value(text: str, i: int) -> tuple[Any, int]:
    if text.startswith(_QUOTE, i):
        end = text.index(_QUOTE, i + len(_QUOTE))
        return text[i + len(_QUOTE) : end], end + len(_QUOTE)
    if text[i] in "{[":
        close, items, i = "}" if text[i] == "{" else "]", [], i + 1
        while text[i] != close:
            if items:
                if text[i] != ",":
                    raise ValueError(f"expected ',' at {i}")
                i += 1
            if close == "}":
                if text.startswith(_QUOTE, i):
                    key, i = _read_value(text, i)
                else:
                    match = _BARE_KEY.match(text, i)
                    if not match:
                        raise ValueError(f"expected a key at {i}")
                    key, i = match.group(), match.end()
                if text[i] != ":":
                    raise ValueError(f"expected ':' at {i}")
                value, i = _read_value(text, i + 1)
                items.append((key, value))
            else:
                value, i = _read_value(text, i)
                items.append(value)
        return (dict(items) if close == "}" else items), i + 1
    match = _LITERAL.match(text, i)
    if not match:
        raise ValueError(f"unexpected value at {i}")
    return json.loads(match.group()), match.end()


def _render_raw(name: str, arguments: dict) -> str:
    return f"{name}({json.dumps(arguments, ensure_ascii=False)})"

