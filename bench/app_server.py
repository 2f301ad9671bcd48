"""The real app on the bundled tiny model, in a process of its own, as the benchmarks see it.

    python -m bench.app_server --port 7861 --stats-file /tmp/stats.jsonl

The server runs in its own process so that the measuring client (gradio_client, an HTTP
client, Chromium) does not share its interpreter lock: a client in the same process would
slow the server down and be counted as app overhead. Two benchmark-only settings, both
applied outside the app's code:

- every reply runs to `max_new_tokens` (EOS suppressed, as `min_new_tokens` does), so the
  app and a bare `generate` produce the same number of tokens whatever the weights say;
- each finished generation round appends its `ReplyStats` to `--stats-file`, so the
  benchmark knows exactly how many tokens the server generated.

SIGUSR1 makes the server collect garbage and hand freed memory back to the system, so that
its resident memory shows what is still in use (the memory benchmark sends it).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY = "BENCH_APP_READY"
SCRIPTED_TOKENS = "BENCH_SCRIPTED_TOKENS"  # replies are the first N tokens of a markdown text
CHAT_RENDERING = "BENCH_CHAT_RENDERING"  # JSON: the Chatbot's rendering options instead of the app's
UPDATES_PER_SECOND = "BENCH_UPDATES_PER_SECOND"  # the streamed updates' rate limit instead of the app's
# The chat as the app streamed it before: the whole chat re-sent into one Chatbot on every
# update (paced to 4% of the time), and every token of layer 3 coloured.
ONE_CHATBOT = "BENCH_ONE_CHATBOT"
# An OpenAI-compatible server's URL: the app relays its model (`--backend openai`) instead of
# running the bundled one (bench/openai_backend.py stands in for vLLM).
REMOTE_URL = "BENCH_REMOTE_URL"
# A file: the server's own Python work is profiled (every thread, cProfile) and the stats
# written there when it is terminated, to see where its CPU time goes.
PROFILE = "BENCH_PROFILE"
# One intra-op thread for the tiny model, in every process that runs it. With two threads on
# this 2-core machine, OpenMP spins against any other job and the model itself becomes 3-5x
# slower and erratic (measured: 18-38 tok/s with 2 threads, 94-138 with 1, side by side).
TORCH_THREADS = 1


def generate_to_max_length(model) -> None:
    """Make every `generate` call on `model` run to its max_new_tokens (EOS suppressed)."""
    generate = model.generate

    def fixed_length_generate(*args, **kwargs):
        kwargs.setdefault("min_new_tokens", kwargs.get("max_new_tokens"))
        return generate(*args, **kwargs)

    model.generate = fixed_length_generate


def prepare_model(model, tokenizer) -> None:
    """The benchmark's changes to the model, made where it is loaded (the app generates in a
    process of its own): every reply to max_new_tokens; with BENCH_SCRIPTED_TOKENS, replies
    held to a script; SIGUSR1 handled there too (the memory benchmark reads both processes)."""
    generate_to_max_length(model)
    if os.environ.get(SCRIPTED_TOKENS):  # replies with structure: see scripted_reply.py
        from .scripted_reply import hold_to_script

        hold_to_script(model, tokenizer, int(os.environ[SCRIPTED_TOKENS]))
    signal.signal(signal.SIGUSR1, release_free_memory)


def tiny_engine(fixed_length: bool = True, separate_process: bool = False, max_prompt_tokens: int | None = None):
    """The bundled model through the app's LocalEngine on the CPU, loaded (`max_prompt_tokens`
    as --max-prompt-tokens takes it)."""
    import torch

    from gemma4_ui.engines.local.engine import LocalEngine

    torch.set_num_threads(TORCH_THREADS)  # the generation process takes the same number
    prepare = "bench.app_server:prepare_model" if fixed_length else None
    return LocalEngine("tiny", device="cpu", separate_process=separate_process, prepare=prepare,
                       max_prompt_tokens=max_prompt_tokens).load()


def recording_engine(engine, stats_file: Path):
    """`engine`, plus one JSON line in `stats_file` per generation round."""
    from gemma4_ui.core.events import Done
    from gemma4_ui.engines.base import Engine

    class RecordingEngine(Engine):
        modalities = engine.modalities
        status = engine.status
        processor = engine.processor

        def load(self):
            return self  # `engine` is loaded

        def stream(self, request, cancel) -> Iterator:
            for event in engine.stream(request, cancel):
                if isinstance(event, Done):
                    with stats_file.open("a") as out:
                        out.write(json.dumps(asdict(event.stats)) + "\n")
                yield event

    return RecordingEngine()


def release_free_memory(*_signal) -> None:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc keeps freed blocks mapped unless asked


def serve(port: int, stats_file: Path) -> None:
    from gemma4_ui.config import parse_settings
    from gemma4_ui.web import layout, pacing
    from gemma4_ui.web.app import build_ui, enable_queue, page_options
    from gemma4_ui.web.handlers import turns as turn_handlers
    from gemma4_ui.web.handlers.shared import SharedChatHandlers

    if os.environ.get(REMOTE_URL):  # as `python app.py --backend openai --base-url URL` takes them
        from gemma4_ui.config import BUNDLED_MODEL
        from gemma4_ui.engines.base import build_engine

        # The backend serves a model named as the bundled one's folder: the app reads its
        # processor there, as it reads a served model's own where it can.
        settings = parse_settings(["--backend", "openai", "--base-url", os.environ[REMOTE_URL], "--model",
                                   str(BUNDLED_MODEL), "--max-new-tokens-cap", "8192"])
        local = build_engine(settings).load()
    else:  # the app's settings as `python app.py --model tiny` takes them (GEMMA4_* variables too)
        settings = parse_settings(["--model", "tiny", "--max-new-tokens-cap", "8192"])
        local = tiny_engine(separate_process=settings.generation_process, max_prompt_tokens=settings.max_prompt_tokens)
    if os.environ.get(CHAT_RENDERING):  # the Chatbot as another version of the app sets it up
        layout.CHAT_RENDERING = json.loads(os.environ[CHAT_RENDERING])
    if os.environ.get(UPDATES_PER_SECOND):  # read by the pacer at each update
        pacing.MAX_UPDATES_PER_SECOND = float(os.environ[UPDATES_PER_SECOND])
    if os.environ.get(ONE_CHATBOT):
        from gemma4_ui.inspector import expanded_view
        from gemma4_ui.web import display

        class WholeChat(display.StreamingRender):
            def __call__(self, conversation, live=None, notice=""):
                return display.render(conversation, live, notice), []

        turn_handlers.StreamingRender = WholeChat
        pacing.MAX_UPDATE_SHARE = 0.04
        expanded_view.MAX_COLOURED = 10**9
    engine = recording_engine(local, stats_file)
    demo = enable_queue(build_ui(SharedChatHandlers(engine, settings)), settings.gpu_concurrency)
    if os.environ.get(PROFILE):  # before launch, which starts the server's threads
        profile_every_thread(Path(os.environ[PROFILE]))
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **page_options(),
                max_file_size=int(settings.limits.max_file_mb * 1024 * 1024))
    signal.signal(signal.SIGUSR1, release_free_memory)
    print(READY, flush=True)
    while True:  # serve until terminated; signal handlers run here, in the main thread
        signal.pause()


def profile_every_thread(out: Path) -> None:
    """Profile the server's Python work in every thread (the event loop's and the workers'),
    from now until it is terminated; the stats of all threads, merged, go to `out`."""
    import cProfile
    import pstats
    import threading

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_in_this_thread(*_args):  # a new thread's first call: its own profiler replaces this hook
        profile = cProfile.Profile(time.thread_time)  # CPU time: waits for the GIL or a socket are not work
        with lock:
            profiles.append(profile)
        profile.enable()

    threading.setprofile(start_in_this_thread)  # every thread started from now on (call before launch)
    main_profile = cProfile.Profile(time.thread_time)
    main_profile.enable()
    profiles.append(main_profile)

    def write(*_signal) -> None:
        with lock:
            stats = pstats.Stats()
            for profile in profiles:
                profile.disable()
                profile.create_stats()
                if profile.stats:  # a thread that made no call has none
                    stats.add(profile)
        stats.dump_stats(str(out))
        os._exit(0)

    signal.signal(signal.SIGTERM, write)


class AppProcess:
    """Start the app in a child process; `url`, `pid` and the stats it records."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None, startup_timeout: float = 180.0):
        from tests.conftest import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.stats_file = workdir / f"stats-{self.port}.jsonl"
        self.log_file = workdir / f"server-{self.port}.log"
        self._env = env or {}
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "AppProcess":
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1",
               **self._env}
        command = [sys.executable, "-m", "bench.app_server", "--port", str(self.port), "--stats-file",
                   str(self.stats_file)]
        self._log = self.log_file.open("w")
        self._process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self._log,
                                         text=True)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        for line in self._process.stdout:
            if line.strip() == READY:
                return
            if time.monotonic() > deadline:
                break
        raise RuntimeError(f"the app did not start; see {self.log_file}:\n{self.log_file.read_text()[-3000:]}")

    def __exit__(self, *exc) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._log.close()

    @property
    def pid(self) -> int:
        return self._process.pid

    def _processes(self) -> list:
        """The server and the processes it started (the generation process)."""
        import psutil

        server = psutil.Process(self.pid)
        return [server, *server.children(recursive=True)]

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time used so far, all threads: (the server with its generation process, the
        process that runs the model). With generation in the server's process, both are its."""
        processes = self._processes()
        seconds = [sum(process.cpu_times()[:2]) for process in processes]
        generating = [used for process, used in zip(processes[1:], seconds[1:])
                      if "spawn_main" in " ".join(process.cmdline())]  # not the resource tracker
        return sum(seconds), generating[0] if generating else seconds[0]

    def resident_bytes(self) -> int:
        """Resident memory of the server and its generation process, once garbage is
        collected and freed memory handed back."""
        processes = self._processes()
        for process in processes:
            process.send_signal(signal.SIGUSR1)
        time.sleep(1.0)  # the handler runs between bytecodes of the main thread
        return sum(process.memory_info().rss for process in processes)

    def recorded_rounds(self) -> list[dict]:
        """Every generation round's stats so far, oldest first."""
        if not self.stats_file.exists():
            return []
        return [json.loads(line) for line in self.stats_file.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stats-file", type=Path, required=True)
    args = parser.parse_args(argv)
    serve(args.port, args.stats_file)


if __name__ == "__main__":
    main()
