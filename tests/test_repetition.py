"""The repetition guard: a reply that keeps repeating itself is stopped, with a notice, for
every engine; ordinary text (tables, code, lists) is never stopped; the setting tunes it or
turns it off."""

from __future__ import annotations

import threading

import pytest

from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.repetition import MIN_CHARACTERS, RepetitionGuard, repeating_period, trimmed_loop
from gemma4_ui.tools.registry import default_registry
from gemma4_ui.turns import TurnRunner
from scripts.build_tiny_checkpoints import build_unified

LOOPS = [
    "call:" * 60,
    "I cannot check " + "t" * 300,
    "There many" + " many" * 80,
    "Yous all is dos" + " all is dos" * 40,
    "The bridge was old. " + "Then the fox said hello to the owl and they walked to the market together. " * 6,
]
ORDINARY = [
    "| a | b | c | d | e |\n|---|---|---|---|---|\n" + "| 1 | 2 | 3 | 4 | 5 |\n" * 3,
    "```python\nfor i in range(10):\n    total += i\n    print(total)\n```\n" * 2,
    "1. Preheat the oven.\n2. Mix the flour and the eggs.\n3. Bake for 20 minutes.\n",
    "Ha ha ha! That's funny. " + "=" * 40 + "\nThe end. The end. The end.",
    "The answer is 3,217 × 48 = 154416. " * 2,
]


def fed(text: str, repeats: int = 4, piece: int = 3) -> RepetitionGuard:
    guard = RepetitionGuard(repeats)
    for start in range(0, len(text), piece):
        if guard.feed(text[start:start + piece]):
            break
    return guard


@pytest.mark.parametrize("text", LOOPS)
def test_a_loop_trips_the_guard_soon(text):
    guard = fed(text)
    assert guard.period is not None, text[:40]
    assert len(guard.tail) <= MIN_CHARACTERS + 5 * guard.period + 48, "stopped soon after the loop began"


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_never_trips_it(text):
    assert fed(text).period is None


def test_the_setting_tunes_and_turns_off_the_guard():
    sentence = "Then the fox said hello to the owl and they walked to the market together. "
    assert fed(sentence * 3, repeats=2).period == len(sentence)
    assert fed(sentence * 3, repeats=4).period is None, "three sentences are not four repeats"
    assert fed("call:" * 500, repeats=0).period is None, "0 turns the guard off"


def test_a_loop_is_shown_as_one_line_not_a_wall():
    assert trimmed_loop("There many" + " many" * 80) == "There many many…"
    assert trimmed_loop("I cannot check " + "t" * 300) == "I cannot check tt…"
    assert trimmed_loop("An ordinary answer.") == "An ordinary answer."


def test_checking_is_linear_in_the_output():
    # A long non-repeating output: each check finds no recurring end, so the whole costs
    # about one pass; a quadratic check would take seconds here.
    import random
    import time

    rng = random.Random(0)
    text = "".join(rng.choice("abcdefghij ") for _ in range(400_000))
    started = time.process_time()
    assert fed(text, piece=4).period is None
    assert time.process_time() - started < 3.0
    assert repeating_period("x" * 10_000, 4) == 1


@pytest.fixture(scope="module")
def looping_engine(tmp_path_factory):
    """A real Gemma 4 whose blocks write nothing to the residual stream (their output
    projections are zero): each step predicts the token it was given, so under greedy
    decoding it writes its last prompt token for ever, as looping models do."""
    import torch
    from safetensors.torch import load_file, save_file

    from gemma4_ui.engines.local.engine import LocalEngine

    path = build_unified(tmp_path_factory.mktemp("looping") / "model", seed=3)
    weights = load_file(path / "model.safetensors")
    for name in weights:
        if "language_model" in name and name.endswith(("o_proj.weight", "down_proj.weight")):
            weights[name] = torch.zeros_like(weights[name])
    save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    return LocalEngine(str(path), device="cpu").load()


def turn_of(engine, guard: int, max_new_tokens: int = 400) -> AssistantTurn:
    runner = TurnRunner(engine, default_registry())
    options = ChatOptions(temperature=0.0, max_new_tokens=max_new_tokens, repetition_guard=guard)
    *_, last = runner.run(Conversation([UserTurn("Tell me about the sea.")]), options, threading.Event())
    return last.conversation.turns[-1]


def test_a_looping_model_is_stopped_with_a_notice_and_the_chat_goes_on(looping_engine):
    turn = turn_of(looping_engine, guard=4)
    assert turn.stats.stop_reason == "repetition", turn.raw[:200]
    assert turn.stats.generated_tokens < 400
    assert "kept repeating itself" in turn.notice and "Settings" in turn.notice
    assert len(turn.content) < len(turn.raw), "the loop is cut short on screen, kept whole in the raw output"
    # The conversation goes on: the next turn is answered as usual.
    runner = TurnRunner(looping_engine, default_registry())
    conversation = Conversation([UserTurn("Tell me about the sea."), turn, UserTurn("And the sky?")])
    *_, last = runner.run(conversation, ChatOptions(temperature=0.0, max_new_tokens=16), threading.Event())
    assert len(last.conversation.turns) == 4 and not last.error


def test_with_the_guard_off_the_same_reply_runs_to_the_limit(looping_engine):
    turn = turn_of(looping_engine, guard=0, max_new_tokens=200)
    assert turn.stats.stop_reason == "length" and turn.stats.generated_tokens == 200


def test_the_remote_engine_stops_a_loop_too(processor):
    """The OpenAI-compatible engine's assembler, fed a looping stream as a server sends it."""
    import time

    from openai.types.chat import ChatCompletionChunk

    from gemma4_ui.core.parsing import ReplyParser
    from gemma4_ui.engines.openai import ReplyAssembler

    reply = ReplyAssembler(ReplyParser(processor.tokenizer, ""), time.perf_counter(), guard=RepetitionGuard(4))
    for index in range(200):
        chunk = ChatCompletionChunk.model_validate({
            "id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"content": "many "}, "finish_reason": None}]})
        reply.feed(chunk)
        if reply.repeating:
            break
    assert reply.repeating and index < 60
    _, done = reply.finish(cancelled=False)
    assert done.stats.stop_reason == "repetition" and not done.tool_calls
