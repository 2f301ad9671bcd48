"""The contract every engine keeps (engines/base.py), run on each: the replay engine of the tool-loop
tests, the local engine on the bundled model (in this process and in a generation process
of its own), and the OpenAI-compatible engine against a real
`transformers serve`. A stream ends with exactly one Done or EngineError; Stop ends it with
stop reason "cancelled"; the stats are filled."""

from __future__ import annotations

import threading

import pytest
from replay import ReplayEngine

from gemma4_ui.config import BUNDLED_MODEL, Settings, parse_settings
from gemma4_ui.core.events import Done, EngineError, TextDelta, ThinkingDelta
from gemma4_ui.core.prompt import PromptSpec
from gemma4_ui.engines.base import ENGINES, Engine, GenerationRequest, build_engine, engine_class

CONTRACT_ENGINES = ["replay", "local", "local, generation process", "openai"]
LONG_REPLY = "Once upon a time, a lighthouse keeper counted the ships that passed. " * 4 + "<turn|>"


@pytest.fixture(params=CONTRACT_ENGINES)
def engine(request, processor) -> Engine:
    if request.param == "replay":
        return ReplayEngine(processor, [LONG_REPLY] * 2).load()
    if request.param == "local":
        return request.getfixturevalue("tiny_engine")
    if request.param == "local, generation process":
        return request.getfixturevalue("tiny_process_engine")
    port = request.getfixturevalue("server_port")
    settings = Settings(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model=str(BUNDLED_MODEL))
    return build_engine(settings).load()


def ask(max_new_tokens: int) -> GenerationRequest:
    spec = PromptSpec([{"role": "user", "content": "Tell me a story about a lighthouse."}])
    return GenerationRequest(spec, max_new_tokens=max_new_tokens, temperature=0)


def terminal(events: list) -> Done | EngineError:
    ends = [e for e in events if isinstance(e, (Done, EngineError))]
    assert len(ends) == 1, f"expected exactly one Done or EngineError, got {ends}"
    assert events[-1] is ends[0], "nothing may follow the end of the stream"
    return ends[0]


def test_every_registered_engine_is_covered_by_the_contract():
    assert set(ENGINES) <= set(CONTRACT_ENGINES)
    for name in ENGINES:
        assert issubclass(engine_class(name), Engine)


def test_backend_choices_come_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        parse_settings(["--backend", "nope"])
    message = capsys.readouterr().err
    assert "invalid choice: 'nope'" in message and all(repr(name) in message for name in ENGINES)


def test_a_stream_ends_with_one_done_and_filled_stats(engine):
    events = list(engine.stream(ask(8), threading.Event()))
    done = terminal(events)
    assert isinstance(done, Done), done
    stats = done.stats
    assert stats.prompt_tokens > 0 and stats.generated_tokens > 0
    assert stats.time_to_first_token is not None and stats.duration >= stats.time_to_first_token
    assert stats.stop_reason in ("stop", "length", "tool_call")
    assert engine.status.describe()


def test_cancel_ends_the_stream_with_stop_reason_cancelled(engine):
    cancel = threading.Event()
    events = []
    for event in engine.stream(ask(200), cancel):
        events.append(event)
        if isinstance(event, (TextDelta, ThinkingDelta)):
            cancel.set()  # Stop, as the UI's button does
    done = terminal(events)
    assert isinstance(done, Done) and done.stats.stop_reason == "cancelled"
    assert done.stats.generated_tokens < 200


def test_cancel_before_the_first_token_still_ends_with_one_done(engine):
    cancel = threading.Event()
    cancel.set()
    done = terminal(list(engine.stream(ask(50), cancel)))
    assert isinstance(done, Done) and done.stats.stop_reason == "cancelled"
