"""An engine that replays recorded Gemma 4 outputs through the real chat template (the
prompt is rendered for every round) and the real streaming parser. It stands in for the
model's sampling only, so the tool loop can be tested on exact, known model outputs."""

from __future__ import annotations

import threading

from gemma4_ui.engine import Engine, GenerationRequest, ModelStatus
from gemma4_ui.events import ReplyStats
from gemma4_ui.parsing import ReplyParser
from gemma4_ui.prompt import model_inputs, template_text


class ReplayEngine(Engine):
    def __init__(self, processor, outputs: list[str], chunk: int = 3):
        self.processor = processor
        self.outputs = list(outputs)
        self.chunk = chunk
        self.prompts: list[str] = []
        self.status = ModelStatus("replay", "replay", "bundled", context_length=131072)

    def load(self) -> "ReplayEngine":
        return self

    def stream(self, request: GenerationRequest, cancel: threading.Event):
        prompt = template_text(self.processor, request.spec)
        self.prompts.append(prompt)
        inputs = model_inputs(self.processor, request.spec)
        output = self.outputs.pop(0)
        parser = ReplyParser(self.processor.tokenizer, prompt)
        stats = ReplyStats(prompt_tokens=int(inputs["input_ids"].shape[-1]), time_to_first_token=0.0)
        for start in range(0, len(output), self.chunk):
            if cancel.is_set():
                stats.stop_reason = "cancelled"
                break
            yield from parser.feed(output[start:start + self.chunk])
            stats.generated_tokens += 1
        if not stats.stop_reason:
            stats.stop_reason = "tool_call" if output.endswith("<|tool_response>") else (
                "stop" if output.endswith(("<turn|>", "<eos>")) else "length")
        events, done = parser.finish(stats)
        yield from events
        yield done
