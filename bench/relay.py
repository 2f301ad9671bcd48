"""Relay: the app's server CPU time per token it relays from a remote OpenAI-compatible
server, with 1, 8 and 32 replies streaming at once.

The app runs as `python app.py --backend openai --base-url ...` would (bench/app_server.py,
BENCH_REMOTE_URL), in front of `bench/openai_backend.py`, a real HTTP server in a process of
its own that streams each reply one token a chunk at a fixed rate (a stand-in for vLLM). The
app's generation slot is widened for the run (GEMMA4_GPU_CONCURRENCY), as an operator serving
a room of users from vLLM sets it, so that every stream runs at once. The clients (plain HTTP,
`http_client.ChatClient`, each its own session) run in the benchmark's process; only the app
server's process is measured: its CPU time (user + system, all threads) from before the
requests to after the last reply, over the tokens the server relayed (as its engine's stats
count them). That covers everything the server does per token: the OpenAI client reading the
stream, parsing, rendering the live part of the chat, Gradio's diff and sending each update.

One stream is measured twice in every run (an A/A comparison: two identical sides), so the
spread between them shows what this machine's noise alone does to the figure; the 32-stream
figure should stay within it (the cost per token flat in the number of streams).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from .app_server import ROOT, AppProcess
from .context import Context
from .harness import Figure, Section, Target, interleaved, paired
from .http_client import ChatClient, reply_text
from .openai_backend import READY as BACKEND_READY

TOKENS_PER_SECOND = 50.0  # per stream, as a served model streams to each user
STREAMS = (1, 8, 32)
REPLY_TOKENS = 500  # per stream: the turn's own fixed costs then weigh little per token
QUICK_REPLY_TOKENS = 60
PROMPT = "Write a long story."
TARGET_MS = 0.15


class OpenAIBackend:
    """bench/openai_backend.py in a process of its own; `url` is its /v1 base."""

    def __init__(self, workdir: Path, tokens_per_second: float, model: str):
        from tests.conftest import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._command = [sys.executable, "-m", "bench.openai_backend", "--port", str(self.port),
                         "--tokens-per-second", str(tokens_per_second), "--model", model]
        self._log_file = workdir / f"backend-{self.port}.log"

    def __enter__(self) -> "OpenAIBackend":
        self._log = self._log_file.open("w")
        self._process = subprocess.Popen(self._command, cwd=ROOT, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        for line in self._process.stdout:
            if line.strip() == BACKEND_READY:
                return self
        raise RuntimeError(f"the backend did not start:\n{self._log_file.read_text()[-3000:]}")

    def __exit__(self, *exc) -> None:
        self._process.terminate()
        self._process.wait(timeout=20)
        self._log.close()


def server_cpu_seconds(pid: int) -> float:
    """CPU time of the app server's own process (all its threads), not of its children."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def relay_streams(app: AppProcess, clients: list[ChatClient], tokens: int) -> float:
    """`len(clients)` replies of `tokens` tokens at once, each in its client's own session (a
    user who goes on chatting: a new session's set-up is not counted per token); the server's
    CPU milliseconds per relayed token."""
    before_rounds, failures = len(app.recorded_rounds()), []

    def one(client: ChatClient) -> None:
        try:
            reply = client.chat(PROMPT, session_hash=session_of(client), max_new_tokens=tokens)
            if not reply_text(reply.final_chat):
                failures.append("an empty reply")
        except Exception as err:  # noqa: BLE001 - reported below, with the others
            failures.append(repr(err))

    threads = [threading.Thread(target=one, args=(client,)) for client in clients]
    cpu = server_cpu_seconds(app.pid)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = server_cpu_seconds(app.pid) - cpu
    assert not failures, f"{len(failures)} of {len(clients)} streams failed: {failures[:3]}"
    rounds = app.recorded_rounds()[before_rounds:]
    relayed = sum(r["generated_tokens"] for r in rounds)
    assert len(rounds) == len(clients) and relayed == tokens * len(clients), \
        f"expected {len(clients)} replies of {tokens} tokens, the server recorded {[r['generated_tokens'] for r in rounds]}"
    return 1000 * cpu / relayed


def session_of(client: ChatClient) -> str:
    if not hasattr(client, "bench_session"):
        client.bench_session = uuid.uuid4().hex[:11]
    return client.bench_session


def relay_cpu(ctx: Context) -> Section:
    from gemma4_ui.config import BUNDLED_MODEL

    tokens = QUICK_REPLY_TOKENS if ctx.quick else REPLY_TOKENS
    streams = (1, 4) if ctx.quick else STREAMS
    backend = ctx.stack.enter_context(OpenAIBackend(ctx.workdir, TOKENS_PER_SECOND, str(BUNDLED_MODEL)))
    app = ctx.fresh_app({"BENCH_REMOTE_URL": backend.url, "GEMMA4_GPU_CONCURRENCY": str(2 * max(streams)),
                         **({"BENCH_PROFILE": os.environ["BENCH_PROFILE"]} if os.environ.get("BENCH_PROFILE") else {})})
    clients = [ChatClient(app.url) for _ in range(max(streams))]
    try:
        sides = {"1 stream (A)": lambda: relay_streams(app, clients[:1], tokens),
                 "1 stream (A')": lambda: relay_streams(app, clients[:1], tokens)}
        sides.update({f"{n} streams": (lambda n=n: relay_streams(app, clients[:n], tokens)) for n in streams[1:]})
        relay_streams(app, clients[:max(streams)], min(tokens, 40))  # warm-up: first calls pay for lazy imports
        started = time.perf_counter()
        ms = interleaved(sides, ctx.runs)
        print(f"[bench] relay: {time.perf_counter() - started:.0f} s measured", file=sys.stderr, flush=True)
    finally:
        for client in clients:
            client.close()
    one = [(a + b) / 2 for a, b in zip(ms["1 stream (A)"], ms["1 stream (A')"], strict=True)]
    spread = max(max(a / b, b / a) for a, b in zip(ms["1 stream (A)"], ms["1 stream (A')"], strict=True))
    most = f"{streams[-1]} streams"
    note = (f"server process CPU (user + system) ÷ tokens relayed; replies of {tokens} tokens at "
            f"{TOKENS_PER_SECOND:g} tokens/s each, from bench/openai_backend.py")
    figures = [Figure("relay CPU per token, 1 stream", one, "ms", Target("≤", TARGET_MS), note=note, digits=3)]
    figures += [Figure(f"relay CPU per token, {n} streams", ms[f"{n} streams"], "ms", Target("≤", TARGET_MS),
                       digits=3) for n in streams[1:]]
    figures += [
        Figure("relay A/A: 1 stream ÷ 1 stream", paired(ms["1 stream (A)"], ms["1 stream (A')"], lambda a, b: a / b),
               note="two identical sides: what noise alone does"),
        Figure(f"relay {most} ÷ 1 stream, CPU per token", paired(ms[most], one, lambda a, b: a / b),
               target=Target("≤", round(spread, 2)),
               note="flat: within the A/A spread (the target is the largest A/A ratio of the run, either way)"),
    ]
    return Section("relay", figures)
