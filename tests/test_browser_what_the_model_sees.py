"""The soft-token maps and the token-probability view in Chromium, at desktop and phone width."""

from __future__ import annotations

import re

import pytest
from conftest import ARTIFACTS, ROOT, screenshot
from test_browser import attach, image_tokens, no_horizontal_scroll, open_app

from gemma4_ui.inspector.soft_token_map import image_grid
from gemma4_ui.web.layout import LAYER_EMPTY

EXAMPLES = ROOT / "assets" / "examples"


def element_screenshot(page, selector: str, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(selector).screenshot(path=str(ARTIFACTS / f"{name}.png"))


def drawn_counts(page) -> list[int]:
    return page.eval_on_selector_all("#soft-token-map figure[data-soft-tokens]",
                                     "els => els.map(e => Number(e.dataset.softTokens))")


def wait_for_drawn(page, count: int) -> None:
    page.wait_for_function(
        "n => [...document.querySelectorAll('#soft-token-map figure[data-soft-tokens]')]"
        ".some(e => Number(e.dataset.softTokens) === n)", arg=count, timeout=30_000)


def test_image_map_before_sending_and_after_a_budget_change(app_server, page, processor):
    open_app(page, app_server.url)
    attach(page, EXAMPLES / "shapes.png")
    expected = image_grid(processor, 640, 480, 280)
    wait_for_drawn(page, expected.soft_tokens)
    assert drawn_counts(page) == [expected.soft_tokens] == [image_tokens(page)]
    cells = page.locator("#soft-token-map .stm-cells rect")
    assert cells.count() == expected.soft_tokens
    box = page.locator("#soft-token-map svg.stm-image").bounding_box()
    assert box["width"] > 200 and box["height"] > 100
    screenshot(page, "soft-token-map-280")

    page.get_by_role("tab", name="Settings").click()
    page.click("#image-budget [data-testid='70-radio-label']")
    page.get_by_role("tab", name="Inspector").click()
    small = image_grid(processor, 640, 480, 70)
    wait_for_drawn(page, small.soft_tokens)
    page.wait_for_function(f"() => /Image soft tokens\\s+{small.soft_tokens}\\b/"
                           ".test(document.querySelector('#token-counts').innerText)", timeout=30_000)
    assert drawn_counts(page) == [small.soft_tokens] == [image_tokens(page)]
    assert page.locator("#soft-token-map .stm-cells rect").count() == small.soft_tokens
    element_screenshot(page, "#soft-token-map", "soft-token-map-70")


def test_audio_map_and_video_strip(app_server, page):
    open_app(page, app_server.url)
    attach(page, EXAMPLES / "speech.wav", EXAMPLES / "bouncing_ball.mp4")
    page.wait_for_selector("#soft-token-map figure[data-kind=audio]", timeout=60_000)
    page.wait_for_selector("#soft-token-map figure[data-kind=video]", timeout=60_000)
    counts = page.inner_text("#token-counts")
    audio = int(re.search(r"Audio soft tokens\s+([\d,]+)", counts).group(1).replace(",", ""))
    video = int(re.search(r"Video soft tokens\s+([\d,]+)", counts).group(1).replace(",", ""))
    assert drawn_counts(page) == [audio, video]  # in the order attached
    stamps = page.eval_on_selector_all("#soft-token-map .stm-frame-thumb figcaption b", "els => els.map(e => e.textContent)")
    assert stamps and stamps[0] == "00:00" and all(re.fullmatch(r"\d\d:\d\d", s) for s in stamps)
    assert page.locator("#soft-token-map .stm-frame-thumb img").count() == len(stamps)
    element_screenshot(page, "#soft-token-map", "audio-map-and-video-strip")

    # Layer 3 in colour: each frame's soft tokens folded into one line that opens on a click.
    page.get_by_role("radio", name="Expanded").click()  # the layers one at a time below 1800 px
    runs = page.locator("#template-expanded-colour details.xv-run.xv-video")
    runs.first.wait_for(timeout=30_000)
    assert runs.count() == len(stamps)
    assert page.locator("#template-expanded-colour details.xv-run.xv-audio").count() == 1
    runs.first.locator("summary").click()
    assert runs.first.evaluate("e => e.open")
    element_screenshot(page, "#template-expanded-colour", "expanded-in-colour")


def short_replies(page, tokens: int = 12) -> None:
    """Random weights rarely stop by themselves: cap the reply (on a busy CPU each token counts)."""
    page.get_by_role("tab", name="Settings").click()
    page.fill("#max-new-tokens input[type=number]", str(tokens))
    page.keyboard.press("Tab")
    page.get_by_role("tab", name="Inspector").click()


def send_with_probabilities(page, text: str) -> None:
    short_replies(page)
    page.click("#token-probabilities-view button")  # open the view before sending
    page.wait_for_function("() => document.querySelector('#token-probabilities')?.innerText.includes('No reply yet')",
                           timeout=10_000)
    page.fill("#composer textarea", text)
    page.keyboard.press("Enter")
    page.wait_for_selector("#token-probabilities .tp", timeout=120_000)


def test_token_probabilities_of_the_last_reply(app_server, page):
    open_app(page, app_server.url)
    send_with_probabilities(page, "Say something.")
    tokens = page.locator("#token-probabilities .tp")
    out = int(re.search(r"([\d,]+) out", page.inner_text("#chatbot .reply-stats")).group(1))
    assert tokens.count() == out, "every generated token is shown"
    probabilities = page.eval_on_selector_all("#token-probabilities .tp", "els => els.map(e => Number(e.dataset.p))")
    assert all(0 < p <= 1 for p in probabilities)
    assert page.locator("#token-probabilities .tp-alt").first.is_hidden()
    tokens.first.hover()
    alternatives = page.locator("#token-probabilities .tp").first.locator(".tp-alt")
    assert alternatives.is_visible() and alternatives.locator("tr").count() == 5
    screenshot(page, "token-probabilities")


def test_phone_width(app_server, browser):
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    try:
        open_app(page, app_server.url)
        attach(page, EXAMPLES / "street.jpg")
        page.wait_for_selector("#soft-token-map figure[data-kind=image]", timeout=60_000)
        assert drawn_counts(page) == [image_tokens(page)]
        box = page.locator("#soft-token-map svg.stm-image").bounding_box()
        assert 0 <= box["x"] and box["x"] + box["width"] <= 390
        short_replies(page)
        page.click("#token-probabilities-view button")
        page.fill("#composer textarea", "Hello from a phone")
        page.keyboard.press("Enter")
        page.wait_for_selector("#token-probabilities .tp", timeout=120_000)
        page.locator("#token-probabilities .tp").nth(1).tap()
        assert page.locator("#token-probabilities .tp").nth(1).locator(".tp-alt").is_visible()
        assert no_horizontal_scroll(page)
        screenshot(page, "phone-what-the-model-sees")
    finally:
        context.close()


def mapped_names(page) -> list[str]:
    return page.eval_on_selector_all("#soft-token-map figure figcaption b:first-of-type",
                                     "els => els.map(e => e.textContent)")


def test_a_picked_message_shows_its_own_media(processor, page):
    """After two messages with an image each, the map shows the latest; a click on the first
    message (its image, or the reply to it) maps the first one's; a file in the draft wins."""
    from conftest import start_app
    from replay import ReplayEngine

    server = start_app(ReplayEngine(processor, lambda prompt: "I see it.<turn|>"))
    try:
        open_app(page, server.url)
        for n, name in enumerate(("shapes.png", "street.jpg"), start=1):
            attach(page, EXAMPLES / name)
            page.wait_for_selector("#composer img", timeout=30_000)
            page.fill("#composer textarea", f"Picture {n}")
            page.keyboard.press("Enter")
            page.wait_for_function(f"() => document.querySelectorAll('#chatbot [data-testid=bot]').length >= {n}",
                                   timeout=30_000)
            page.wait_for_function("() => !document.querySelector('#composer textarea').disabled", timeout=30_000)
        page.wait_for_function("() => document.querySelector('#soft-token-map').innerText.includes('street.jpg')",
                               timeout=30_000)
        assert mapped_names(page) == ["street.jpg"], "the latest message's media"

        page.locator("#chatbot [data-testid=bot]").first.click()  # the reply to the first message
        page.wait_for_function("() => document.querySelector('#soft-token-map').innerText.includes('shapes.png')",
                               timeout=30_000)
        assert mapped_names(page) == ["shapes.png"]
        assert "picked in the chat" in page.inner_text("#soft-token-map")
        assert drawn_counts(page) == [image_grid(processor, 640, 480, 280).soft_tokens]
        screenshot(page, "soft-token-map-of-a-picked-message")

        attach(page, EXAMPLES / "speech.wav")
        page.wait_for_function("() => !document.querySelector('#soft-token-map').innerText.includes('picked')",
                               timeout=30_000)
        assert mapped_names(page) == ["speech.wav"], "the draft's media come first"
    finally:
        server.demo.close()


PATCHED_LAYERS = ("#template-messages", "#template-raw", "#template-expanded-colour")


def layer_bodies(page) -> list[str]:
    return [page.inner_html(f"{layer} .tph-body") for layer in PATCHED_LAYERS]


def test_layers_patched_while_typing_read_as_a_fresh_render(app_server, page, browser):
    """The three layers are patched from their first changed piece on (tail_patched_html): after
    a draft is typed, changed in the middle, shortened and emptied, each reads exactly as in a
    page that drew the last draft at once."""
    drafts = ["Tell me about <b>Oslo</b>", "Tell me about Bergen & the fjords, please", "Tell", "", "Tell us"]
    open_app(page, app_server.url)
    for draft in drafts:
        page.fill("#composer textarea", draft)
        if draft:
            page.wait_for_function(
                "text => document.querySelector('#template-messages').innerText.includes(JSON.stringify(text))",
                arg=draft, timeout=30_000)
        else:  # no prompt: the layer says so
            page.wait_for_function("() => document.querySelector('#template-raw .tph-frame[data-empty]')",
                                   timeout=30_000)
            page.get_by_role("radio", name="Template").click()
            assert page.inner_text("#template-raw") == "Layer 2: apply_chat_template(tokenize=False)\n" + LAYER_EMPTY
            page.get_by_role("radio", name="Messages").click()
    fresh = browser.new_page()
    try:
        open_app(fresh, app_server.url)
        fresh.fill("#composer textarea", drafts[-1])
        fresh.wait_for_function("() => document.querySelector('#template-raw').innerText.includes('Tell us')",
                                timeout=30_000)
        assert layer_bodies(page) == layer_bodies(fresh)
        assert "<b>" not in page.inner_html("#template-raw") and "Tell us" in page.inner_text("#template-raw")
    finally:
        fresh.close()


@pytest.mark.parametrize("lost", [
    "view.version -= 1",  # a patch it never applied
    "view.series = 'ended'; view.version = 1e9",  # a session that started again (its time to live)
])
def test_a_page_that_cannot_apply_a_patch_asks_for_the_whole_view(app_server, page, browser, lost):
    """A layer's patch names the view it applies to; a page without that view asks for the
    whole inspector again, and then reads as a fresh render."""
    open_app(page, app_server.url)
    page.fill("#composer textarea", "Tell me about Oslo")
    page.wait_for_function("() => document.querySelector('#template-raw').innerText.includes('Oslo')",
                           timeout=30_000)
    page.evaluate(f"() => Object.values(window.__tailPatchedViews).forEach(view => {{ {lost}; }})")
    page.fill("#composer textarea", "Tell me about Bergen")
    page.wait_for_function("""() => ['#template-messages', '#template-raw', '#template-expanded-colour']
        .every(layer => document.querySelector(layer).innerText.includes('Bergen'))""", timeout=30_000)
    fresh = browser.new_page()
    try:
        open_app(fresh, app_server.url)
        fresh.fill("#composer textarea", "Tell me about Bergen")
        fresh.wait_for_function("() => document.querySelector('#template-raw').innerText.includes('Bergen')",
                                timeout=30_000)
        page.wait_for_timeout(500)  # the slices of the patch, if any are left
        assert layer_bodies(page) == layer_bodies(fresh)
    finally:
        fresh.close()


def test_the_plain_text_of_a_layer_follows_the_draft_while_open(app_server, page):
    """The "Plain text (copy)" of layer 2 is filled when opened and kept current while open;
    closed, it is not kept current, and reopened it shows the draft as it is then."""
    open_app(page, app_server.url)
    page.locator("#layer-choice").get_by_text("Template").click()
    toggle = page.locator("#layer-template").get_by_text("Plain text (copy)")
    box = "#template-text textarea"
    page.fill("#composer textarea", "First draft")
    toggle.click()
    page.wait_for_function(f"() => document.querySelector('{box}')?.value.includes('First draft<turn|>')",
                           timeout=30_000)
    assert page.input_value(box) == page.inner_text("#template-raw .tph-body"), "the layer's text, as shown"
    page.fill("#composer textarea", "Second draft")
    page.wait_for_function(f"() => document.querySelector('{box}')?.value.includes('Second draft<turn|>')",
                           timeout=30_000)
    toggle.click()
    page.fill("#composer textarea", "Third draft")
    page.wait_for_function("() => document.querySelector('#template-raw').innerText.includes('Third draft')",
                           timeout=30_000)
    toggle.click()
    page.wait_for_function(f"() => document.querySelector('{box}')?.value.includes('Third draft<turn|>')",
                           timeout=30_000)
    assert "Second draft" not in page.input_value(box)
