"""Property-based tests (Hypothesis) of the code that reads untrusted input: the markdown
made safe and restored, the reply parser on any text split anywhere, the transcript loader
on any JSON, and tool arguments against the built-in and declared schemas. Each example has
a time limit (`deadline`): a visitor's input must not stall the server."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_hostile_input import _outside_fences

from gemma4_ui.config import MediaLimits
from gemma4_ui.core import transcript
from gemma4_ui.core.events import TextDelta, ThinkingDelta, ToolCall
from gemma4_ui.core.parsing import ReplyParser, control_tokens_of
from gemma4_ui.tools.registry import default_registry
from gemma4_ui.web.safe_markdown import safe_markdown, unescape_markdown

# Modest example counts, each example bounded in time: the file runs in well under a minute.
FAST = settings(max_examples=150, deadline=timedelta(milliseconds=500),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Text rich in what markdown, HTML and the Gemma 4 markers are made of.
MARKUP = list("<>&`~*_[]()!\\\n\t :/#|-=\"'{}.") + ["javascript:", "data:", "![", "```", "~~~", "<code>", "</code>",
                                                     "&lt;", "&amp;", "&#33;", "\u200b", "    ", "http://x.org"]
markup_text = st.lists(st.sampled_from(MARKUP) | st.text(max_size=4), max_size=400).map("".join)


# -- safe markdown ------------------------------------------------------------------------------

@FAST
@given(markup_text)
@example("[x](javascript:`alert(1)`)")  # a scheme just before a code span, in a link
@example("javascript:```<```")
@example("`javascript:`")
def test_no_markup_survives_safe_markdown(text):
    shown = safe_markdown(text)
    prose = _outside_fences(shown).replace("<code>", "").replace("</code>", "")
    assert "<" not in prose
    # What a code span holds is shown as it is, and is never a link ("`javascript:`").
    outside_code = re.sub(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", "", prose, flags=re.S)
    assert not re.search(r"(?i)(javascript|vbscript|livescript|data):\S", outside_code)


@FAST
@given(markup_text)
@example("```\n&amp; &lt;b&gt;\n```")  # fenced code is verbatim: its entities are the user's
@example("```&lt;```")  # so is what a <code> element restores
@example("<\n```")  # the fence's own blank lines are not added again at each edit
@example("```\n```\n\nabc")
def test_what_the_editor_restores_shows_as_the_chat_showed_it(text):
    """An edit that changes nothing changes nothing the chat shows (the text itself may
    differ in what the chat does not show: a fence's length, trailing blank lines)."""
    shown = safe_markdown(text)
    assert safe_markdown(unescape_markdown(shown)) == shown


@FAST
@given(st.lists(st.sampled_from(list("<>&*_[]()!: #|-") + ["javascript:", "data:", "![", "`x`", "&lt;", "&amp;"])
                | st.text(alphabet=st.characters(exclude_characters="\\`\r\n\u200b"), max_size=4),
                max_size=200).map("".join))
def test_the_editor_restores_one_line_of_prose_as_typed(text):
    assert unescape_markdown(safe_markdown(text)) == text.rstrip("\n")


@FAST
@given(markup_text)
def test_unescape_takes_any_text(text):
    assert isinstance(unescape_markdown(text), str)


# -- the reply parser -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def parsing(processor):
    tokenizer = processor.tokenizer
    prompt = processor.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                           add_generation_prompt=True)
    return tokenizer, prompt, control_tokens_of(tokenizer)


def _pieces(tokens: list[str]):
    halves = [t[: len(t) // 2] for t in tokens] + [t[len(t) // 2:] for t in tokens]
    gemma = ["<|channel>thought\n", "<channel|>", "<|tool_call>call:", "{", "}", ":", ",", '<|"|>', "<tool_call|>",
             "<turn|>", "calculator", "expression", "1+1", "[", "]", "true", "-3.5e2", "\n"]
    return st.lists(st.sampled_from(tokens + halves + gemma) | st.text(max_size=6), max_size=60).map("".join)


def _run(tokenizer, prompt: str, text: str, cuts: list[int]):
    parser = ReplyParser(tokenizer, prompt)
    events, start = [], 0
    for cut in sorted(set(cuts)):
        events += parser.feed(text[start:cut])
        start = cut
    events += parser.feed(text[start:])
    final, done = parser.finish()
    events += final
    shown = {kind: "".join(e.text for e in events if isinstance(e, kind)) for kind in (TextDelta, ThinkingDelta)}
    calls = [(c.name, json.dumps(c.arguments, sort_keys=True), c.error) for c in events if isinstance(c, ToolCall)]
    return shown, calls, (done.content, done.reasoning, done.incomplete, done.raw,
                          [(c.name, json.dumps(c.arguments, sort_keys=True)) for c in done.tool_calls])


@settings(max_examples=150, deadline=timedelta(milliseconds=1000),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_the_parser_gives_the_same_reply_however_the_text_is_split(parsing, data):
    tokenizer, prompt, tokens = parsing
    text = data.draw(_pieces(tokens))
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    whole = _run(tokenizer, prompt, text, [])
    split = _run(tokenizer, prompt, text, cuts)
    assert split == whole
    shown, _, (content, reasoning, *_) = whole
    for token in tokens:  # no control token reaches the user
        assert token not in shown[TextDelta] and token not in shown[ThinkingDelta]
        assert token not in content and token not in reasoning


# -- the transcript loader --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
KEYS = ["role", "text", "media", "rounds", "reasoning", "content", "raw", "notice", "stats", "thinking_seconds",
        "kind", "data", "mime", "name", "calls", "results", "arguments", "response", "status", "duration",
        "prompt_tokens", "generated_tokens", "stop_reason", "call_id", "id", "error"]
turn_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(["user", "assistant", "image", "audio",
                                                                             "video", "ok", "aGVsbG8=", ""]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=6),
    max_leaves=40,
)
def _either(plausible):
    return st.one_of(plausible, plausible, plausible, json_values)  # mostly plausible: the checks deeper in run


stats_like = st.none() | st.fixed_dictionaries({}, optional={
    key: _either(st.integers(0, 100) | st.floats(0, 10)) for key in
    ("prompt_tokens", "generated_tokens", "time_to_first_token", "duration", "drafted_tokens", "accepted_tokens",
     "duration_s", "time_to_first_token_s")} | {"stop_reason": _either(st.sampled_from(["stop", "length", ""]))})
call_like = st.fixed_dictionaries({"name": _either(st.sampled_from(["calculator", "x"]))}, optional={
    "id": json_values, "arguments": _either(st.dictionaries(st.text(max_size=5), json_values, max_size=3)),
    "raw": json_values, "error": json_values})
result_like = st.fixed_dictionaries({"name": _either(st.sampled_from(["calculator", "x"]))}, optional={
    "call_id": json_values, "status": _either(st.sampled_from(["ok", "error", "timeout", "client", "cancelled"])),
    "response": json_values, "duration": _either(st.floats(0, 10)), "error": json_values})
round_like = st.fixed_dictionaries({"calls": _either(st.lists(call_like, min_size=1, max_size=2))}, optional={
    "results": _either(st.lists(result_like, max_size=2)), "reasoning": json_values, "content": json_values,
    "raw": json_values, "stats": stats_like, "thinking_seconds": _either(st.floats(0, 10))})
media_like = st.fixed_dictionaries({"data": _either(st.sampled_from(["data:image/png;base64,aGVsbG8=",
                                                                     "data:x;base64,!!", "data:;base64,"]))},
                                   optional={"name": json_values, "kind": json_values})
user_like = st.fixed_dictionaries({"role": st.just("user")}, optional={
    "text": _either(st.text(max_size=20)), "media": _either(st.lists(media_like, max_size=2))})
assistant_like = st.fixed_dictionaries({"role": st.just("assistant")}, optional={
    key: _either(st.text(max_size=20)) for key in ("reasoning", "content", "raw", "notice")} | {
    "rounds": _either(st.lists(round_like, max_size=2)), "stats": stats_like,
    "thinking_seconds": _either(st.floats(0, 10))})
# The tree of versions (format 2): nodes naming a turn of "turns" by index, or carrying one.
branch_node_like = st.fixed_dictionaries({}, optional={
    "parent": _either(st.none() | st.integers(-1, 6)), "chosen": _either(st.none() | st.integers(-1, 3)),
    "turn": st.one_of(st.integers(-1, 6), user_like, assistant_like, json_values)})
branches_like = _either(st.fixed_dictionaries({}, optional={
    "chosen": _either(st.none() | st.integers(-1, 3)), "nodes": _either(st.lists(branch_node_like, max_size=8))}))
conversation_like = st.fixed_dictionaries(
    {"format": st.just(transcript.FORMAT), "version": st.sampled_from(transcript.VERSIONS),
     "turns": st.lists(st.tuples(user_like, assistant_like), max_size=3).map(lambda pairs: [t for p in pairs for t in p])
     | st.lists(st.one_of(user_like, assistant_like, turn_like), max_size=6)},
    optional={"settings": _either(st.dictionaries(st.sampled_from(["system_prompt", "enabled_tools", "thinking"]),
                                                  json_values)),
              "declared_tools": json_values, "branches": branches_like}).map(lambda d: json.dumps(d))

documents = st.one_of(
    conversation_like,
    json_values.map(json.dumps),
    st.text(max_size=200),
    st.fixed_dictionaries({"format": st.just(transcript.FORMAT), "version": st.just(transcript.VERSION),
                           "turns": st.lists(turn_like, max_size=6)},
                          optional={"settings": json_values, "declared_tools": json_values}).map(
        lambda d: json.dumps(d, allow_nan=True)),
)


def _with_round(round_: dict) -> str:
    return json.dumps({"format": transcript.FORMAT, "version": transcript.VERSION,
                       "turns": [{"role": "user", "text": "Hi"}, {"role": "assistant", "rounds": [round_]}]})


@FAST
@given(documents)
@example(_with_round({"calls": [{"name": "x"}], "results": [{"name": "x", "duration": [1]}]}))
@example(_with_round({"calls": [{"name": "x"}], "results": [{"name": "x", "duration": "soon"}]}))
@example(_with_round({"calls": [{"name": "x", "error": {"not": "text"}}]}))
def test_the_loader_loads_or_says_why(text):
    try:
        loaded = transcript.load(text, MediaLimits())
    except transcript.TranscriptError:  # the reason, in words, for the user
        return
    assert isinstance(loaded, transcript.Loaded)
    assert loaded.branches.holds(loaded.conversation), "the versions chosen are the conversation loaded"


@FAST
@given(conversation_like)
def test_whatever_loads_saves_back_and_loads_to_the_same_file(text):
    """Export, import, export: byte for byte, versions included."""
    from gemma4_ui.config import Settings
    from gemma4_ui.core.options import ChatOptions

    try:
        loaded = transcript.load(text, MediaLimits())
        options = ChatOptions.from_inputs(Settings(), **loaded.settings)
    except (transcript.TranscriptError, TypeError, ValueError):
        return
    saved = transcript.dumps(loaded.conversation, options, loaded.declared, loaded.branches)
    again = transcript.load(saved, MediaLimits())
    assert transcript.dumps(again.conversation, options, again.declared, again.branches) == saved


# -- tool arguments -------------------------------------------------------------------------------

DECLARED = {"name": "book_trip", "description": "Books a trip.", "parameters": {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "nights": {"type": "integer", "minimum": 1, "maximum": 30},
        "budget": {"type": "number", "nullable": True},
        "class": {"type": "string", "enum": ["economy", "business"]},
        "guests": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                              "age": {"type": "integer"}},
                                             "required": ["name"]}},
        "flexible": {"type": "boolean"},
    },
    "required": ["city", "nights"],
}}


@pytest.fixture(scope="module")
def registry():
    registry = default_registry()
    registry.declare(DECLARED)
    return registry


argument_names = st.sampled_from(["expression", "value", "from_unit", "to_unit", "city", "location", "unit",
                                  "timezone", "nights", "budget", "class", "guests", "flexible", "name", "age"])
arguments = st.dictionaries(argument_names | st.text(max_size=8), json_values, max_size=6)


@FAST
@given(data=st.data())
def test_any_arguments_are_validated_in_words(registry, data):
    name = data.draw(st.sampled_from([spec.name for spec in registry.specs()] + ["no_such_tool"]))
    call = ToolCall(name=name, arguments=data.draw(st.none() | arguments), id="call_0")
    enabled = {spec.name for spec in registry.specs()}
    problem = registry.validate(call, enabled)
    assert problem is None or (isinstance(problem, str) and problem)
    if problem is None:
        assert name != "no_such_tool" and call.arguments is not None


@settings(max_examples=60, deadline=timedelta(seconds=3),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_built_in_tool_ends_in_time_whatever_it_is_given(registry, data):
    builtin = [spec.name for spec in registry.specs() if spec.function is not None]
    name = data.draw(st.sampled_from(builtin))
    call = ToolCall(name=name, arguments=data.draw(arguments), id="call_0")
    started = time.monotonic()
    result = registry.execute(call, set(builtin), timeout=1.0)
    assert time.monotonic() - started < 2.0
    assert result.status in ("ok", "error", "timeout")
    json.dumps(result.response)
