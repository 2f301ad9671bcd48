"""Two reads and writes of Gradio's queue that no public API offers (written for gradio 6.31.0;
both wait for a public setting or accessor). Each checks that the attribute exists and falls
back to Gradio's own behaviour where it does not."""

from __future__ import annotations

import gradio as gr

# Gradio's queue looks for work every millisecond by default, which takes CPU time from
# generation; every 10 ms delays the start of a queued event by at most that.
QUEUE_POLL_SECONDS = 0.01


def has_queue_attribute(name: str) -> bool:
    """Whether Gradio's Queue sets `name` on itself (read from its __init__'s code, so that
    nothing needs to be built to know)."""
    from gradio.queueing import Queue

    return name in Queue.__init__.__code__.co_names


def poll_queue_slower(demo: gr.Blocks) -> None:
    """Gradio's queue polls every QUEUE_POLL_SECONDS instead of every millisecond (the private
    `sleep_when_free`; without it the default stays)."""
    queue = getattr(demo, "_queue", None)
    if hasattr(queue, "sleep_when_free"):
        queue.sleep_when_free = QUEUE_POLL_SECONDS


def enqueue_time() -> float | None:
    """When Gradio queued the event being processed (its monotonic clock), so that a Stop
    pressed while the turn waited in the queue reaches it. Read from the private
    `event_ids_to_events`; None outside a queued event, or where Gradio changed."""
    try:
        from gradio.context import LocalContext

        blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
        event = blocks._queue.event_ids_to_events.get(event_id)
        return float(event.enqueue_time)
    except Exception:  # noqa: BLE001 - not in a queued event, or Gradio changed: fall back
        return None
