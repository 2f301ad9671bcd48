"""What differs in what the model received, between two answers to the same turn (Compare):
each side's token counts per modality, and a unified diff of the two raw templates (layer 2).

The counts come from the inspector's own counting (layers.count_tokens on the processor's
real expansion), so a different image budget shows as different image soft tokens even
where the template text is the same (the template holds one placeholder per image; the
processor expands it)."""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

from gemma4_ui.core.prompt import PromptSpec, model_inputs, template_text
from gemma4_ui.inspector.layers import TokenCounts, count_tokens
from gemma4_ui.media.decoding import MediaItem

MODALITIES = ("text", "control", "image", "audio", "video", "total")


@dataclass
class PromptSide:
    """One side's prompt: its raw template and its counts (None where no processor runs here)."""

    template: str
    counts: dict[str, int] | None


def prompt_side(processor, counting, spec: PromptSpec, media: list[MediaItem], image_budget: int) -> PromptSide:
    """`counting`: a processor that expands like `processor` (layers.counting_processor)."""
    if processor is None or not spec.messages:
        return PromptSide("", None)
    raw = template_text(processor, spec)
    return PromptSide(raw, counts_by_modality(count_tokens(processor, model_inputs(counting, spec), media,
                                                           image_budget)))


def counts_by_modality(counts: TokenCounts) -> dict[str, int]:
    return {"text": counts.text, "control": counts.control, "image": counts.image_tokens,
            "audio": counts.audio_tokens, "video": counts.video_tokens, "total": counts.total}


# The template's own units: its lines, and within a line each control token and what follows
# it. A template holds whole turns on one line (the system turn with every tool declared), so
# a diff by lines alone would show all of it for one `<|think|>` more.
_PIECE_EDGES = re.compile(r"(?<=\n)|(?=<\|)")


def _pieces(template: str) -> list[str]:
    return [piece.removesuffix("\n") for piece in _PIECE_EDGES.split(template) if piece]


def template_diff(a: str, b: str) -> str:
    """A unified diff of the two templates, piece by piece (empty when they are the same)."""
    return "\n".join(difflib.unified_diff(_pieces(a), _pieces(b), fromfile="A", tofile="B", n=2, lineterm=""))


def difference(a: PromptSide, b: PromptSide) -> dict:
    """The difference as data (the /compare endpoint's `prompt` field)."""
    return {"counts": {"a": a.counts, "b": b.counts}, "template_diff": template_diff(a.template, b.template)}


def counts_table_html(a: dict[str, int] | None, b: dict[str, int] | None) -> str:
    """Both sides' counts, row by row, the rows that differ marked."""
    if a is None or b is None:
        return "<p>The model's processor is not available here: no counts to compare.</p>"
    rows = []
    for name in MODALITIES:
        changed = a[name] != b[name]
        mark = " class='differs'" if changed else ""
        delta = f"{b[name] - a[name]:+,}" if changed else ""
        rows.append(f"<tr{mark}><td>{html.escape(name.capitalize())}</td><td>{a[name]:,}</td><td>{b[name]:,}</td>"
                    f"<td>{delta}</td></tr>")
    return ("<table class='compare-counts'><thead><tr><th>Tokens</th><th>A</th><th>B</th><th>B − A</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>")


def diff_html(diff: str) -> str:
    """The template diff, escaped, each line coloured by what it is."""
    if not diff:
        return "<p>The raw templates are the same, token for token of text.</p>"
    lines = []
    for line in diff.splitlines():
        kind = ("meta" if line.startswith(("---", "+++", "@@")) else "added" if line.startswith("+")
                else "removed" if line.startswith("-") else "same")
        lines.append(f"<span class='diff-{kind}'>{html.escape(line)}</span>")
    return f"<pre class='template-diff'>{chr(10).join(lines)}</pre>"
