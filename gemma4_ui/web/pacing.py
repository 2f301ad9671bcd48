"""How often a streamed turn updates the page: often enough to look live, never so often that
sending updates slows the model down or a long turn's updates pile up."""

from __future__ import annotations

import time

# Streamed updates per second at most: enough to look live (a reader sees a smooth stream
# from about 10), few enough that a fast model is never slowed by them (tokens in between
# arrive in the next update).
MAX_UPDATES_PER_SECOND = 15
# ...and at most this share of the wall time spent sending them. An update renders, diffs and
# sends the live part of the chat (display.py), so its cost does not grow with the history;
# it grows with what this turn holds (Gradio re-checks every file in it) and, measured as
# wall time, it includes waiting for the CPU and Python's lock while the model runs (much
# more with the browser and the model busy on a small machine than on an idle one).
# Costly turns get fewer, larger updates.
MAX_UPDATE_SHARE = 0.3
# ...but never less than one a second, however costly, so the reply is seen to progress.
MAX_UPDATE_INTERVAL = 1.0


class UpdatePacer:
    """When the next streamed update may go: spaced so that sending updates takes at most
    MAX_UPDATE_SHARE of the time, within MAX_UPDATES_PER_SECOND and MAX_UPDATE_INTERVAL.
    An update costs what passes from rendering it until Gradio asks for the next one
    (Gradio postprocesses, diffs and sends it in between); a running average, so that one
    slow update (a garbage collection, say) does not stall the stream."""

    SMOOTHING = 0.3  # weight of the newest cost in the average

    def __init__(self):
        self._next = 0.0  # the first update goes at once: it shows the first token
        self._cost: float | None = None

    def due(self) -> bool:
        return time.perf_counter() >= self._next

    def sent(self, started: float) -> None:
        cost = time.perf_counter() - started
        self._cost = cost if self._cost is None else (1 - self.SMOOTHING) * self._cost + self.SMOOTHING * cost
        interval = min(max(self._cost / MAX_UPDATE_SHARE, 1 / MAX_UPDATES_PER_SECOND), MAX_UPDATE_INTERVAL)
        self._next = started + interval
