"""A prompt this machine cannot hold is refused before generation, with the reason in words;
a long prompt passes in chunks, so that its attention's memory grows with the prompt and not
with its square (engines/local/memory.py), on the bundled model."""

from __future__ import annotations

import threading

import pytest
from transformers import AutoConfig

from gemma4_ui.config import BUNDLED_MODEL
from gemma4_ui.core.events import Done, EngineError
from gemma4_ui.core.prompt import PromptSpec
from gemma4_ui.engines.base import GenerationRequest
from gemma4_ui.engines.local import memory
from gemma4_ui.engines.local.engine import LocalEngine

GIB = 1024 ** 3


@pytest.fixture(scope="module")
def config():
    return AutoConfig.from_pretrained(BUNDLED_MODEL)


def ask(text: str, max_new_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(PromptSpec([{"role": "user", "content": text}]), max_new_tokens=max_new_tokens,
                             temperature=0)


def test_in_chunks_the_prompt_pass_grows_with_the_prompt_not_its_square(config):
    one_pass = memory.prompt_memory_bytes(config, 125_008, 512, "float32", None)
    chunked = memory.prompt_memory_bytes(config, 125_008, 512, "float32", memory.PREFILL_CHUNK_TOKENS)
    assert one_pass > 100 * GIB  # what had the generation process killed
    assert chunked < 10 * GIB
    doubled = memory.prompt_memory_bytes(config, 250_016, 512, "float32", memory.PREFILL_CHUNK_TOKENS)
    assert doubled < 2.2 * chunked


def test_chunks_only_for_long_text_prompts():
    chunk = memory.PREFILL_CHUNK_TOKENS
    assert memory.prefill_chunk(chunk, {"input_ids"}, False) is None
    assert memory.prefill_chunk(chunk + 1, {"input_ids", "attention_mask"}, False) == chunk
    assert memory.prefill_chunk(chunk + 1, {"input_ids", "pixel_values"}, False) is None  # transformers cannot split
    assert memory.prefill_chunk(chunk + 1, {"input_ids"}, True) is None


def test_a_chunked_prompt_pass_gives_the_reply_of_one_pass(tiny_engine, monkeypatch):
    text = "Tell me about the lighthouse keeper and the storm. " * 60

    def reply() -> str:
        events = list(tiny_engine.stream(ask(text, 24), threading.Event()))
        assert isinstance(events[-1], Done), events[-1]
        assert events[-1].stats.prompt_tokens > 300
        return "".join(getattr(e, "text", "") for e in events)

    passes: list[int] = []  # the tokens of each forward pass of the model
    hook = tiny_engine.model.register_forward_pre_hook(
        lambda module, args, kwargs: passes.append(kwargs["input_ids"].shape[-1]), with_kwargs=True)
    try:
        monkeypatch.setattr(memory, "PREFILL_CHUNK_TOKENS", 10 ** 9)
        whole = reply()
        assert passes[0] > 300
        passes.clear()
        monkeypatch.setattr(memory, "PREFILL_CHUNK_TOKENS", 128)
        assert reply() == whole
        assert passes[:2] == [128, 128]
    finally:
        hook.remove()


def test_a_prompt_over_the_memory_limit_is_refused_in_words(config):
    free = memory.prompt_memory_bytes(config, 1000, 8, "float32", None)  # room for about 1,000 tokens
    # No prompt limit: the memory check is what refuses here.
    engine = LocalEngine("tiny", device="cpu", memory_available=free, max_prompt_tokens=0).load()
    short = list(engine.stream(ask("Hello!"), threading.Event()))
    assert isinstance(short[-1], Done)
    events = list(engine.stream(ask("The storm rolled over the lighthouse. " * 400), threading.Event()))
    assert len(events) == 1 and isinstance(events[0], EngineError)
    message = events[0].message
    assert message.startswith("The prompt is ") and "tokens; generating from it needs about" in message
    assert f"this machine has {free / GIB:.1f} GiB free, enough for a prompt of about" in message
    fits = int(message.split("enough for a prompt of about ")[1].split(" tokens")[0].replace(",", ""))
    assert 900 <= fits <= 1000
    assert message.endswith("Shorten the conversation, remove files, or start a new conversation.")


def test_the_systems_free_memory_is_read():
    free = memory.available_memory()
    assert free is None or free > 0
