"""Only generation is a shared, queued resource: every other queued step of one user runs
at once, whatever other users are doing. Gradio gives each queued event the slot of its
function (concurrency_id = id(fn)) limited by the queue's default; one function shared by
every chain's end of turn made every user wait for every other user's end of turn."""

from __future__ import annotations

import threading
import time

from conftest import free_port

from gemma4_ui.config import Settings
from gemma4_ui.web.app import build_ui, enable_queue, page_options
from gemma4_ui.web.handlers.shared import SharedChatHandlers

# Named pools, each bounding one kind of shared work: the model's generation, the decoding of
# a message's files and the inspector's template rendering (CPU work, several at once).
SHARED_POOLS = {"gpu", "stage", "inspector"}


def queued_slots(demo) -> dict[str, tuple[int | None, list[str]]]:
    """Every queued event's slot as Gradio's queue resolves it: id → (limit, functions)."""
    queue = demo._queue
    users: dict[str, list[str]] = {}
    for fn in demo.fns.values():
        if fn.queue and fn.fn is not None:
            queue.create_event_queue_for_fn(fn)
            users.setdefault(fn.concurrency_id, []).append(fn.name)
    return {cid: (queue.event_queue_per_concurrency_id[cid].concurrency_limit, names) for cid, names in users.items()}


def test_no_per_user_step_holds_a_shared_limited_slot(tiny_engine):
    settings = Settings(model="tiny")
    demo = enable_queue(build_ui(SharedChatHandlers(tiny_engine, settings)), settings.gpu_concurrency)
    slots = queued_slots(demo)
    limited = {cid: (limit, names) for cid, (limit, names) in slots.items() if limit is not None}
    assert set(limited) <= SHARED_POOLS, f"per-user steps in a limited slot: {limited}"
    assert slots["gpu"][0] == settings.gpu_concurrency
    assert {"respond", "retry", "edit", "answer_tool", "cancel_tool", "reply"} <= set(slots["gpu"][1])
    after = [cid for cid, (_, names) in slots.items() if "after_turn" in names]
    assert after and all(slots[cid][0] is None for cid in after)


def test_two_users_per_user_steps_do_not_wait_for_each_other(tiny_engine):
    """Two users export at once; each export takes two seconds: both end in about two, not four."""
    settings = Settings(model="tiny")
    handlers = SharedChatHandlers(tiny_engine, settings)
    export = handlers.files.export_files

    def slow_export(conversation, session, options):
        time.sleep(2.0)
        return export(conversation, session, options)

    handlers.files.export_files = slow_export
    demo = enable_queue(build_ui(handlers), settings.gpu_concurrency)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **page_options())
    try:
        from gradio_client import Client

        clients = [Client(f"http://127.0.0.1:{port}/", verbose=False) for _ in range(2)]
        for c in clients:  # warm: the first call of a session sets up its state
            c.predict(api_name="/export")
        ends: list[float] = []
        start = time.monotonic()

        def one(c):
            c.predict(api_name="/export")
            ends.append(time.monotonic() - start)

        threads = [threading.Thread(target=one, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(ends) == 2
        assert max(ends) < 3.5, f"the second export waited for the first: {ends}"
    finally:
        demo.close()
