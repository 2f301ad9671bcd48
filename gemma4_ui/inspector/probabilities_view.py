"""The last reply coloured by how sure the model was of each token (red: unsure, green: sure),
with each token's top alternatives on hover or tap. The probabilities are recorded by the
engines (engines/probabilities.py) and kept with the conversation."""

from __future__ import annotations

import html

from gemma4_ui.core.conversation import AssistantTurn
from gemma4_ui.core.events import TokenProbability


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
