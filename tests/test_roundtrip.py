"""Round trip: a reply parsed from the model's output and put back into the history renders as
the bytes the model produced (less the thoughts the template drops), so the next prompt
continues exactly what the model saw and wrote.
"""

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from replay import parse_reply  # noqa: E402
from transformers import AutoProcessor  # noqa: E402

from gemma4_ui.engines.openai import to_openai_messages  # noqa: E402

BUNDLE = Path(__file__).resolve().parent.parent / "assets" / "tiny-gemma4"
S = '<|"|>'

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Gets the current weather in a given location.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. Tokyo, JP"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TOKYO = {"role": "user", "content": "Hey, what's the weather in Tokyo right now?"}
SUNNY = {"temperature": 15, "weather": "sunny"}
SUNNY_TEXT = f"response:get_current_weather{{temperature:15,weather:{S}sunny{S}}}<tool_response|>"


@pytest.fixture(scope="module")
def processor():
    return AutoProcessor.from_pretrained(BUNDLE)


@pytest.fixture(scope="module")
def render(processor):
    def render(messages, **kwargs):
        return processor.apply_chat_template(messages, tools=[WEATHER], tokenize=False, **kwargs)

    return render


def calls_of(done) -> list[dict]:
    return [{"type": "function", "function": {"name": call.name, "arguments": call.arguments}} for call in done.tool_calls]


def test_call_then_response(processor, render):
    history = [SYSTEM, TOKYO]
    prompt = render(history, add_generation_prompt=True)
    output = f"<|tool_call>call:get_current_weather{{location:{S}Tokyo, JP{S}}}<tool_call|><|tool_response>"
    done = parse_reply(processor.tokenizer, output, prompt)
    assert done.incomplete is None and [c.arguments for c in done.tool_calls] == [{"location": "Tokyo, JP"}]

    turn = {"role": "assistant", "tool_calls": calls_of(done)}
    # Before the response exists the history ends where the model stopped.
    assert render(history + [turn], add_generation_prompt=True) == prompt + output
    # The response follows the model's own <|tool_response>; the turn stays open for the answer.
    turn["tool_responses"] = [{"name": "get_current_weather", "response": SUNNY}]
    assert render(history + [turn], add_generation_prompt=True) == prompt + output + SUNNY_TEXT


def test_openai_style_history(processor, render):
    """The same exchange kept the OpenAI way: JSON-string arguments with ids, and `tool` messages."""
    prompt = render([TOKYO], add_generation_prompt=True)
    output = (
        f"<|tool_call>call:get_current_weather{{location:{S}東京{S}}}<tool_call|>"
        f"<|tool_call>call:get_current_weather{{location:{S}Paris, FR{S},unit:{S}celsius{S}}}<tool_call|><|tool_response>"
    )
    done = parse_reply(processor.tokenizer, output, prompt)
    # As the remote engine sends them: JSON-string arguments, an id for each call.
    [assistant] = to_openai_messages([{"role": "assistant", "tool_calls": [
        {"id": call.id, "function": {"name": call.name, "arguments": call.arguments}} for call in done.tool_calls]}])
    calls = assistant["tool_calls"]
    assert all(isinstance(call["function"]["arguments"], str) for call in calls)
    history = [TOKYO, {"role": "assistant", "content": None, "tool_calls": calls}]
    assert render(history, add_generation_prompt=True) == prompt + output

    history += [
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": json.dumps({"weather": "rain"})},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": {"weather": "sunny"}},
    ]
    responses = (
        f'response:get_current_weather{{value:{S}{{"weather": "rain"}}{S}}}<tool_response|>'
        f"<|tool_response>response:get_current_weather{{weather:{S}sunny{S}}}<tool_response|>"
    )
    assert render(history, add_generation_prompt=True) == prompt + output + responses


def test_final_answer_after_tool(processor, render):
    history = [SYSTEM, TOKYO, {"role": "assistant", "tool_calls": [{"function": {"name": "get_current_weather", "arguments": {"location": "Tokyo, JP"}}}],
                               "tool_responses": [{"name": "get_current_weather", "response": SUNNY}]}]
    prompt = render(history, add_generation_prompt=True)
    assert prompt.endswith("<tool_response|>")
    output = "The current weather in Tokyo is 15 degrees Celsius and sunny.<turn|>"
    done = parse_reply(processor.tokenizer, output, prompt)
    assert done.content == "The current weather in Tokyo is 15 degrees Celsius and sunny."

    history[-1] = {**history[-1], "content": done.content}  # as the function-calling guide does: message[-1]["content"] = output
    assert render(history) == prompt + output + "\n"
    follow_up = {"role": "user", "content": "And tomorrow?"}
    assert render(history + [follow_up], add_generation_prompt=True) == prompt + output + "\n<|turn>user\nAnd tomorrow?<turn|>\n<|turn>model\n"


def test_thinking_through_a_tool_exchange(processor, render):
    """Thoughts stay in the prompt while the exchange goes on and leave it once the user speaks."""
    history = [TOKYO]
    prompt = render(history, add_generation_prompt=True, enable_thinking=True)
    output = f"<|channel>thought\nI need the weather first.\n<channel|><|tool_call>call:get_current_weather{{location:{S}Tokyo, JP{S}}}<tool_call|><|tool_response>"
    done = parse_reply(processor.tokenizer, output, prompt)
    assert done.reasoning == "I need the weather first."
    history.append({"role": "assistant", "reasoning_content": done.reasoning, "tool_calls": calls_of(done)})
    assert render(history, add_generation_prompt=True, enable_thinking=True) == prompt + output

    history.append({"role": "tool", "name": "get_current_weather", "content": SUNNY})
    prompt2 = render(history, add_generation_prompt=True, enable_thinking=True)
    assert prompt2 == prompt + output + SUNNY_TEXT + "<|channel>thought\n"
    output2 = "Sunny and mild.\n<channel|>It is sunny and 15 degrees in Tokyo.<turn|>"
    done2 = parse_reply(processor.tokenizer, output2, prompt2)
    assert (done2.reasoning, done2.content) == ("Sunny and mild.", "It is sunny and 15 degrees in Tokyo.")
    history.append({"role": "assistant", "reasoning_content": done2.reasoning, "content": done2.content})
    assert render(history, enable_thinking=True) == prompt2 + output2 + "\n"

    # The next user message ends the exchange: both thoughts drop out, the rest stays.
    history.append({"role": "user", "content": "Thanks!"})
    rendered = render(history, add_generation_prompt=True, enable_thinking=True)
    thoughtless = (prompt + output + SUNNY_TEXT + output2).replace("<|channel>thought\nI need the weather first.\n<channel|>", "")
    thoughtless = thoughtless.replace("Sunny and mild.\n<channel|>", "")
    assert rendered == thoughtless + "\n<|turn>user\nThanks!<turn|>\n<|turn>model\n"


def test_thought_is_stripped_from_a_plain_answer(processor, render):
    history = [{"role": "user", "content": "What is 2 + 2?"}]
    prompt = render(history, add_generation_prompt=True, enable_thinking=True)
    output = "<|channel>thought\n2+2 を短く計算する。<channel|>4<turn|>"
    done = parse_reply(processor.tokenizer, output, prompt)
    assert (done.reasoning, done.content) == ("2+2 を短く計算する。", "4")
    expected = prompt + "4<turn|>\n"  # the model's bytes less the thought
    assert render(history + [{"role": "assistant", "content": done.content}], enable_thinking=True) == expected
    # Raw output put back as the content loses its thought the same way.
    raw = output.removesuffix("<turn|>")  # what a client that keeps the raw text stores
    assert render(history + [{"role": "assistant", "content": raw}], enable_thinking=True) == expected


def test_parse_response_message_goes_back_as_is(processor, render):
    """transformers' parsed message is already an assistant message the template takes."""
    prompt = render([TOKYO], add_generation_prompt=True, enable_thinking=True)
    output = f"<|channel>thought\nCheck it.\n<channel|><|tool_call>call:get_current_weather{{location:{S}Tokyo, JP{S},unit:{S}celsius{S}}}<tool_call|><|tool_response>"
    message = processor.parse_response(output, prefix=prompt)
    assert render([TOKYO, message], add_generation_prompt=True, enable_thinking=True) == prompt + output


@pytest.mark.parametrize(
    "arguments",
    [
        # keys in the template's order (sorted case-insensitively), every value type
        f"{{config:{{Font:{{bold:false,size:14}},theme:{S}dark{S}}},count:-3,items:[1,2.5,{S}x{S},[],{{}}],note:{S}He said \"hi\", {{ok}}: <b>\n2nd{S},off:null,ratio:1e+21,Zeta:true}}",
        f"{{text:{S}東京 — back\\slash, colon: comma, {{brace}}{S}}}",
    ],
)
def test_typed_arguments_render_back_byte_for_byte(processor, render, arguments):
    prompt = render([TOKYO], add_generation_prompt=True)
    output = f"<|tool_call>call:get_current_weather{arguments}<tool_call|><|tool_response>"
    done = parse_reply(processor.tokenizer, output, prompt)
    assert done.tool_calls[0].arguments is not None
    assert render([TOKYO, {"role": "assistant", "tool_calls": calls_of(done)}]) == prompt + output


def test_unsorted_keys_come_back_sorted(processor, render):
    """The one place the history does not keep the model's bytes: keys it wrote out of order
    come back in the template's order (the order it teaches)."""
    prompt = render([TOKYO], add_generation_prompt=True)
    output = f"<|tool_call>call:get_current_weather{{unit:{S}celsius{S},location:{S}Tokyo{S}}}<tool_call|><|tool_response>"
    done = parse_reply(processor.tokenizer, output, prompt)
    rendered = render([TOKYO, {"role": "assistant", "tool_calls": calls_of(done)}])
    assert rendered == prompt + f"<|tool_call>call:get_current_weather{{location:{S}Tokyo{S},unit:{S}celsius{S}}}<tool_call|><|tool_response>"
