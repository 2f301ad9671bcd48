"""How sure the model was of each token it wrote: the probability of every generated token and
its top alternatives, recorded while `generate` runs (inspector/probabilities_view.py draws
the reply coloured by it).

Local engine: `generate(output_scores=True)` hands every step's scores (the logits after the
logits processors and warpers: temperature, top-k, top-p, so the distribution the token was
drawn from) to the stopping criteria as it makes them. `ProbabilityRecorder` reads each step
there, keeps the chosen token's probability and the top alternatives on the device, and
releases the step's scores: generate would otherwise keep a vocabulary of floats per token
(1 MB a step on the real model). Nothing of this runs unless the view is open.

Remote engines: the OpenAI API's `logprobs` / `top_logprobs`, where the server returns them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gemma4_ui.core.events import TokenProbability

TOP_ALTERNATIVES = 5


@dataclass
class RecordedSteps:
    """Plain lists (picklable: on ZeroGPU they come back from the GPU process)."""

    chosen: list[float]
    top_ids: list[list[int]]
    top_probabilities: list[list[float]]


def recorder():
    """A stopping criterion that never stops generation and records each step's probabilities."""
    import torch
    from transformers import StoppingCriteria

    class ProbabilityRecorder(StoppingCriteria):
        def __init__(self):
            self._chosen, self._top_values, self._top_ids = [], [], []

        def __call__(self, input_ids, scores, **kwargs):
            step = scores[-1]
            probabilities = step[0].float().softmax(dim=-1)
            self._chosen.append(probabilities[input_ids[0, -1]])
            top = probabilities.topk(min(TOP_ALTERNATIVES, probabilities.shape[-1]))
            self._top_values.append(top.values)
            self._top_ids.append(top.indices)
            step.set_()  # the step's scores are read: let their memory go
            return False

        def result(self) -> RecordedSteps:
            if not self._chosen:
                return RecordedSteps([], [], [])
            return RecordedSteps(torch.stack(self._chosen).tolist(), torch.stack(self._top_ids).tolist(),
                                 torch.stack(self._top_values).tolist())

    return ProbabilityRecorder()


def from_generate(tokenizer, token_ids: list[int], steps: RecordedSteps) -> list[TokenProbability]:
    """The generated tokens with their recorded probabilities and alternatives, each labelled
    by the part of the reply it belongs to."""
    count = min(len(token_ids), len(steps.chosen))
    ids = set(token_ids[:count]) | {i for row in steps.top_ids[:count] for i in row}
    text = {i: tokenizer.decode([i], skip_special_tokens=False) for i in ids}
    tokens = [
        TokenProbability(token_ids[n], text[token_ids[n]], steps.chosen[n], alternatives=[
            (text[i], p) for i, p in zip(steps.top_ids[n], steps.top_probabilities[n])])
        for n in range(count)
    ]
    label_kinds(tokenizer, tokens)
    return tokens


def from_openai(entries, kind: str = "answer") -> list[TokenProbability]:
    """Tokens from a chat-completions chunk's `choices[0].logprobs.content` entries; `kind`:
    the part of the reply the chunk carried (the server has parsed thought and calls out)."""
    tokens = []
    for entry in entries:
        alternatives = [(alt.token, math.exp(alt.logprob)) for alt in (entry.top_logprobs or [])]
        tokens.append(TokenProbability(None, entry.token, math.exp(entry.logprob), kind, alternatives))
    return tokens


def label_kinds(tokenizer, tokens: list[TokenProbability]) -> None:
    """Thought (inside the channel markers), call (inside the tool-call markers), control
    (a special token) or answer, from the tokenizer's own marker tokens."""
    opens = {getattr(tokenizer, "soc_token", None): "thought", getattr(tokenizer, "stc_token", None): "call"}
    closes = {getattr(tokenizer, "eoc_token", None), getattr(tokenizer, "etc_token", None)}
    special = set(tokenizer.all_special_tokens)
    inside = "answer"
    for token in tokens:
        if token.text in opens:
            token.kind, inside = "control", opens[token.text]
        elif token.text in closes:
            token.kind, inside = "control", "answer"
        elif token.text in special:
            token.kind = "control"
        else:
            token.kind = inside
