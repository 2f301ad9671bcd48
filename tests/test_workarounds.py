"""The list of Gradio and transformers workarounds (web/workarounds.py): on the pinned versions
every one is active, and a version other than the one a workaround was written for is
reported at start-up."""

from __future__ import annotations

import logging

from gemma4_ui.web.workarounds import WORKAROUNDS, Workaround, log_workarounds


def test_every_workaround_is_active_on_the_pinned_versions(caplog):
    from gemma4_ui.web.gradio_compat import updates

    updates.keep_state_configs()  # as an app built earlier in this process did: still reported active
    with caplog.at_level(logging.INFO, logger="gemma4_ui.web.workarounds"):
        active = log_workarounds()
    assert active == list(WORKAROUNDS)
    assert caplog.text.count("workaround active") == len(WORKAROUNDS)
    assert "installed; its workarounds were written for" not in caplog.text


def test_another_version_is_reported(caplog):
    old = Workaround("a fix for an old Gradio", "gradio", "0.1.0", "anything", "nowhere", lambda: False)
    with caplog.at_level(logging.INFO, logger="gemma4_ui.web.workarounds"):
        assert log_workarounds((old,)) == []
    assert "workaround not active for gradio 0.1.0: a fix for an old Gradio" in caplog.text
    assert "its workarounds were written for 0.1.0" in caplog.text


def test_the_queue_looks_for_progress_less_often():
    """Gradio's progress loop wakes every 10 ms, idle or not; the app's queue looks every
    PROGRESS_POLL_SECONDS (the app reports no gr.Progress)."""
    import gradio as gr

    from gemma4_ui.web.app import enable_queue
    from gemma4_ui.web.gradio_compat.queue import PROGRESS_POLL_SECONDS

    with gr.Blocks() as demo:
        gr.Textbox()
    assert enable_queue(demo, 1)._queue.progress_update_sleep_when_free == PROGRESS_POLL_SECONDS
