"""Gradio's status tracker, served with its timer stopped once the tracker has left the page.

Gradio 6's StatusTracker (js/statustracker/static/index.svelte) times a "pending" status with
a requestAnimationFrame loop that stops only when the status changes. The page's loading
indicator (js/spa/src/Index.svelte) is removed while it is still pending, so its loop asks
for a frame 60 times a second for as long as the page is open: Chromium renders the page
again at every one, idle or not (a phone's battery; in a long chat, the history's share of
each frame). The fix is one condition in Gradio's own chunk: the loop goes on only while the
tracker's element is in the document. The chunk is served from memory at its own address,
by a route ahead of Gradio's /assets.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from gradio.route_utils import BUILD_PATH_LIB
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

log = logging.getLogger(__name__)

# In gradio 6.31.0's build: `function ze(){me(()=>{F(Pe,…),W&&ze()})}`, where W says the
# timer runs and U is the tracker's element (`bind:this`; Svelte clears it on unmount).
CHUNK = "statustracker-DQF-KcRT.js"
LOOP, GUARDED = "W&&ze()", "W&&U&&U.isConnected&&ze()"


def patched_chunk() -> str | None:
    """The chunk with the guarded loop, or None where this Gradio's build differs (the app
    then serves Gradio's own, and says so)."""
    path = Path(BUILD_PATH_LIB) / CHUNK
    source = path.read_text(encoding="utf-8") if path.exists() else ""
    if source.count(LOOP) != 1:
        log.warning("Gradio's status-tracker chunk is not the one this fix knows (%s): its timer is left as it is", CHUNK)
        return None
    return source.replace(LOOP, GUARDED)


def routes() -> list[Route]:
    """The route serving the fixed chunk (none when it cannot be fixed), for FastAPI's `routes`:
    those come before the ones Gradio adds."""
    source = patched_chunk()
    if source is None:
        return []
    body = source.encode("utf-8")
    # Not Gradio's ETag: a browser holding Gradio's copy fetches this one.
    headers = {"ETag": '"%s"' % hashlib.sha256(body).hexdigest()[:32], "Cache-Control": "no-cache"}

    async def chunk(request: Request) -> Response:
        if request.headers.get("if-none-match") == headers["ETag"]:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="text/javascript", headers=headers)

    return [Route(f"/assets/{CHUNK}", chunk, methods=["GET"])]
