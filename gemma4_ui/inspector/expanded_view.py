"""Layer 3 in colour: the processor's `input_ids`, each token coloured by its kind (text,
control, image, audio or video soft token) with its id on hover, and every long soft-token
run folded into one line that opens to show its tokens.

Kinds come from the processor's output: `mm_token_type_ids` for soft tokens, the tokenizer's
special ids for control tokens. Built from numbers and escaped text only.
"""

from __future__ import annotations

import html

from gemma4_ui.inspector.layers import AUDIO, IMAGE, TEXT, VIDEO
from gemma4_ui.inspector.pieces import joined

SOFT_KINDS = {IMAGE: "image", VIDEO: "video", AUDIO: "audio"}
FOLD_RUNS_LONGER_THAN = 8
# A long chat's last elements are coloured, at most this many (one per token, or per folded
# soft-token run): each is a node the browser lays out, and thousands of them redrawn at each
# refresh block the page. The tokens before stay, as plain text in a fold (the plain layer
# has them too). The cut moves in whole blocks, so that typing a draft leaves it where it
# was, and the page patches only its end (tail_patched_html).
MAX_COLOURED = 2000
CUT_BLOCK = 500


def _runs(ids: list[int], types: list[int]):
    """(start, end, id, type) of each stretch of one repeated soft token, else one token."""
    start = 0
    while start < len(ids):
        end = start + 1
        if types[start] in SOFT_KINDS:
            while end < len(ids) and ids[end] == ids[start] and types[end] == types[start]:
                end += 1
        yield start, end, ids[start], types[start]
        start = end


def coloured_from(count: int) -> int:
    """The first coloured element of `count`: a multiple of CUT_BLOCK, leaving at most
    MAX_COLOURED (and more than MAX_COLOURED - CUT_BLOCK) coloured."""
    if count <= MAX_COLOURED:
        return 0
    return ((count - MAX_COLOURED - 1) // CUT_BLOCK + 1) * CUT_BLOCK


def expanded_html(processor, inputs) -> str:
    """The tokens as pieces for `tail_patched_html`: the plain early fold (if any), then one
    element per token or folded run."""
    tokenizer = processor.tokenizer
    ids = inputs["input_ids"][0].tolist()
    types = inputs["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in inputs else [TEXT] * len(ids)
    special = set(tokenizer.all_special_ids)
    pieces = {i: html.escape(tokenizer.decode([i], skip_special_tokens=False)) for i in set(ids)}
    elements: list[tuple[int, str]] = []  # (first position, HTML)
    for start, end, token, kind in _runs(ids, types):
        name = SOFT_KINDS.get(kind) or ("control" if token in special else "text")
        count = end - start
        if count > FOLD_RUNS_LONGER_THAN:
            elements.append((start, f"<details class='xv-run xv-{name}'><summary title='id {token} · positions "
                                    f"{start}–{end - 1}'>{pieces[token]} × {count:,}</summary>"
                                    f"{pieces[token] * count}</details>"))
        else:
            elements.extend((n, f"<span class='xv xv-{name}' title='id {token} · {name} · position {n}'>"
                                f"{pieces[token]}</span>") for n in range(start, end))
    cut = coloured_from(len(elements))
    out = [element for _, element in elements[cut:]]
    if cut:
        first = elements[cut][0]
        early = html.escape(tokenizer.decode(ids[:first], skip_special_tokens=False))
        out.insert(0, f"<details class='xv-early'><summary>Positions 0–{first - 1:,}: {first:,} tokens, shown "
                      f"without colours</summary>{early}</details>")
    return joined(out)


LEGEND = "<div class='xv-legend'>" + "".join(
    f"<span class='xv xv-{name}'>{name}</span> " for name in ("text", "control", "image", "audio", "video")) + "</div>"


CSS = """
.xv-tokens { word-break: break-all; }
.xv { border-radius: 2px; box-shadow: inset 0 0 0 1px rgba(127,127,127,0.25); }
.xv-text { background: transparent; }
.xv-control { background: rgba(59,130,246,0.22); }
.xv-image { background: rgba(239,68,68,0.22); }
.xv-audio { background: rgba(16,185,129,0.25); }
.xv-video { background: rgba(245,158,11,0.28); }
.xv-run { display: inline; }
.xv-run > summary { display: inline; cursor: pointer; border-radius: 2px; padding: 0 2px; list-style: none; }
.xv-run.xv-image > summary, .xv-run.xv-image { background: rgba(239,68,68,0.22); }
.xv-run.xv-audio > summary, .xv-run.xv-audio { background: rgba(16,185,129,0.25); }
.xv-run.xv-video > summary, .xv-run.xv-video { background: rgba(245,158,11,0.28); }
.xv-legend .xv { padding: 0 4px; font-size: 0.8em; }
.xv-early > summary { cursor: pointer; font-family: var(--font-sans); opacity: 0.75; margin-bottom: 4px; }
"""
