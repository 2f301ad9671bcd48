"""Reads and writes of Gradio's queue that no public API offers (written for gradio 6.31.0;
each waits for a public setting or accessor). Each checks that the attribute exists and falls
back to Gradio's own behaviour where it does not."""

from __future__ import annotations

import gradio as gr

# Gradio's queue looks for work every millisecond by default, which takes CPU time from
# generation; every 10 ms delays the start of a queued event by at most that.
QUEUE_POLL_SECONDS = 0.01
# Gradio's loop that sends gr.Progress updates wakes every 10 ms, busy or idle, and looks
# through every running event each time: that cost the server, idle, more CPU time than
# relaying a stream of tokens. The app reports no progress through gr.Progress; one that did
# would show it at most this much later.
PROGRESS_POLL_SECONDS = 0.25


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


def poll_progress_slower(demo: gr.Blocks) -> None:
    """Gradio's progress loop looks for updates every PROGRESS_POLL_SECONDS instead of every
    10 ms (the private `progress_update_sleep_when_free`; without it the default stays)."""
    queue = getattr(demo, "_queue", None)
    if hasattr(queue, "progress_update_sleep_when_free"):
        queue.progress_update_sleep_when_free = PROGRESS_POLL_SECONDS


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


# Gradio's loop that starts queued events (Queue.start_processing) looks for work every
# `sleep_when_free`, idle or not: at QUEUE_POLL_SECONDS that is a hundred wake-ups a second,
# which cost the server more CPU time than relaying a stream of tokens. The same loop below
# waits instead until an event is queued or one ends (the only changes that can give it work),
# and looks anyway every QUEUE_IDLE_SECONDS. It replaces Gradio's only where Gradio's is the
# one it was copied from (written for gradio 6.31.0).
QUEUE_IDLE_SECONDS = 0.1
_START_PROCESSING_SHA256 = "d65be5a5cbed97d75e13233ab7d0dfc9f347c4ffd33bdcb47293d696f38aaa1f"


def start_processing_is_known() -> bool:
    """Whether Gradio's Queue.start_processing is the loop `wake_queue_on_work` was copied from."""
    import hashlib
    import inspect

    from gradio.queueing import Queue

    try:
        source = inspect.getsource(Queue.start_processing)
    except (OSError, TypeError):
        return False
    return hashlib.sha256(source.encode()).hexdigest() == _START_PROCESSING_SHA256


def wake_queue_on_work(demo: gr.Blocks) -> None:
    """`demo`'s queue starts events when one is queued or one ends, instead of looking every
    QUEUE_POLL_SECONDS (see above); call before launch, which starts the loop."""
    import asyncio
    import time

    from gradio import queueing

    queue = getattr(demo, "_queue", None)
    if queue is None or not start_processing_is_known():
        return
    wake = asyncio.Event()
    push, process_events = queue.push, queue.process_events

    async def push_and_wake(*args, **kwargs):
        try:
            return await push(*args, **kwargs)
        finally:
            wake.set()

    async def process_and_wake(*args, **kwargs):
        try:
            return await process_events(*args, **kwargs)
        finally:
            wake.set()  # after Gradio's own finally: the event's slot is free

    async def wait_for_work() -> None:
        try:
            await asyncio.wait_for(wake.wait(), QUEUE_IDLE_SECONDS)
        except asyncio.TimeoutError:
            pass
        wake.clear()  # the loop looks at the queue next, so nothing set before this is missed

    async def start_processing() -> None:
        # Gradio's Queue.start_processing, with `await wait_for_work()` for each of its
        # `await asyncio.sleep(self.sleep_when_free)`.
        self = queue
        try:
            while not self.stopped:
                if len(self) == 0:
                    await wait_for_work()
                    continue

                if None not in self.active_jobs:
                    await wait_for_work()
                    continue

                async with self.delete_lock:
                    event_batch = self.get_events()

                if event_batch:
                    events, batch, concurrency_id = event_batch
                    self.active_jobs[self.active_jobs.index(None)] = events
                    event_queue = self.event_queue_per_concurrency_id[concurrency_id]
                    event_queue.current_concurrency += 1
                    start_time = time.time()
                    fn = events[0].fn
                    event_queue.start_times_per_fn[fn].add(start_time)
                    for event in events:
                        if (a := self.event_analytics.get(event._id)) is not None:
                            a["status"] = "processing"
                    process_event_task = queueing.run_coro_in_background(
                        self.process_events, events, batch, start_time, fn)
                    queueing.set_task_name(process_event_task, events[0].session_hash, fn._id, events[0]._id, batch)
                    self._asyncio_tasks.add(process_event_task)
                    process_event_task.add_done_callback(self._asyncio_tasks.discard)
                    if self.live_updates:
                        self.broadcast_estimations(concurrency_id)
                else:
                    await wait_for_work()
        finally:
            self.stopped = True
            self._cancel_asyncio_tasks()

    queue.push, queue.process_events, queue.start_processing = push_and_wake, process_and_wake, start_processing
