"""How sure the model was of each token it wrote: the probability of every generated token and
its top alternatives, recorded while `generate` runs, and drawn as the reply coloured by it.

Local engine: `generate(output_scores=True)` hands every step's scores (the logits after the
logits processors and warpers: temperature, top-k, top-p, so the distribution the token was
drawn from) to the stopping criteria as it makes them. `ProbabilityRecorder` reads each step
there, keeps the chosen token's probability and the top alternatives on the device, and
releases the step's scores: generate would otherwise keep a vocabulary of floats per token
(1 MB a step on the real model). Nothing of this runs unless the view is open.

Remote engines: the OpenAI API's `logprobs` / `top_logprobs`, where the server returns them.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

TOP_ALTERNATIVES = 5


@dataclass
class TokenProbability:
    id: int | None  # None where the server names tokens by text only
    text: str
    probability: float
    kind: str = "answer"  # "thought", "answer", "call" or "control"
    alternatives: list[tuple[str, float]] = field(default_factory=list)  # best first


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


# -- the view ----------------------------------------------------------------------------------------

def _colour(probability: float) -> str:
    """Red (unsure) through yellow to green (sure)."""
    return f"hsla({120 * max(0.0, min(1.0, probability)):.0f}, 85%, 45%, 0.35)"


def _alternatives_table(token: TokenProbability) -> str:
    rows = "".join(
        f"<tr{' class=tp-picked' if text == token.text else ''}><td><code>{html.escape(repr(text)[1:-1])}</code></td>"
        f"<td>{p:.2%}</td></tr>" for text, p in token.alternatives)
    return f"<span class='tp-alt' role='tooltip'><table>{rows}</table></span>"


def _token_span(token: TokenProbability) -> str:
    shown = html.escape(token.text) or "∅"
    identity = f" · id {token.id}" if token.id is not None else ""
    return (f"<span class='tp tp-{token.kind}' tabindex='0' data-p='{token.probability:.6f}' "
            f"style='background:{_colour(token.probability)}' "
            f"title='{token.probability:.2%} · {token.kind}{identity}'>{shown}{_alternatives_table(token)}</span>")


def view_html(sections: list[tuple[str, list[TokenProbability]]], note: str = "") -> str:
    """The tokens of each section (one per generation round of the reply), coloured by their
    probability; hovering or tapping a token shows its top alternatives."""
    parts = []
    if note:
        parts.append(f"<p class='tp-note'>{html.escape(note)}</p>")
    for title, tokens in sections:
        if not tokens:
            continue
        mean = sum(t.probability for t in tokens) / len(tokens)
        parts.append(f"<div class='tp-section'><div class='tp-title'>{html.escape(title)} · {len(tokens)} tokens, "
                     f"mean probability {mean:.1%}</div><div class='tp-tokens'>"
                     + "".join(_token_span(t) for t in tokens) + "</div></div>")
    legend = ("<div class='tp-legend'><span style='background:" + _colour(0.05) + "'>unsure</span>"
              "<span style='background:" + _colour(0.5) + "'>50%</span><span style='background:" + _colour(1.0)
              + "'>sure</span> · <span class='tp-thought'>thought</span> <span class='tp-call'>call</span> "
              "<span class='tp-control'>control</span></div>")
    return f"<div class='token-probabilities'>{legend}{''.join(parts)}</div>"


def last_reply_html(conversation, unavailable: str = "") -> str:
    """The view for the conversation's last reply: one section per generation round.
    `unavailable` says why the engine gives no probabilities, if it cannot."""
    from gemma4_ui.core.conversation import AssistantTurn

    turn = conversation.turns[-1] if conversation.turns else None
    if not isinstance(turn, AssistantTurn):
        return view_html([], unavailable or "No reply yet: the next reply's tokens appear here, coloured by how "
                                            "probable the model found each one.")
    sections = [(f"Round {n + 1}: thought and tool calls", r.token_probabilities or []) for n, r in enumerate(turn.rounds)]
    sections.append(("Answer", turn.token_probabilities or []))
    if not any(tokens for _, tokens in sections):
        return view_html([], unavailable or "This reply was written while this view was closed, so its probabilities "
                                            "were not recorded (that costs nothing). Ask again (🔄) to see them.")
    return view_html(sections)


CSS = """
.token-probabilities { font-size: 0.9em; padding-bottom: 9em; }
.tp-tokens { font-family: var(--font-mono); white-space: pre-wrap; word-break: break-word; line-height: 1.9; }
.tp { position: relative; border-radius: 3px; padding: 1px 0; cursor: help; }
.tp-thought { font-style: italic; }
.tp-call { text-decoration: underline dotted; }
.tp-control { opacity: 0.6; font-size: 0.85em; }
.tp-alt { display: none; position: absolute; z-index: 20; left: 0; top: 1.7em; background: var(--background-fill-primary);
  border: 1px solid var(--border-color-primary); border-radius: 4px; padding: 2px 6px; white-space: nowrap;
  font-style: normal; box-shadow: 0 2px 8px rgba(0,0,0,0.25); max-width: min(24em, 80vw); overflow: hidden; }
.tp-alt code { white-space: pre-wrap; word-break: break-all; }
.tp:hover > .tp-alt, .tp:focus > .tp-alt { display: block; }
.tp-alt td { padding: 0 6px; font-size: 0.9em; }
.tp-alt .tp-picked td { font-weight: bold; }
.tp-title { font-weight: 600; margin: 8px 0 2px; }
.tp-legend span { padding: 0 4px; margin-right: 2px; border-radius: 3px; }
.tp-note { font-style: italic; }
"""
