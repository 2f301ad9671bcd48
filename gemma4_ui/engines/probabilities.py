"""How sure the model was of each token it wrote: the probability of every generated token and
its top alternatives, recorded while `generate` runs (inspector/probabilities_view.py draws
the reply coloured by it).

Local engine: `generate(output_scores=True)` hands its scores (the logits after the logits
processors and warpers: temperature, top-k, top-p, so the distribution each token was drawn
from) to the stopping criteria after every forward pass of the model: one step per token, or,
with an MTP drafter, as many steps as the verification pass emitted tokens (the drafts it kept
and its own next one). `ProbabilityRecorder` reads every step it has not read yet, pairs it
with the token that step emitted, keeps the token's probability and the top alternatives on
the device as fresh tensors of a few numbers, and releases the steps: generate would
otherwise keep a vocabulary of floats per token (1 MB a step on the real model). Nothing of
this runs unless the view is open.

Remote engines: the OpenAI API's `logprobs` / `top_logprobs`, where the server returns them.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from gemma4_ui.core.events import TokenProbability

log = logging.getLogger(__name__)

TOP_ALTERNATIVES = 5


@dataclass
class RecordedSteps:
    """Plain lists, one entry per generated token (picklable: on ZeroGPU they come back from the
    GPU process). `ids`: the token each entry belongs to, as generate emitted it."""

    ids: list[int]
    chosen: list[float]
    top_ids: list[list[int]]
    top_probabilities: list[list[float]]


def recorder():
    """A stopping criterion that never stops generation and records each token's probabilities."""
    import torch
    from transformers import StoppingCriteria

    class ProbabilityRecorder(StoppingCriteria):
        def __init__(self):
            self._read = 0  # steps of generate's scores already recorded
            self._ids, self._chosen, self._top_values, self._top_ids = [], [], [], []

        def __call__(self, input_ids, scores, **kwargs):
            # A verification pass adds a step for each token it emitted: the last tokens of
            # input_ids are theirs, in order (reading only the newest step would pair one
            # probability with a pass of several tokens).
            steps = scores[self._read:]
            self._read = len(scores)
            if not steps:
                return False
            ids = input_ids[0, -len(steps):].clone()  # a copy: a view would keep all of input_ids
            probabilities = torch.stack([step[0] for step in steps]).float().softmax(dim=-1)
            # gather and topk make new tensors of a few numbers: indexing a probability out
            # would be a view that keeps the whole vocabulary's softmax alive.
            self._ids.append(ids)
            self._chosen.append(probabilities.gather(-1, ids[:, None]).squeeze(-1))
            top = probabilities.topk(min(TOP_ALTERNATIVES, probabilities.shape[-1]))
            self._top_values.append(top.values)
            self._top_ids.append(top.indices)
            # The steps are read: let their memory go. A pass's steps are views of one tensor
            # of its logits, which lives on while any of them holds it.
            for step in steps:
                step.set_()
            return False

        def result(self) -> RecordedSteps:
            if not self._chosen:
                return RecordedSteps([], [], [], [])
            return RecordedSteps(torch.cat(self._ids).tolist(), torch.cat(self._chosen).tolist(),
                                 torch.cat(self._top_ids).tolist(), torch.cat(self._top_values).tolist())

    return ProbabilityRecorder()


def from_generate(tokenizer, token_ids: list[int], steps: RecordedSteps) -> list[TokenProbability]:
    """The generated tokens with their recorded probabilities and alternatives, each labelled
    by the part of the reply it belongs to. Only tokens whose recorded step is their own are
    given one: a probability on the wrong token would colour the reply falsely."""
    count = 0
    for emitted, recorded in zip(token_ids, steps.ids):
        if emitted != recorded:
            log.warning("token probabilities stop at token %d: recorded for token %d, emitted %d",
                        count, recorded, emitted)
            break
        count += 1
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
