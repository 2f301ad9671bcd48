"""Every workaround for Gradio or transformers in one list: what it does, the version it was
written for, what would retire it, and whether it is active here. `log_workarounds()` runs at
start-up: it logs the active ones, and warns where the installed version is not the one a
workaround was written for (each still checks its own ground: a chunk fix leaves a file it
does not know alone, a backport retires itself by version, a private attribute that is gone
falls back to Gradio's default).

The code of each stays where it works: web/gradio_compat/ for Gradio, engines/backports.py
for transformers fixes, inspector/layers.py for the processor steps the inspector replaces.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

from gemma4_ui.engines import backports
from gemma4_ui.inspector import layers
from gemma4_ui.web.gradio_compat import build_files, queue, updates

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Workaround:
    name: str
    package: str  # "gradio" or "transformers"
    written_for: str  # the package's version it was written and tested against
    retired_by: str  # what makes it unnecessary
    where: str  # its code
    active: Callable[[], bool]  # whether it applies in this process


def _chunk_fixed(*fixes: build_files.ChunkFix) -> Callable[[], bool]:
    return lambda: all(fix.patched() is not None for fix in fixes)


def _always() -> bool:
    return True


WORKAROUNDS = (
    Workaround("the status tracker's timer stops once the tracker has left the page", "gradio", "6.31.0",
               "a Gradio whose status tracker ends its requestAnimationFrame loop on unmount",
               "web/gradio_compat/build_files.py", _chunk_fixed(build_files.STATUS_TIMER)),
    Workaround("a streamed message sends only its own event's loading statuses", "gradio", "6.31.0",
               "a Gradio whose update_loading_stati_state sends only the statuses that changed",
               "web/gradio_compat/build_files.py", _chunk_fixed(build_files.STREAMED_STATUSES)),
    Workaround("a loading status reads back only the three properties the page keeps", "gradio", "6.31.0",
               "a Gradio whose get_data reads only the properties asked for",
               "web/gradio_compat/build_files.py", _chunk_fixed(*build_files.STATE_READ_BACK)),
    Workaround("a snapshot gives back a value that is not an object as it is", "gradio", "6.31.0",
               "a Svelte whose $state.snapshot does not structuredClone primitives",
               "web/gradio_compat/build_files.py", _chunk_fixed(build_files.SNAPSHOT_PRIMITIVES)),
    Workaround("the code highlighter's `] ::selection` rules lose their descendant half", "gradio", "6.31.0",
               "a Gradio whose markdown styles have no attribute selector before ::selection",
               "web/gradio_compat/narrow_selection_rules.js", _always),
    Workaround("a write of an element's dir with the value it has is skipped", "gradio", "6.31.0",
               "a Gradio whose Chatbot messages do not write `element.dir = element.dir`",
               "web/gradio_compat/skip_unchanged_dir.js", _always),
    Workaround("the queue polls every 10 ms, not every millisecond (private sleep_when_free)", "gradio", "6.31.0",
               "a public setting of the queue's poll interval",
               "web/gradio_compat/queue.py", lambda: queue.has_queue_attribute("sleep_when_free")),
    Workaround("the queue's progress loop looks for gr.Progress updates every 250 ms, not every 10 ms (private "
               "progress_update_sleep_when_free)", "gradio", "6.31.0", "a public setting of the progress poll interval",
               "web/gradio_compat/queue.py", lambda: queue.has_queue_attribute("progress_update_sleep_when_free")),
    Workaround("the queue starts events when one is queued or ends, not by looking every 10 ms (its "
               "private start_processing, copied)", "gradio", "6.31.0", "a Gradio whose queue waits for work",
               "web/gradio_compat/queue.py", queue.start_processing_is_known),
    Workaround("a turn counts from when it was queued (private event_ids_to_events)", "gradio", "6.31.0",
               "a public accessor of the current event's enqueue time",
               "web/gradio_compat/queue.py", lambda: queue.has_queue_attribute("event_ids_to_events")),
    Workaround("an output left as it is (gr.skip()) is sent without rebuilding its component", "gradio", "6.31.0",
               "a Gradio whose postprocessing passes a property-less update through",
               "web/gradio_compat/updates.py", updates.skip_rebuilds_unchanged_outputs),
    Workaround("a State's new value keeps the State's config (private SessionState.__setitem__)", "gradio", "6.31.0",
               "a Gradio that does not recompute a State's config for each value",
               "web/gradio_compat/updates.py", updates.state_set_recomputes_config),
    Workaround("the page's CSS styles some of Gradio's own class names (the Chatbot's rows and wrappers)",
               "gradio", "6.31.0", "none: the browser layout tests check each Gradio update",
               "web/app.py (CSS)", _always),
    Workaround("Gemma 4 MTP drafters' key/value sharing, backported", "transformers", "5.23.0",
               f"transformers {backports.MTP_KV_SHARING_FIXED_IN} (it retires itself there)",
               "engines/backports.py", backports.mtp_kv_sharing_needed),
    Workaround("the inspector's counting copy of the processor replaces its private "
               + ", ".join(layers.PROCESSOR_STEPS), "transformers", "5.23.0",
               "a public way to expand each medium once", "inspector/layers.py (counting_processor)",
               layers.processor_steps_present),
)


def log_workarounds(workarounds=WORKAROUNDS) -> list[Workaround]:
    """Log which workarounds are active, and warn for each package whose installed version is
    not the one its workarounds were written for. Returns the active ones."""
    active = []
    for w in workarounds:
        on = w.active()
        active += [w] if on else []
        log.info("workaround %s for %s %s: %s (%s)", "active" if on else "not active", w.package, w.written_for,
                 w.name, w.where)
    for package in sorted({w.package for w in workarounds}):
        installed = version(package)
        written_for = sorted({w.written_for for w in workarounds if w.package == package} - {installed})
        if written_for:
            log.warning("%s %s is installed; its workarounds were written for %s: check that each still "
                        "applies or can go (web/workarounds.py)", package, installed, ", ".join(written_for))
    return active
