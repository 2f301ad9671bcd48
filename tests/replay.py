"""An engine that replays recorded Gemma 4 outputs through the real chat template (the
prompt is rendered for every round) and the real streaming parser. It stands in for the
model's sampling only, so the tool loop can be tested on exact, known model outputs.

`outputs` is a list (used in order) or a function of the rendered prompt (for several users
at once); `seconds_per_chunk` paces the reply like a slow model, so that Stop and New
conversation can be pressed in the middle of it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gemma4_ui.core.events import Done, ReplyStats
from gemma4_ui.core.parsing import ReplyParser
from gemma4_ui.core.prompt import model_inputs, template_text
from gemma4_ui.engines.base import Engine, GenerationRequest, ModelStatus


def parse_reply(tokenizer, output: str, prompt: str) -> Done:
    """Parse a complete output in one go (the same rules as streaming)."""
    parser = ReplyParser(tokenizer, prompt)
    parser.feed(output)
    return parser.finish()[1]


class ReplayEngine(Engine):
    def __init__(self, processor, outputs: list[str] | Callable[[str], str], chunk: int = 3,
                 seconds_per_chunk: float = 0.0):
        self.processor = processor
        self.outputs = outputs if callable(outputs) else list(outputs)
        self.chunk = chunk
        self.seconds_per_chunk = seconds_per_chunk
        self.prompts: list[str] = []
        self.status = ModelStatus("replay", "replay", "bundled", context_length=131072)

    def load(self) -> "ReplayEngine":
        return self

    def stream(self, request: GenerationRequest, cancel: threading.Event):
        prompt = template_text(self.processor, request.spec)
        self.prompts.append(prompt)
        inputs = model_inputs(self.processor, request.spec)
        output = self.outputs(prompt) if callable(self.outputs) else self.outputs.pop(0)
        parser = ReplyParser(self.processor.tokenizer, prompt)
        stats = ReplyStats(prompt_tokens=int(inputs["input_ids"].shape[-1]), time_to_first_token=0.0)
        for start in range(0, len(output), self.chunk):
            if cancel.is_set():
                stats.stop_reason = "cancelled"
                break
            time.sleep(self.seconds_per_chunk)
            yield from parser.feed(output[start:start + self.chunk])
            stats.generated_tokens += 1
        if not stats.stop_reason:
            stats.stop_reason = "tool_call" if output.endswith("<|tool_response>") else (
                "stop" if output.endswith(("<turn|>", "<eos>")) else "length")
        events, done = parser.finish(stats)
        yield from events
        yield done
