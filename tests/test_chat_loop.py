"""The tool loop on recorded Gemma 4 outputs, through the real template and parser."""

from __future__ import annotations

import threading
import time

import pytest
from replay import ReplayEngine

from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
from gemma4_ui.tools.registry import default_registry
from gemma4_ui.turns import ChatOptions, TurnRunner

Q = '<|"|>'
WEATHER_CALL = f"<|tool_call>call:get_current_weather{{location:{Q}Tokyo, JP{Q}}}<tool_call|><|tool_response>"


def run_turn(processor, outputs, text="What's the weather in Tokyo?", registry=None, **options):
    engine = ReplayEngine(processor, outputs)
    runner = TurnRunner(engine, registry or default_registry())
    conversation = Conversation([UserTurn(text)])
    opts = ChatOptions(enabled_tools=options.pop("enabled_tools", ["get_current_weather", "calculator"]), **options)
    snapshots = list(runner.run(conversation, opts, threading.Event()))
    return engine, snapshots[-1].conversation, snapshots


def test_single_call_then_answer(processor):
    engine, conv, snapshots = run_turn(processor, [WEATHER_CALL, "It is sunny in Tokyo.<turn|>"])
    turn = conv.turns[-1]
    assert isinstance(turn, AssistantTurn) and len(turn.rounds) == 1
    (call,), (result,) = turn.rounds[0].calls, turn.rounds[0].results
    assert call.name == "get_current_weather" and call.arguments == {"location": "Tokyo, JP"}
    assert result.status == "ok" and result.response["location"] == "Tokyo, JP"
    assert turn.content == "It is sunny in Tokyo." and not turn.notice
    # The second prompt continues the open model turn with the call and its response, in
    # Gemma's native format, and no new model turn is opened.
    second = engine.prompts[1]
    assert second.startswith(engine.prompts[0])
    tail = second[len(engine.prompts[0]):]
    assert tail.startswith(WEATHER_CALL[: -len("<|tool_response>")] + "<|tool_response>response:get_current_weather{")
    assert tail.endswith("<tool_response|>") and "<|turn>model" not in tail
    assert snapshots[-1].live is None


def test_several_calls_run_in_order_and_return_together(processor):
    calls = (f"<|tool_call>call:calculator{{expression:{Q}2+2{Q}}}<tool_call|>"
             f"<|tool_call>call:get_current_weather{{location:{Q}Paris{Q}}}<tool_call|><|tool_response>")
    engine, conv, _ = run_turn(processor, [calls, "Done.<turn|>"])
    round_ = conv.turns[-1].rounds[0]
    assert [c.name for c in round_.calls] == ["calculator", "get_current_weather"]
    assert [r.name for r in round_.results] == ["calculator", "get_current_weather"]
    assert round_.results[0].response["result"] == 4
    second = engine.prompts[1]
    assert second.count("<|tool_response>response:") == 2
    assert second.index("response:calculator") < second.index("response:get_current_weather")


def test_thinking_then_call_keeps_the_thought_inside_the_exchange(processor):
    output = "<|channel>thought\nThe user wants the weather; call the tool.<channel|>" + WEATHER_CALL
    engine, conv, _ = run_turn(processor, [output, "Answer with it.<channel|>Sunny.<turn|>"],
                               thinking=True)
    turn = conv.turns[-1]
    assert turn.rounds[0].reasoning == "The user wants the weather; call the tool."
    assert turn.reasoning == "Answer with it." and turn.content == "Sunny."
    assert "<|think|>" in engine.prompts[0]
    # After a tool response with thinking on, the prompt opens the thought channel (so the
    # recorded second output starts inside the thought).
    assert engine.prompts[1].endswith("<tool_response|><|channel>thought\n")


def test_unknown_tool_is_answered_with_an_error(processor):
    output = f"<|tool_call>call:rm_rf{{path:{Q}/{Q}}}<tool_call|><|tool_response>"
    engine, conv, _ = run_turn(processor, [output, "Sorry.<turn|>"])
    result = conv.turns[-1].rounds[0].results[0]
    assert result.status == "error" and "rm_rf" in result.error
    assert "response:rm_rf{error:" in engine.prompts[1]


def test_tool_not_enabled_never_runs(processor):
    engine, conv, _ = run_turn(processor, [WEATHER_CALL, "ok<turn|>"], enabled_tools=["calculator"])
    result = conv.turns[-1].rounds[0].results[0]
    assert result.status == "error" and "enabled" in result.error
    assert "response" not in result.response  # nothing ran: the response is the error alone


def test_invalid_arguments_are_reported(processor):
    output = "<|tool_call>call:get_current_weather{location:42}<tool_call|><|tool_response>"
    _, conv, _ = run_turn(processor, [output, "ok<turn|>"])
    result = conv.turns[-1].rounds[0].results[0]
    assert result.status == "error" and "location" in result.error and "string" in result.error


def test_unparsable_arguments_are_reported(processor):
    output = "<|tool_call>call:get_current_weather{location:Tokyo}<tool_call|><|tool_response>"
    _, conv, _ = run_turn(processor, [output, "ok<turn|>"])
    call, result = conv.turns[-1].rounds[0].calls[0], conv.turns[-1].rounds[0].results[0]
    assert call.arguments is None and result.status == "error"


def test_a_hanging_tool_times_out(processor):
    registry = default_registry()

    def slow_lookup(key: str) -> str:
        """Looks a key up slowly.

        Args:
            key: The key.
        """
        time.sleep(5)
        return key

    registry.register(slow_lookup)
    output = f"<|tool_call>call:slow_lookup{{key:{Q}a{Q}}}<tool_call|><|tool_response>"
    started = time.perf_counter()
    _, conv, _ = run_turn(processor, [output, "ok<turn|>"], registry=registry, enabled_tools=["slow_lookup"],
                          tool_timeout=0.3)
    assert time.perf_counter() - started < 3
    assert conv.turns[-1].rounds[0].results[0].status == "timeout"
    assert conv.turns[-1].content == "ok"


def test_round_limit_stops_the_loop(processor):
    outputs = [WEATHER_CALL] * 4
    engine, conv, _ = run_turn(processor, outputs, max_tool_rounds=3)
    turn = conv.turns[-1]
    assert len(turn.rounds) == 3 and len(engine.prompts) == 4
    assert "limit" in turn.notice


def test_client_tool_waits_for_the_user_then_resumes(processor):
    registry = default_registry()
    registry.declare({"name": "lookup_order", "description": "Finds an order.",
                      "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}},
                                     "required": ["order_id"]}})
    engine = ReplayEngine(processor, ["<|tool_call>call:lookup_order{order_id:7}<tool_call|><|tool_response>",
                                      "Your order has shipped.<turn|>"])
    runner = TurnRunner(engine, registry)
    options = ChatOptions(enabled_tools=["lookup_order"])
    conv = list(runner.run(Conversation([UserTurn("Where is order 7?")]), options, threading.Event()))[-1].conversation
    assert conv.turns[-1].rounds[0].results[0].status == "client"
    assert len(engine.prompts) == 1

    answered = runner.answer_client_tool(conv, {"status": "shipped"})
    final = list(runner.run(answered, options, threading.Event()))[-1].conversation
    assert final.turns[-1].content == "Your order has shipped."
    assert "response:lookup_order{status:<|\"|>shipped<|\"|>}" in engine.prompts[1]


def test_cancel_stops_the_turn(processor):
    engine = ReplayEngine(processor, ["A long answer " * 50 + "<turn|>"], chunk=1)
    runner = TurnRunner(engine, default_registry())
    cancel = threading.Event()
    last = None
    for i, snapshot in enumerate(runner.run(Conversation([UserTurn("hi")]), ChatOptions(), cancel)):
        if i == 5:
            cancel.set()
        last = snapshot
    turn = last.conversation.turns[-1]
    assert turn.notice == "Stopped." and turn.stats.stop_reason == "cancelled"
    assert 0 < len(turn.content) < 50


@pytest.mark.parametrize("cut", ["<|channel>thought\nhalf a thou", WEATHER_CALL[:30]])
def test_output_cut_off_is_reported_not_run(processor, cut):
    _, conv, _ = run_turn(processor, [cut], thinking=True)
    turn = conv.turns[-1]
    assert not turn.rounds and turn.notice


def test_a_stray_tool_response_token_ends_the_reply_with_a_reason(processor):
    """The model hands over to a tool (`<|tool_response>`) without having called one."""
    _, conv, _ = run_turn(processor, ["Let me check.<|tool_response>"])
    turn = conv.turns[-1]
    assert turn.content == "Let me check." and not turn.rounds
    assert turn.notice == "The model handed over to a tool without calling one, so the reply ends here."
