"""What the token-probability view costs the local engine's throughput.

Three sides on the same model, prompt and settings (greedy, every reply exactly
`stream_tokens` long), interleaved: a bare `model.generate` with TextIteratorStreamer, the
app's `LocalEngine.stream` with the view closed (nothing recorded), and the same with the
view open (each step's probabilities and top alternatives recorded from generate's scores).

- closed ÷ bare is an upper bound on what the closed view costs: it also holds everything
  else the engine does (template, processor, parsing), and must stay within 2 %;
- open ÷ closed is what recording costs, within 10 %.
"""

from __future__ import annotations

import threading
import time

from .context import Context
from .harness import Figure, Section, Target, interleaved, paired
from .streaming import PROMPT, Timing, _same_work, bare_generate


def engine_reply(engine, max_new_tokens: int, record: bool) -> Timing:
    from gemma4_ui.core.events import Done
    from gemma4_ui.core.prompt import PromptSpec
    from gemma4_ui.engines.base import GenerationRequest

    requested, cpu = time.perf_counter(), time.process_time()
    request = GenerationRequest(PromptSpec([{"role": "user", "content": PROMPT}]), max_new_tokens, temperature=0,
                                token_probabilities=record)
    first = None
    for event in engine.stream(request, threading.Event()):
        if first is None and not isinstance(event, Done):
            first = time.perf_counter()
    assert isinstance(event, Done), f"the engine failed: {event}"
    recorded = event.token_probabilities
    assert (recorded is not None) == record and (not record or len(recorded) == event.stats.generated_tokens)
    return Timing(requested, first, time.perf_counter(), event.stats.generated_tokens, event.stats.prompt_tokens,
                  time.process_time() - cpu)


def token_probability_cost(ctx: Context) -> Section:
    engine, tokens = ctx.engine, ctx.sizes.stream_tokens
    sides = {
        "bare": lambda: bare_generate(engine, PROMPT, tokens),
        "closed": lambda: engine_reply(engine, tokens, record=False),
        "open": lambda: engine_reply(engine, tokens, record=True),
    }
    for side in sides.values():
        side()
    timings = interleaved(sides, 3 * ctx.runs)  # a 2 % target under ±15 % noise per run: many pairs
    _same_work(timings)
    ratio = lambda a, b: a / b  # noqa: E731
    per_second = {name: [t.tokens_per_second for t in runs] for name, runs in timings.items()}
    per_cpu = {name: [t.tokens_per_cpu_second for t in runs] for name, runs in timings.items()}
    return Section("token probabilities", [
        Figure(f"view closed: engine ÷ bare tokens/s ({tokens} tokens)", paired(per_second["closed"],
               per_second["bare"], ratio), target=Target("≥", 0.98),
               note="an upper bound: all the engine's work besides the view is in it too"),
        Figure("view closed: engine ÷ bare tokens per CPU-second", paired(per_cpu["closed"], per_cpu["bare"], ratio),
               target=Target("≥", 0.98)),
        Figure("view open ÷ view closed tokens/s", paired(per_second["open"], per_second["closed"], ratio),
               target=Target("≥", 0.90), note="probability and top 5 of every token, from generate's scores"),
        Figure("view open ÷ view closed tokens per CPU-second", paired(per_cpu["open"], per_cpu["closed"], ratio),
               target=Target("≥", 0.90)),
    ])
