"""Generation in a process of its own (engines/local/process.py), on the bundled model: the same
events as in the server's process, Stop that stops the child's work, several conversations at
once, and a child that dies or cannot load reported in words, with the app going on."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from gemma4_ui.config import BUNDLED_MODEL, ROOT, parse_settings
from gemma4_ui.core.events import Done, EngineError, TextDelta
from gemma4_ui.core.prompt import PromptSpec
from gemma4_ui.engines.base import GenerationRequest, ModelLoadError
from gemma4_ui.engines.local.engine import LocalEngine


def ask(max_new_tokens: int, probabilities: bool = False) -> GenerationRequest:
    spec = PromptSpec([{"role": "user", "content": "Tell me a story about a lighthouse."}])
    return GenerationRequest(spec, max_new_tokens=max_new_tokens, temperature=0, token_probabilities=probabilities)


def visible(events: list) -> list[tuple[str, str]]:
    """The events as the chat shows them: a Done left out (its timings differ from run to
    run), and consecutive deltas of one kind joined (where a stream cuts its text depends
    on timing: a slow reader gets two tokens in one delta)."""
    shown: list[tuple[str, str]] = []
    for event in events:
        if isinstance(event, Done):
            continue
        kind, text = type(event).__name__, getattr(event, "text", None)
        if text is not None and shown and shown[-1][0] == kind:
            shown[-1] = (kind, shown[-1][1] + text)
        else:
            shown.append((kind, text if text is not None else repr(event)))
    return shown


def idle_cpu_seconds(pid: int, seconds: float = 1.0) -> float:
    process = psutil.Process(pid)
    before = sum(process.cpu_times()[:2])
    time.sleep(seconds)
    return sum(process.cpu_times()[:2]) - before


def test_the_model_runs_in_a_child_process(tiny_process_engine):
    pid = tiny_process_engine.generation_pid
    assert pid != os.getpid() and pid in [child.pid for child in psutil.Process().children()]
    with pytest.raises(AttributeError, match="generation process"):
        tiny_process_engine.model  # noqa: B018 - the weights are not in this process
    assert tiny_process_engine.status.device == "cpu" and tiny_process_engine.status.dtype == "float32"
    assert tiny_process_engine.context_length and tiny_process_engine.modalities == {"text", "image", "audio", "video"}


def test_it_streams_what_the_engine_streams_in_the_servers_process(tiny_engine, tiny_process_engine):
    here = list(tiny_engine.stream(ask(48, probabilities=True), threading.Event()))
    there = list(tiny_process_engine.stream(ask(48, probabilities=True), threading.Event()))
    assert visible(there) == visible(here) and any(isinstance(e, TextDelta) for e in there)
    done_here, done_there = here[-1], there[-1]
    assert (done_there.stats.generated_tokens, done_there.stats.stop_reason, done_there.stats.prompt_tokens) == (
        done_here.stats.generated_tokens, done_here.stats.stop_reason, done_here.stats.prompt_tokens)
    assert done_there.token_probabilities == done_here.token_probabilities
    assert len(done_there.token_probabilities) == done_there.stats.generated_tokens


def test_stop_stops_the_childs_generate_before_the_stream_returns(tiny_process_engine):
    cancel = threading.Event()
    for event in tiny_process_engine.stream(ask(2000), cancel):
        if isinstance(event, TextDelta):
            cancel.set()
    assert event.stats.stop_reason == "cancelled" and event.stats.generated_tokens < 100
    # A generate left running would keep the child's core busy for the 2,000 tokens.
    assert idle_cpu_seconds(tiny_process_engine.generation_pid) < 0.3


def test_two_conversations_generate_at_once(tiny_engine, tiny_process_engine):
    expected = visible(list(tiny_engine.stream(ask(32), threading.Event())))
    results: dict[int, list] = {}

    def converse(n: int) -> None:
        results[n] = list(tiny_process_engine.stream(ask(32), threading.Event()))

    threads = [threading.Thread(target=converse, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(results) == [0, 1, 2]
    for events in results.values():  # greedy: each gets the whole reply, none a share of another's
        assert visible(events) == expected and events[-1].stats.stop_reason == "length"


def test_a_generation_process_that_dies_is_reported_and_replaced():
    engine = LocalEngine("tiny", device="cpu", separate_process=True).load()
    try:
        first = engine.generation_pid
        events = []
        for event in engine.stream(ask(2000), threading.Event()):
            events.append(event)
            if len(events) == 3:
                os.kill(first, signal.SIGKILL)  # out of memory, say
        assert isinstance(events[-1], EngineError)
        # The kernel's out-of-memory killer sends SIGKILL: the user reads that, not a bare exit code.
        assert events[-1].message.startswith("The generation process was killed (exit code -9, SIGKILL), most "
                                             "likely because this machine ran out of memory")
        again = list(engine.stream(ask(16), threading.Event()))
        assert isinstance(again[-1], Done) and again[-1].stats.generated_tokens == 16
        assert engine.generation_pid not in (first, os.getpid())
    finally:
        engine.close()


def hang_when_asked(model, tokenizer) -> None:
    """A test hook (LocalEngine's `prepare`, run in the child): while the file named by
    GEMMA4_TEST_HANG exists, the first generate removes it and stops the whole process
    (alive, but nothing in it runs: its beats stop); while GEMMA4_TEST_STALL's file exists,
    the first generate removes it and waits in Python for good (its beats go on); while
    GEMMA4_TEST_SLOW_LOAD's file exists, loading takes 8 s more."""
    slow = os.environ.get("GEMMA4_TEST_SLOW_LOAD")
    if slow and os.path.exists(slow):
        time.sleep(8)
    generate = model.generate

    def hanging(*args, **kwargs):
        flag = os.environ.get("GEMMA4_TEST_HANG")
        if flag and os.path.exists(flag):
            os.remove(flag)
            os.kill(os.getpid(), signal.SIGSTOP)
        flag = os.environ.get("GEMMA4_TEST_STALL")
        if flag and os.path.exists(flag):
            os.remove(flag)
            threading.Event().wait()
        return generate(*args, **kwargs)

    model.generate = hanging


def test_a_generation_process_that_hangs_is_killed_restarted_and_the_turn_says_so(tmp_path, monkeypatch):
    hang, slow = tmp_path / "hang", tmp_path / "slow-load"
    monkeypatch.setenv("GEMMA4_TEST_HANG", str(hang))
    monkeypatch.setenv("GEMMA4_TEST_SLOW_LOAD", str(slow))
    engine = LocalEngine("tiny", device="cpu", separate_process=True, prepare="test_generation_process:hang_when_asked",
                         heartbeat_timeout=3).load()
    try:
        first = engine.generation_pid
        hang.touch()
        started = time.monotonic()
        events = list(engine.stream(ask(16), threading.Event()))
        assert isinstance(events[-1], EngineError)
        assert events[-1].message == "The generation process stopped responding and was restarted; ask again."
        assert time.monotonic() - started < 15
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
        again = list(engine.stream(ask(16), threading.Event()))
        assert isinstance(again[-1], Done) and again[-1].stats.generated_tokens == 16
        assert engine.generation_pid not in (first, os.getpid())

        # Stop while the new process loads (here slowly): the turn ends at once, not when it is ready.
        hang.touch()
        slow.touch()
        assert isinstance(list(engine.stream(ask(16), threading.Event()))[-1], EngineError)  # a restart begins
        time.sleep(0.5)
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        started = time.monotonic()
        stopped = list(engine.stream(ask(16), cancel))
        assert time.monotonic() - started < 3, "Stop waited for the new process to load"
        assert isinstance(stopped[-1], Done) and stopped[-1].stats.stop_reason == "cancelled"
        slow.unlink()
    finally:
        engine.close()


def test_a_generation_process_stuck_in_python_is_killed_and_restarted(tmp_path, monkeypatch):
    stall = tmp_path / "stall"
    monkeypatch.setenv("GEMMA4_TEST_STALL", str(stall))
    engine = LocalEngine("tiny", device="cpu", separate_process=True, prepare="test_generation_process:hang_when_asked",
                         heartbeat_timeout=3, stall_timeout=3).load()
    try:
        first = engine.generation_pid
        # A long answer that makes progress is not taken for stuck, however long it runs.
        assert isinstance(list(engine.stream(ask(64), threading.Event()))[-1], Done)
        stall.touch()
        started = time.monotonic()
        events = list(engine.stream(ask(16), threading.Event()))
        assert isinstance(events[-1], EngineError)
        assert events[-1].message == "The generation process stopped responding and was restarted; ask again."
        assert time.monotonic() - started < 15
        again = list(engine.stream(ask(16), threading.Event()))
        assert isinstance(again[-1], Done) and again[-1].stats.generated_tokens == 16
        assert engine.generation_pid not in (first, os.getpid())
    finally:
        engine.close()


def test_weights_that_cannot_load_in_the_child_are_a_model_load_error(tmp_path):
    """A download that stopped short: the processor's files are there, the weights are not."""
    partial = tmp_path / "partial-download"
    shutil.copytree(BUNDLED_MODEL, partial, ignore=shutil.ignore_patterns("*.safetensors"))
    engine = LocalEngine(str(partial), device="cpu", separate_process=True)
    with pytest.raises(ModelLoadError, match="Could not load"):
        engine.load()


def test_the_child_ends_when_the_server_is_killed():
    script = textwrap.dedent("""
        import os
        from gemma4_ui.engines.local.engine import LocalEngine
        if __name__ == "__main__":
            engine = LocalEngine("tiny", device="cpu", separate_process=True).load()
            print(engine.generation_pid, flush=True)
            os._exit(0)  # as a SIGKILL would: no clean-up, no atexit
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=180,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = int(result.stdout.split()[-1])
    deadline = time.monotonic() + 15
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the generation process outlived the server"
        time.sleep(0.2)


def test_the_setting(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    monkeypatch.delenv("GEMMA4_GENERATION_PROCESS", raising=False)
    assert parse_settings([]).generation_process, "on by default"
    assert not parse_settings(["--no-generation-process"]).generation_process
    monkeypatch.setenv("GEMMA4_GENERATION_PROCESS", "0")
    assert not parse_settings([]).generation_process
    assert parse_settings(["--generation-process"]).generation_process
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")  # `spaces` forks a process per generation itself
    assert not parse_settings(["--generation-process"]).generation_process
    monkeypatch.delenv("SPACES_ZERO_GPU")
    assert LocalEngine.from_settings(parse_settings(["--model", "tiny", "--generation-process"]))._separate_process
