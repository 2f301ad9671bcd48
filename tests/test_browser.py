"""The app in Debian's Chromium, driven by Playwright, as a user would use it."""

from __future__ import annotations

import re

from conftest import ROOT, screenshot

EXAMPLES = ROOT / "assets" / "examples"


def open_app(page, url):
    page.goto(url)
    page.wait_for_selector("#composer textarea", timeout=60_000)
    page.wait_for_selector("#model-status", timeout=10_000)


def no_horizontal_scroll(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


def image_tokens(page) -> int:
    text = page.inner_text("#token-counts")
    match = re.search(r"Image soft tokens\s+([\d,]+)", text)
    return int(match.group(1).replace(",", "")) if match else -1


def attach(page, *paths):
    page.set_input_files("#composer input[type=file]", [str(p) for p in paths])


def test_send_text_and_image_and_see_the_reply_stream(app_server, page):
    open_app(page, app_server.url)
    assert "tiny-gemma4" in page.inner_text("#model-status")
    attach(page, EXAMPLES / "shapes.png")
    page.fill("#composer textarea", "What is in this picture?")
    # Count the updates the reply bubble receives while it streams.
    page.evaluate("""() => {
        window.botUpdates = 0;
        new MutationObserver(() => { window.botUpdates += 1; })
            .observe(document.querySelector('#chatbot'), {subtree: true, childList: true, characterData: true});
    }""")
    page.keyboard.press("Enter")
    page.wait_for_selector('#chatbot [data-testid="user"] img', timeout=30_000)
    page.wait_for_function("() => document.querySelector('#chatbot').innerText.includes('What is in this picture?')",
                           timeout=30_000)
    page.wait_for_function("""() => { const bots = document.querySelectorAll('#chatbot [data-testid="bot"]');
                                      return bots.length > 0 && bots[bots.length - 1].innerText.trim().length > 0; }""",
                           timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    assert page.evaluate("window.botUpdates") >= 2
    assert page.input_value("#composer textarea") == "", "the composer was cleared on send"
    screenshot(page, "chat-text-and-image")


def test_send_audio_and_video(app_server, page):
    open_app(page, app_server.url)
    attach(page, EXAMPLES / "speech.wav", EXAMPLES / "bouncing_ball.mp4")
    page.wait_for_function(
        "() => /Audio soft tokens\\s+[1-9]/.test(document.querySelector('#token-counts').innerText) && "
        "/Video soft tokens\\s+[1-9]/.test(document.querySelector('#token-counts').innerText)", timeout=60_000)
    page.fill("#composer textarea", "What did I send?")
    page.keyboard.press("Enter")
    # Gradio's player draws its own waveform and keeps the <audio> element hidden: it only has to
    # be there, with the uploaded clip as its source.
    page.wait_for_selector('#chatbot [data-testid="user"] audio[src]', state="attached", timeout=30_000)
    page.wait_for_selector('#chatbot [data-testid="user"] video', timeout=30_000)
    page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=120_000)
    bots = page.locator('#chatbot [data-testid="bot"]')
    assert bots.count() >= 1 and bots.last.inner_text().strip()
    screenshot(page, "audio-and-video")


def test_attaching_an_image_updates_the_soft_token_count_before_sending(app_server, page):
    open_app(page, app_server.url)
    page.wait_for_selector("#token-counts", timeout=10_000)
    page.fill("#composer textarea", "Count the tokens of this photo")
    page.wait_for_function("() => document.querySelector('#token-counts').innerText.includes('Total')",
                           timeout=30_000)
    assert image_tokens(page) == 0
    attach(page, EXAMPLES / "shapes.png")
    page.wait_for_function(
        "() => /Image soft tokens\\s+[1-9]/.test(document.querySelector('#token-counts').innerText)",
        timeout=30_000)
    assert image_tokens(page) == 266  # 640x480 at the default budget of 280
    assert page.inner_text("#chatbot").count("Count the tokens") == 0, "nothing was sent"
    screenshot(page, "inspector-before-send")


def test_microphone_recording_is_attached_and_counted(app_server, playwright):
    """Chromium's fake microphone (a beep) through the composer's recorder."""
    from conftest import CHROMIUM, CHROMIUM_ARGS

    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + [
        "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"])
    try:
        context = chromium.new_context(viewport={"width": 1400, "height": 1000}, permissions=["microphone"])
        page = context.new_page()
        open_app(page, app_server.url)
        page.click("#composer button[aria-label='Record audio']")
        page.click("#composer button[aria-label='Start recording']")
        page.wait_for_timeout(2000)
        page.click("#composer button[aria-label='Stop recording']")
        page.click("#composer button[aria-label='Attach audio']")
        page.wait_for_function(
            "() => /Audio soft tokens\\s+[1-9]/.test(document.querySelector('#token-counts').innerText)",
            timeout=30_000)
        counts = page.inner_text("#token-counts")
        seconds = float(re.search(r"🔊 \S+\s+\d+\s+([\d.]+) s", counts).group(1))
        assert 1.0 <= seconds <= 5.0
        screenshot(page, "microphone")
    finally:
        chromium.close()
