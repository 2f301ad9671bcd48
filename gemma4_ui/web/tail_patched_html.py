"""An HTML view that the browser patches from its first changed piece on, for long views that
change at the end: the inspector's layers while a draft is typed or a turn ends.

gr.HTML replaces its content by walking the old and new DOM side by side, node by node: with
the thousands of spans of a long chat's tokens that walk alone blocks the page noticeably,
however little changed. Here the view is a list of pieces (each exactly one HTML element),
the component's template holds only the frame, so Gradio's own walk has nothing to do, and a
small script keeps the pieces the page shows that equal the new ones from the start, removes
the rest and appends the new rest, a few milliseconds at a time.

What travels is a patch, not the view (`TailPatches`): the number of pieces to keep from the
view the page has, and the pieces after them. A long chat's layers are hundreds of KB, and
Gradio's page copies and serialises every value it receives several times over (structured
clones of its state, JSON of the props): re-sent whole at each keystroke of a draft, they
made a long task, and one landing while a reply streamed made the reply stutter. Each
patch names the view it applies to; a page that does not have it (events that ended out of
order, a session that started again) asks for the whole view (the component's `clear` event).
The pieces are made in Python from escaped text and numbers only (see the callers); the
script adds no markup of its own.
"""

from __future__ import annotations

import html
import secrets

import gradio as gr

from gemma4_ui.inspector.pieces import SEPARATOR, joined

# A patch: its series (one per record of what a page has: a session that starts again, after
# its time to live, starts a new one), version, base version (-1: none, the pieces are the
# whole view) and pieces to keep.
_HEADER = "<!--tph {series} {version} {base} {keep}-->"
HEADER_PATTERN = r"^<!--tph ([0-9a-f]+) (\d+) (-?\d+) (\d+)-->"

_PATCH_JS = """
const body = element.querySelector('.tph-body');
const frame = element.querySelector('.tph-frame');
const placeholder = frame.querySelector('.tph-empty') !== null;  // an empty view shows it
// The view as the patches made it, kept on the page (not in this element) so that a re-mount
// of the component starts from it: the value it then finds is only the last patch.
const views = window.__tailPatchedViews ??= {};
const view = views[%(key)r] ??= {series: '', version: -1, pieces: []};
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
const apply = (value) => {
  const head = new RegExp(%(header)r).exec(value);
  if (!head) return;  // no patch yet
  const series = head[1], [version, base, keep] = head.slice(2).map(Number);
  const same = series === view.series;
  if (same && version <= view.version) return;  // the page has this one, or a newer one
  if (base >= 0 && !(same && base === view.version)) { trigger('clear'); return; }
  const rest = value.slice(head[0].length);
  view.pieces = view.pieces.slice(0, base >= 0 ? keep : 0).concat(rest ? rest.split(%(separator)r) : []);
  Object.assign(view, {series, version});
};
const patch = () => {
  apply(props.value || '');
  frame.toggleAttribute('data-empty', !view.pieces.length);
  frame.hidden = !view.pieces.length && !placeholder;
  target = view.pieces;
  if (!patching) { patching = true; slice(); }
};
patch();
watch('value', patch);
"""


class TailPatches:
    """The patches that bring one page's view from what it has to a new one. Not thread-safe:
    the caller holds the lock of what the page shows."""

    def __init__(self):
        self.series = secrets.token_hex(4)
        self.version = -1  # of the last patch made, for any view (versions only grow)

    def patch(self, shown: str | None, shown_version: int, value: str) -> tuple[str, int]:
        """(the patch from `shown`, at `shown_version`, to `value`; its version). `shown`
        None: the page's view is unknown, and the patch holds the whole view."""
        self.version += 1
        if shown is None:
            return _HEADER.format(series=self.series, version=self.version, base=-1, keep=0) + value, self.version
        old, new = (view.split(SEPARATOR) if view else [] for view in (shown, value))
        keep = 0
        while keep < min(len(old), len(new)) and old[keep] == new[keep]:
            keep += 1
        header = _HEADER.format(series=self.series, version=self.version, base=shown_version, keep=keep)
        return header + joined(new[keep:]), self.version


def tail_patched_html(elem_id: str, label: str, head: str = "", body_class: str = "", empty: str = "") -> gr.HTML:
    """A gr.HTML in a block like Gradio's own: `label`, then `head` (fixed HTML, e.g. a
    legend), then the view its patches make. While the view is empty, the label and the text
    `empty` show instead, or nothing if that is "". Its value is a patch (`TailPatches`); its
    `clear` event asks for the whole view."""
    placeholder = f"<div class='tph-empty'>{html.escape(empty)}</div>" if empty else ""
    frame = (f"<div class='tph-frame' hidden data-empty><span class='tph-label'>{html.escape(label)}</span>{head}"
             f"{placeholder}<div class='tph-body {body_class}'></div></div>")
    script = _PATCH_JS % {"separator": SEPARATOR, "header": HEADER_PATTERN, "key": elem_id}
    return gr.HTML(elem_id=elem_id, html_template=frame, js_on_load=script)


CSS = """
.tph-body { font-family: var(--font-mono); font-size: 0.85em; white-space: pre-wrap; max-height: 480px;
  overflow-y: auto; line-height: 1.7; }
.tph-frame { border: 1px solid var(--block-border-color); border-radius: var(--block-radius);
  background: var(--block-background-fill); padding: var(--block-padding); }
.tph-frame[data-empty] > :not(.tph-label):not(.tph-empty),
.tph-frame:not([data-empty]) > .tph-empty { display: none; }
.tph-empty { color: var(--body-text-color-subdued); }
.tph-label { display: inline-block; margin-bottom: var(--spacing-md); padding: var(--block-label-padding);
  border: 1px solid var(--block-label-border-color); border-radius: var(--block-label-radius);
  background: var(--block-label-background-fill); color: var(--block-label-text-color);
  font-size: var(--block-label-text-size); }
"""
