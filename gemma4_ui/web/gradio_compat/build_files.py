"""Gradio's own page code, served with fixes for what every streamed update cost.

1. The status tracker's timer (js/statustracker/static/index.svelte) times a "pending" status
   with a requestAnimationFrame loop that stops only when the status changes. The page's
   loading indicator (js/spa/src/Index.svelte) is removed while it is still pending, so its
   loop asked for a frame 60 times a second for as long as the page was open: Chromium
   rendered the page again at every one, idle or not (a phone's battery; in a long chat, the
   history's share of each frame). Fixed: the loop goes on only while the tracker's element
   is in the document.
2. The loading statuses (js/core/src/dependency.ts): at every streamed message, Gradio sent
   every loading status it holds back to its component, and before each one read the
   component's whole state back into its tree (`$state.snapshot`, one structuredClone per
   value): every component that was ever an input or a progress target of a finished event,
   so a streamed update cost more the more a session had used (in a long chat, a large share
   of the page's main-thread time while a reply streams). Only the streaming
   event's statuses change then, so only those are sent; the others still are at every other
   change of status (an event's start, end or error), as before.
3. At those other changes, each status sent read its component's state back the same way,
   every property cloned to keep three (`#m` in the core chunk): in a long chat, thousands of
   clones in the long tasks at a turn's start and end. Now only the three are read.
4. Svelte's `$state.snapshot` (its `clone`, in the page's main chunk), with which Gradio
   reads state back and gathers an event's inputs, passed every string, number, boolean and
   null it met to structuredClone, which serializes and rebuilds each one to give back the
   same value: thousands of calls when a message was sent in a long chat (the history was
   then an input of the send), and twice as many per streamed update in a long
   chat as in an empty one. A value that is not an object is now given back as it is, as
   structuredClone would.

Each fix is a few exact replacements in one of Gradio's built chunks, served from memory at
the chunk's own address by a route ahead of Gradio's /assets. Where this Gradio's build
differs, the app serves Gradio's chunk unchanged and says so in its log.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from gradio.route_utils import BUILD_PATH_LIB
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkFix:
    chunk: str  # the built file, in gradio 6.31.0's templates/frontend/assets
    edits: tuple[tuple[str, str], ...]  # (Gradio's code, the fixed code); each found exactly once
    what: str  # for the log

    def patched(self) -> str | None:
        """The fixed chunk, or None where this Gradio's build differs."""
        path = Path(BUILD_PATH_LIB) / self.chunk
        source = path.read_text(encoding="utf-8") if path.exists() else ""
        if not source or any(source.count(old) != 1 for old, _ in self.edits):
            log.warning("Gradio's %s is not the one this fix knows: %s is left as it is", self.chunk, self.what)
            return None
        for old, new in self.edits:
            source = source.replace(old, new)
        return source


# `function ze(){me(()=>{F(Pe,…),W&&ze()})}`: W says the timer runs, U is the tracker's element
# (`bind:this`; Svelte clears it on unmount).
STATUS_TIMER = ChunkFix("statustracker-DQF-KcRT.js", (("W&&ze()", "W&&U&&U.isConnected&&ze()"),),
                        "the status tracker's timer")
# update_loading_stati_state() takes the event whose statuses alone changed, and the streamed
# message (stage "generating" or "streaming") names its event, `r.id`.
STREAMED_STATUSES = ChunkFix("Blocks-D1GWYZdr.js", (
    ("async update_loading_stati_state(){await Promise.all(Object.entries(this.loading_stati.current).map(",
     "async update_loading_stati_state(only_fn){await Promise.all(Object.entries(this.loading_stati.current)"
     ".filter(([,status])=>only_fn===void 0||status.fn_index===only_fn).map("),
    ("stream_state:n}),this.update_loading_stati_state();else if(s.stage===`error`)",
     "stream_state:n}),this.update_loading_stati_state(r.id);else if(s.stage===`error`)"),
), "the loading statuses sent at each streamed message")
# #m(id, node) reads a component's state back into the page's tree before a change that has no
# value (a loading status, mostly): it takes `value`, `open` and `selected` (Te) from a snapshot
# of every property. get_data takes the names it needs (the components that override it still
# give them all, as before).
STATE_READ_BACK = (
    ChunkFix("src-DcSdoR3U.js", (("async get_data(){return c(this.props)}",
                                  "async get_data(keys){return c(keys?Object.fromEntries(keys.filter(k=>k in this.props)"
                                  ".map(k=>[k,this.props[k]])):this.props)}"),), "the component's state read back"),
    ChunkFix("core-Bdx9080F.js", (("let n=this.#s.get(e);if(!n)return;let r=await n();",
                                   "let n=this.#s.get(e);if(!n)return;let r=await n(Te);"),),
             "the component's state read back"),
)
# clone(e, …): arrays, plain objects, Maps, Sets, Dates and objects with toJSON are copied above
# this point; what reaches it is a primitive or another object. A primitive comes back as it is.
SNAPSHOT_PRIMITIVES = ChunkFix("index-DphvyggB.js", (
    ("if(e instanceof EventTarget)return e;try{return structuredClone(e)}",
     "if(typeof e!=`object`||e===null||e instanceof EventTarget)return e;try{return structuredClone(e)}"),
), "the snapshot of values that are not objects")
FIXES = (STATUS_TIMER, STREAMED_STATUSES, *STATE_READ_BACK, SNAPSHOT_PRIMITIVES)


def _serve(body: bytes):
    # Not Gradio's ETag: a browser holding Gradio's copy fetches this one.
    headers = {"ETag": '"%s"' % hashlib.sha256(body).hexdigest()[:32], "Cache-Control": "no-cache"}

    async def chunk(request: Request) -> Response:
        if request.headers.get("if-none-match") == headers["ETag"]:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="text/javascript", headers=headers)

    return chunk


def routes() -> list[Route]:
    """The routes serving the fixed chunks (none for a chunk that cannot be fixed), for
    FastAPI's `routes`: those come before the ones Gradio adds."""
    served = []
    for fix in FIXES:
        source = fix.patched()
        if source is not None:
            served.append(Route(f"/assets/{fix.chunk}", _serve(source.encode("utf-8")), methods=["GET"]))
    return served
