"""Parsing the model's output: `processor.parse_response` with the bundled tokenizer's
response_template, and gemma4_ui.core.parsing (ReplyParser) on top of it.

Every case is parsed in one go, fed one character at a time, and fed in random chunk sizes;
all three must agree, typed values must keep their types, and no control token (nor a piece
of one) may reach the answer or the thought.
"""

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from replay import parse_reply  # noqa: E402
from transformers import AutoProcessor  # noqa: E402

from gemma4_ui.core.events import Done, TextDelta, ThinkingDelta, ToolCall, ToolCallStarted  # noqa: E402
from gemma4_ui.core.parsing import GEMMA4_RESPONSE_TEMPLATE, ReplyParser, control_tokens_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "assets" / "tiny-gemma4"
S = '<|"|>'  # the string delimiter


@pytest.fixture(scope="module")
def processor():
    return AutoProcessor.from_pretrained(BUNDLE)


@pytest.fixture(scope="module")
def tokenizer(processor):
    return processor.tokenizer


@pytest.fixture(scope="module")
def prompts(processor):
    """Prompts whose endings the parser must continue from."""
    user = {"role": "user", "content": "Weather in Tokyo?"}
    answered = {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"location": "Tokyo, JP"}}}],
        "tool_responses": [{"name": "get_weather", "response": {"temperature": 15, "weather": "sunny"}}],
    }

    def render(messages, **kwargs):
        return processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)

    found = {
        "turn": render([user]),  # ends "<|turn>model\n"
        "after_tool": render([user, answered]),  # ends "<tool_response|>": the turn goes on
        "after_tool_thinking": render([user, answered], enable_thinking=True),  # ends "<|channel>thought\n"
    }
    assert found["turn"].endswith("<|turn>model\n")
    assert found["after_tool"].endswith("<tool_response|>")
    assert found["after_tool_thinking"].endswith("<tool_response|><|channel>thought\n")
    return found


def typed(value) -> str:
    """Equality that also compares types (1, 1.0 and True are equal in Python, not here)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def stream(tokenizer, prompt: str, output: str, sizes: list[int]) -> tuple[list, Done]:
    parser = ReplyParser(tokenizer, prompt)
    events, start = [], 0
    for size in sizes:
        events += parser.feed(output[start : start + size])
        start += size
    events += parser.feed(output[start:])
    final, done = parser.finish()
    return events + final, done


def chunkings(output: str, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[], [1] * len(output)] + [[rng.randint(1, 9) for _ in output] for _ in range(6)]


@dataclass
class Case:
    output: str
    reasoning: str = ""
    content: str = ""
    calls: list = field(default_factory=list)  # (name, arguments); arguments None for a malformed call
    incomplete: str | None = None
    prompt: str = "turn"
    # processor.parse_response gives the same reasoning, content and calls
    same_in_transformers: bool = True


CASES = {
    # -- strings and values ------------------------------------------------------------------
    "string_with_punctuation": Case(
        f"<|tool_call>call:note{{text:{S}He said \"hi\", then {{left}}: <done> \\ back\\slash\n2nd line{S}}}<tool_call|><|tool_response>",
        calls=[("note", {"text": 'He said "hi", then {left}: <done> \\ back\\slash\n2nd line'})],
    ),
    "string_non_latin": Case(
        f"<|tool_call>call:get_weather{{location:{S}東京, 日本 — Ünïcødé 🌸{S}}}<tool_call|><|tool_response>",
        calls=[("get_weather", {"location": "東京, 日本 — Ünïcødé 🌸"})],
    ),
    "numbers_booleans_null": Case(
        "<|tool_call>call:set{a:-3,b:2.5,c:-0.125,d:1e+21,e:0,f:true,g:false,h:null}<tool_call|><|tool_response>",
        calls=[("set", {"a": -3, "b": 2.5, "c": -0.125, "d": 1e21, "e": 0, "f": True, "g": False, "h": None})],
    ),
    "numbers_in_strings_stay_strings": Case(
        f"<|tool_call>call:set{{zip:{S}01234{S},flag:{S}true{S},none:{S}null{S}}}<tool_call|><|tool_response>",
        calls=[("set", {"zip": "01234", "flag": "true", "none": "null"})],
    ),
    "nested_objects_and_arrays": Case(
        f"<|tool_call>call:book{{config:{{Font:{{bold:false,size:14}},theme:{S}dark{S}}},stops:[{{city:{S}Kyoto{S},nights:2}},{{city:{S}Nara{S}}}],grid:[[1,2],[]],empty:{{}}}}<tool_call|><|tool_response>",
        calls=[("book", {"config": {"Font": {"bold": False, "size": 14}, "theme": "dark"}, "stops": [{"city": "Kyoto", "nights": 2}, {"city": "Nara"}], "grid": [[1, 2], []], "empty": {}})],
    ),
    "no_arguments": Case("<|tool_call>call:now{}<tool_call|><|tool_response>", calls=[("now", {})]),
    "dotted_and_dashed_name": Case("<|tool_call>call:my.tool-v2{x:1}<tool_call|><|tool_response>", calls=[("my.tool-v2", {"x": 1})]),
    # -- structure -----------------------------------------------------------------------------
    "several_calls": Case(
        f"<|tool_call>call:get_weather{{location:{S}Tokyo, JP{S}}}<tool_call|><|tool_call>call:get_weather{{location:{S}Paris, FR{S},unit:{S}celsius{S}}}<tool_call|><|tool_call>call:now{{}}<tool_call|><|tool_response>",
        calls=[("get_weather", {"location": "Tokyo, JP"}), ("get_weather", {"location": "Paris, FR", "unit": "celsius"}), ("now", {})],
    ),
    "thought_then_call": Case(
        f"<|channel>thought\nI need the weather.<channel|><|tool_call>call:get_weather{{location:{S}Seoul{S}}}<tool_call|><|tool_response>",
        reasoning="I need the weather.",
        calls=[("get_weather", {"location": "Seoul"})],
    ),
    "text_before_a_call": Case(
        f"Let me check that for you.<|tool_call>call:get_weather{{location:{S}Tokyo{S}}}<tool_call|><|tool_response>",
        content="Let me check that for you.",
        calls=[("get_weather", {"location": "Tokyo"})],
    ),
    "text_on_both_sides_of_a_call": Case(
        # transformers keeps only the last piece of content; ReplyParser keeps both
        f"Checking.<|tool_call>call:get_weather{{location:{S}Tokyo{S}}}<tool_call|>Done.<turn|>",
        content="Checking.Done.",
        calls=[("get_weather", {"location": "Tokyo"})],
        same_in_transformers=False,
    ),
    "thought_and_answer": Case(
        "<|channel>thought\nThe user greets me.\n<channel|>Hello! How can I help?<turn|>",
        reasoning="The user greets me.",
        content="Hello! How can I help?",
    ),
    "empty_thought_then_answer": Case("<|channel>thought\n<channel|>Hi.<turn|>", content="Hi."),
    "thought_with_no_answer": Case("<|channel>thought\nNothing to add.<channel|><turn|>", reasoning="Nothing to add."),
    "answer_only_with_eos": Case("Plain answer, with: {braces} and \"quotes\".<eos>", content='Plain answer, with: {braces} and "quotes".'),
    "stray_markers_in_answer": Case(
        f"Hi {S}there<|image|> and <|turn>you<turn|>",
        content="Hi there and you",
        same_in_transformers=False,  # transformers hands the markers through as text
    ),
    "answer_after_tool_response": Case("It is sunny and 15 degrees.<turn|>", content="It is sunny and 15 degrees.", prompt="after_tool"),
    "thought_opened_by_the_prompt": Case(
        "Sunny is fine for running.<channel|>Yes, go running!<turn|>",
        reasoning="Sunny is fine for running.",
        content="Yes, go running!",
        prompt="after_tool_thinking",
    ),
    # -- cut off (max new tokens, Stop) -----------------------------------------------------------
    "cut_mid_thought": Case("<|channel>thought\nLet me think about", reasoning="Let me think about", incomplete="thought", same_in_transformers=False),
    "cut_right_after_the_thought_opens": Case("<|channel>thought\n", incomplete="thought", same_in_transformers=False),
    "cut_in_a_thought_the_prompt_opened": Case("Sunny means", reasoning="Sunny means", incomplete="thought", prompt="after_tool_thinking", same_in_transformers=False),
    "cut_right_after_the_call_name": Case("<|tool_call>call:get_weather", incomplete="tool call", same_in_transformers=False),
    "cut_mid_call": Case("<|tool_call>call:get_weather{location:", incomplete="tool call", same_in_transformers=False),
    "cut_mid_string": Case(f"<|tool_call>call:get_weather{{location:{S}Tok", incomplete="tool call", same_in_transformers=False),
    "cut_in_the_second_call": Case(
        f"<|channel>thought\nTwo cities.<channel|><|tool_call>call:get_weather{{location:{S}Tokyo{S}}}<tool_call|><|tool_call>call:get_weather{{loc",
        reasoning="Two cities.",
        calls=[("get_weather", {"location": "Tokyo"})],
        incomplete="tool call",
        same_in_transformers=False,
    ),
    "cut_mid_answer": Case("<|channel>thought\nEasy.<channel|>The answer is", reasoning="Easy.", content="The answer is"),
    # -- malformed or unusual output ------------------------------------------------------------
    "bare_word_value_is_an_error_not_a_string": Case(
        "<|tool_call>call:get_weather{unit:celsius}<tool_call|><|tool_response>",
        calls=[("get_weather", None)],
        same_in_transformers=False,  # transformers returns the raw text as `arguments`
    ),
    "key_that_is_not_a_word": Case(
        # transformers' lax JSON only unquotes word keys; ReplyParser reads these too
        f"<|tool_call>call:lookup{{first-name:{S}Ada{S},last name:{S}Lovelace{S}}}<tool_call|><|tool_response>",
        calls=[("lookup", {"first-name": "Ada", "last name": "Lovelace"})],
        same_in_transformers=False,
    ),
    "reserved_control_bytes_in_a_string": Case(
        # transformers' reader refuses \x01/\x02 (its own placeholders); ReplyParser reads U+FFFD
        f"<|tool_call>call:echo{{text:{S}a\x01b\x02c{S}}}<tool_call|><|tool_response>",
        calls=[("echo", {"text": "a\ufffdb\ufffdc"})],
        same_in_transformers=False,
    ),
}


def check_events(events: list, done: Done, tokens: list[str]) -> None:
    texts = [e.text for e in events if isinstance(e, (TextDelta, ThinkingDelta))]
    for text in texts:
        assert not any(token in text for token in tokens), text
        assert "<|" not in text and "|>" not in text, text
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)).strip() == done.reasoning
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip() == done.content
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls == done.tool_calls
    assert sum(isinstance(e, ToolCallStarted) for e in events) >= len(calls)


def summary(done: Done) -> tuple:
    return done.reasoning, done.content, typed([(c.name, c.arguments) for c in done.tool_calls]), done.incomplete


@pytest.mark.parametrize("name", CASES)
def test_reply_parser(tokenizer, prompts, name):
    case = CASES[name]
    prompt, tokens = prompts[case.prompt], control_tokens_of(tokenizer)
    expected = (case.reasoning, case.content, typed(case.calls), case.incomplete)
    for i, sizes in enumerate(chunkings(case.output, seed=len(name))):
        events, done = stream(tokenizer, prompt, case.output, sizes)
        assert summary(done) == expected, f"chunking #{i}: {sizes[:12]}"
        assert done.raw == case.output
        check_events(events, done, tokens)
        for call in done.tool_calls:
            assert (call.arguments is None) == (call.error is not None)
    assert summary(parse_reply(tokenizer, case.output, prompt)) == expected


@pytest.mark.parametrize("name", [name for name, case in CASES.items() if case.same_in_transformers])
def test_processor_parse_response(processor, prompts, name):
    case = CASES[name]
    message = processor.parse_response(case.output, prefix=prompts[case.prompt])
    assert message["role"] == "assistant"
    assert message.get("reasoning_content", "") == case.reasoning
    assert message.get("content", "") == case.content
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])]
    assert typed(calls) == typed(case.calls)
    for call in message.get("tool_calls", []):
        assert call["type"] == "function"


def test_processor_parse_response_returns_the_documented_shape(processor, prompts):
    output = f"<|channel>thought\nNeed data.<channel|><|tool_call>call:get_weather{{days:3,location:{S}Tokyo, JP{S},metric:true}}<tool_call|><|tool_response>"
    assert processor.parse_response(output, prefix=prompts["turn"]) == {
        "role": "assistant",
        "reasoning_content": "Need data.",
        "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"days": 3, "location": "Tokyo, JP", "metric": True}}}],
    }


def test_bundle_ships_the_response_template(tokenizer):
    """The build script copies GEMMA4_RESPONSE_TEMPLATE into the bundle's tokenizer config."""
    assert tokenizer.response_template == GEMMA4_RESPONSE_TEMPLATE


def test_seed000_output(processor):
    prompt = processor.apply_chat_template(
        [{"role": "system", "content": "You are a concise assistant."}, {"role": "user", "content": "What is 2 + 2?"}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=True,
    )
    with open(Path(__file__).parent / "golden" / "seed000_concise_output.txt", encoding="utf-8", newline="") as f:
        output = f.read()
    expected = {"role": "assistant", "reasoning_content": "2+2 を短く計算する。", "content": "4"}
    assert processor.parse_response(output, prefix=prompt) == expected
    done = parse_reply(processor.tokenizer, output, prompt)
    assert (done.reasoning, done.content, done.tool_calls, done.incomplete) == ("2+2 を短く計算する。", "4", [], None)


def test_seed003_thinking_call(processor, prompts):
    """Seed 003 shows this reply parsed by an older response schema that printed the stop token
    as the answer (`=== Answer ===` then `<eos>`). The markers never reach the answer here: the
    reply has no answer, only the thought and the call."""
    output = (
        "<|channel>thought\n1. **Analyze the Request:** The user is asking if it's good for running in Seoul right now.\n"
        "8. **Final Output Generation:** Generate the JSON tool call.<channel|>"
        f"<|tool_call>call:get_current_weather{{location:{S}Seoul{S}}}<tool_call|><|tool_response>"
    )
    message = processor.parse_response(output, prefix=prompts["turn"])
    assert message["tool_calls"] == [{"type": "function", "function": {"name": "get_current_weather", "arguments": {"location": "Seoul"}}}]
    assert message["reasoning_content"].startswith("1. **Analyze the Request:**")
    assert "content" not in message
    assert parse_reply(processor.tokenizer, output + "<eos>", prompts["turn"]).content == ""


def test_streaming_real_tokens(processor, prompts):
    """Fed token by token, as an engine's streamer does: special tokens kept, and text that ends
    inside a multi-byte character (byte-fallback tokens) held until the character is whole."""
    tokenizer = processor.tokenizer
    output = f"<|channel>thought\nCheck the weather.<channel|><|tool_call>call:get_weather{{location:{S}Kyōto{S},days:2}}<tool_call|><|tool_response>"
    ids = tokenizer.encode(output, add_special_tokens=False)
    pieces, sent = [], ""
    for end in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:end], skip_special_tokens=False)
        if not text.endswith("\ufffd"):
            pieces.append(text[len(sent) :])
            sent = text
    assert "".join(pieces) == output and len(pieces) > 20
    parser = ReplyParser(tokenizer, prompts["turn"])
    events = [event for piece in pieces for event in parser.feed(piece)]
    final, done = parser.finish()
    check_events(events + final, done, control_tokens_of(tokenizer))
    assert (done.reasoning, done.incomplete) == ("Check the weather.", None)
    assert typed([(c.name, c.arguments) for c in done.tool_calls]) == typed([("get_weather", {"location": "Kyōto", "days": 2})])


def test_malformed_call_keeps_its_text(tokenizer, prompts):
    done = parse_reply(tokenizer, "<|tool_call>call:get_weather{unit:celsius}<tool_call|><|tool_response>", prompts["turn"])
    (call,) = done.tool_calls
    assert call.name == "get_weather" and call.arguments is None
    assert call.raw == "{unit:celsius}" and call.error


def test_arguments_nested_too_deeply_are_a_malformed_call(tokenizer, prompts):
    """The model writes what it likes: arguments nested thousands deep are refused as a call,
    not a RecursionError that ends the stream."""
    nested = "[" * 5000 + "]" * 5000
    done = parse_reply(tokenizer, f"<|tool_call>call:f{{first-name:{nested}}}<tool_call|><|tool_response>", prompts["turn"])
    (call,) = done.tool_calls
    assert call.name == "f" and call.arguments is None and call.error


def test_reserved_control_bytes_stay_in_raw(tokenizer, prompts):
    output = f"<|tool_call>call:echo{{text:{S}a\x01b{S}}}<tool_call|><|tool_response>"
    done = parse_reply(tokenizer, output, prompts["turn"])
    assert done.raw == output and done.incomplete is None
