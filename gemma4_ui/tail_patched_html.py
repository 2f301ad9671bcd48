"""An HTML view that the browser patches from its first changed piece on, for long views that
change at the end: the inspector's layers while a draft is typed or a turn ends.

gr.HTML replaces its content by walking the old and new DOM side by side, node by node: with
the thousands of spans of a long chat's tokens that walk alone blocks the page for ~170 ms,
however little changed. Here the value is the view's pieces (each exactly one HTML element)
joined by SEPARATOR; the component's template holds only the frame, so Gradio's own walk has
nothing to do, and a small script keeps the pieces the page shows that equal the new ones
from the start, removes the rest and appends the new rest, a few milliseconds at a time.
The pieces are made in Python from escaped text and numbers only (see the callers); the
script adds no markup of its own.
"""

from __future__ import annotations

import html

import gradio as gr

# An empty HTML comment: escaped text cannot contain it ("<" is escaped), and the joined
# value still reads as the whole view.
SEPARATOR = "<!---->"

_PATCH_JS = """
const body = element.querySelector('.tph-body');
const frame = element.querySelector('.tph-frame');
let shown = [], target = [], patching = false;
// The patch goes in slices of a few milliseconds, each its own task, so that a big change
// (a long reply's tokens, the colour cut moving on) never blocks the page: a reply streaming
// in the chat beside it keeps its frames. A new value met mid-patch is patched towards from
// where the page is.
const SLICE_MS = 6, BATCH = 100;
const range = document.createRange();  // one: the browser updates every live range at each DOM change
const slice = () => {
  const until = performance.now() + SLICE_MS;
  let same = 0;
  while (same < shown.length && same < target.length && shown[same] === target[same]) same++;
  while (shown.length > same && performance.now() < until) {
    range.setStartBefore(body.childNodes[Math.max(same, shown.length - BATCH)]);
    range.setEndAfter(body.lastChild);
    range.deleteContents();
    shown.length = Math.max(same, shown.length - BATCH);
  }
  while (shown.length === same && same < target.length && performance.now() < until) {
    const next = target.slice(same, same + BATCH);
    body.insertAdjacentHTML('beforeend', next.join(''));
    shown.push(...next);
    same = shown.length;
  }
  patching = shown.length !== target.length || same !== target.length;
  if (patching) setTimeout(slice, 0);
};
const patch = () => {
  const value = props.value || '';
  frame.hidden = !value;
  target = value ? value.split(%(separator)r) : [];
  if (!patching) { patching = true; slice(); }
};
patch();
watch('value', patch);
""" % {"separator": SEPARATOR}


def joined(pieces: list[str]) -> str:
    return SEPARATOR.join(pieces)


def tail_patched_html(elem_id: str, label: str, head: str = "", body_class: str = "") -> gr.HTML:
    """A gr.HTML in a block like Gradio's own: `label`, then `head` (fixed HTML, e.g. a
    legend), then the pieces of its value; all hidden while the value is empty."""
    frame = (f"<div class='tph-frame' hidden><span class='tph-label'>{html.escape(label)}</span>{head}"
             f"<div class='tph-body {body_class}'></div></div>")
    return gr.HTML(elem_id=elem_id, html_template=frame, js_on_load=_PATCH_JS)


CSS = """
.tph-body { font-family: var(--font-mono); font-size: 0.85em; white-space: pre-wrap; max-height: 480px;
  overflow-y: auto; line-height: 1.7; }
.tph-frame { border: 1px solid var(--block-border-color); border-radius: var(--block-radius);
  background: var(--block-background-fill); padding: var(--block-padding); }
.tph-label { display: inline-block; margin-bottom: var(--spacing-md); padding: var(--block-label-padding);
  border: 1px solid var(--block-label-border-color); border-radius: var(--block-label-radius);
  background: var(--block-label-background-fill); color: var(--block-label-text-color);
  font-size: var(--block-label-text-size); }
"""
