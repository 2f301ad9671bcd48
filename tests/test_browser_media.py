"""Media in Chromium: the examples play, a refused file stays explained with the draft kept,
and a video the browser cannot play is shown as one of its frames."""

from __future__ import annotations

import numpy as np
from conftest import screenshot
from test_browser import attach, open_app

PLAYING = """() => { const v = document.querySelector('#chatbot [data-testid="user"] video');
                     return v && v.readyState >= 1 && v.duration > 0; }"""


def test_the_video_example_plays(app_server, page):
    open_app(page, app_server.url)
    page.locator("#examples button", has_text="Video question").first.click()
    page.wait_for_function("() => document.querySelector('#composer textarea').value.includes('video')",
                           timeout=30_000)
    page.click("#composer textarea")
    page.keyboard.press("Enter")
    page.wait_for_selector('#chatbot [data-testid="user"] video', state="attached", timeout=60_000)
    page.wait_for_function(PLAYING, timeout=30_000)
    duration = page.evaluate("() => document.querySelector('#chatbot [data-testid=\"user\"] video').duration")
    assert abs(duration - 4.0) < 0.2
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    screenshot(page, "video-example-plays")


def test_a_refused_file_stays_explained_and_the_draft_is_kept(app_server, page, tmp_path):
    broken = tmp_path / "holiday.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)  # a PNG signature, then garbage
    open_app(page, app_server.url)
    attach(page, broken)
    page.fill("#composer textarea", "Where was this taken?")
    page.keyboard.press("Enter")
    toast = page.locator('[data-testid="toast-body"]')
    toast.first.wait_for(timeout=30_000)
    page.wait_for_timeout(3000)  # long after the old notice was overwritten
    assert "holiday.png" in toast.first.inner_text(), "the toast stays until closed"
    assert "could not be decoded" in page.inner_text("#chatbot"), "and the chat says so"
    assert page.input_value("#composer textarea") == "Where was this taken?"
    screenshot(page, "refused-file")


def test_an_unplayable_video_shows_a_frame(app_server, page, tmp_path):
    import cv2

    path = tmp_path / "old_camera.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (160, 120))
    for i in range(20):
        writer.write(np.full((120, 160, 3), (30, 120 + i * 5, 200), np.uint8))
    writer.release()
    open_app(page, app_server.url)
    attach(page, path)
    page.fill("#composer textarea", "What is this?")
    page.keyboard.press("Enter")
    page.wait_for_selector('#chatbot [data-testid="user"] img', timeout=60_000)
    size = page.evaluate("() => { const i = document.querySelector('#chatbot [data-testid=\"user\"] img');"
                         " return [i.naturalWidth, i.complete]; }")
    assert size == [160, True]
    assert "browsers cannot play" in page.inner_text("#chatbot")
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    screenshot(page, "unplayable-video-frame")
