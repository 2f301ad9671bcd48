"""Where things sit on the screens demos happen on: a phone (touch, upright and sideways), a
laptop, a projector.
Each test leaves a screenshot of what it checked in test-artifacts/."""

from __future__ import annotations

import pytest
from conftest import screenshot

SCREENS = {
    "phone": dict(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True),
    "small-phone": dict(viewport={"width": 320, "height": 640}, device_scale_factor=2, is_mobile=True, has_touch=True),
    "laptop": dict(viewport={"width": 1400, "height": 900}),
    "projector": dict(viewport={"width": 1920, "height": 1080}),
}
IDLE = "() => !document.querySelector('#composer textarea').disabled"


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, app_server):
    context = browser.new_context(**SCREENS[request.param])
    page = context.new_page()
    page.goto(app_server.url)
    page.wait_for_selector("#composer textarea", timeout=60_000)
    page.wait_for_selector("#chatbot .example", timeout=10_000)
    yield request.param, page
    context.close()


def box(page, selector: str) -> dict:
    """The element's box relative to the viewport as the page first shows it (unscrolled)."""
    page.evaluate("window.scrollTo(0, 0)")
    found = page.locator(selector).last.bounding_box()
    assert found, f"{selector} is not on the page"
    return found


def on_first_screen(page, selector: str) -> bool:
    b, height = box(page, selector), page.viewport_size["height"]
    return b["y"] >= 0 and b["y"] + b["height"] <= height + 0.5 and b["x"] >= 0 \
        and b["x"] + b["width"] <= page.viewport_size["width"] + 0.5


def line_height(page, selector: str) -> float:
    return page.evaluate(f"""() => {{ const s = getComputedStyle(document.querySelector('{selector}'));
                                      return parseFloat(s.lineHeight) || 1.5 * parseFloat(s.fontSize); }}""")


def test_first_screen_holds_the_composer_the_chat_and_a_one_line_status(screen):
    name, page = screen
    height = page.viewport_size["height"]
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1"), \
        "nothing sticks out sideways"
    for selector in ("#composer", "#stop", "#new-chat", "#chatbot"):
        assert on_first_screen(page, selector), f"{selector} is on the first screen ({name})"
    # The chat takes the height the screen has: from under the header to just above the
    # composer, whatever the screen (not a fixed number of pixels).
    chat, composer = box(page, "#chatbot"), box(page, "#composer")
    assert composer["y"] - (chat["y"] + chat["height"]) < 40, "the composer sits right under the chat"
    assert box(page, "#new-chat")["y"] + box(page, "#new-chat")["height"] > height - 120, \
        "the chat stretches until the buttons reach the bottom of the screen"
    assert chat["height"] > 0.6 * height
    # The composer's prompt fits on one line; a phone's width goes to the chat, not to margins.
    assert box(page, "#composer textarea")["height"] < 2 * line_height(page, "#composer textarea")
    if SCREENS[name].get("is_mobile"):
        assert chat["x"] <= 16 and page.viewport_size["width"] - (chat["x"] + chat["width"]) <= 16
    # The status is one line, with the whole of it a tap away.
    summary = "#model-status summary"
    assert box(page, "#model-status")["height"] < 2 * line_height(page, summary) + 8
    assert "tiny-gemma4" in page.inner_text(summary)
    assert not page.locator("#model-status details p").is_visible()
    page.locator(summary).click()
    assert page.locator("#model-status details p").is_visible()
    assert "bundled tiny Gemma 4" in page.inner_text("#model-status")
    page.locator(summary).click()
    # The examples are in the empty chat, on the first screen.
    examples = page.locator("#chatbot .example")
    assert examples.count() == 7
    for i in range(examples.count()):
        b = examples.nth(i).bounding_box()
        assert b["y"] + b["height"] <= height, f"example {i} is on the first screen ({name})"
    if not SCREENS[name].get("is_mobile"):
        chat, inspector = box(page, "#chatbot"), box(page, "#token-counts")
        assert chat["x"] + chat["width"] <= inspector["x"], "the chat and the inspector sit side by side"
    screenshot(page, f"layout-{name}")


def test_an_example_is_one_tap_away_and_the_reply_stays_on_the_first_screen(app_server, browser):
    context = browser.new_context(**SCREENS["phone"])
    page = context.new_page()
    try:
        page.goto(app_server.url)
        page.wait_for_selector("#chatbot .example", timeout=60_000)
        page.locator("#chatbot .example", has_text="Thinking").tap()
        page.wait_for_function("() => document.querySelector('#composer textarea').value.includes('Lisbon')",
                               timeout=10_000)
        page.get_by_role("tab", name="Settings").tap()
        assert page.locator("#thinking input").is_checked(), "the example's settings come with it"
        page.locator("#composer textarea").fill("Plan a day trip to Lisbon, from a phone.")
        page.locator("#composer button.submit-button").tap()
        page.wait_for_function("() => document.querySelector('#composer textarea').disabled", timeout=30_000)
        page.wait_for_function(IDLE, timeout=120_000)
        # The chat scrolls itself to its end: the end of the last message shows inside it.
        last, chat = box(page, "#chatbot .message-row"), box(page, "#chatbot")
        assert chat["y"] < last["y"] + last["height"] <= chat["y"] + chat["height"] + 1
        assert on_first_screen(page, "#composer")
        screenshot(page, "layout-phone-after-a-reply")
    finally:
        context.close()


# Phones held sideways: a short screen, wide enough for the inspector beside the chat or not.
SHORT_SCREENS = {
    "phone-sideways": dict(viewport={"width": 844, "height": 390}, device_scale_factor=3, is_mobile=True, has_touch=True),
    "small-phone-sideways": dict(viewport={"width": 640, "height": 360}, device_scale_factor=3, is_mobile=True,
                                 has_touch=True),
}


@pytest.mark.parametrize("name", list(SHORT_SCREENS))
def test_a_short_screen_holds_the_chat_and_the_composer_and_keeps_them_there(name, app_server, browser):
    context = browser.new_context(**SHORT_SCREENS[name])
    page = context.new_page()
    try:
        page.goto(app_server.url)
        page.wait_for_selector("#chatbot .example", timeout=60_000)
        height = page.viewport_size["height"]
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
        for selector in ("#chatbot", "#composer", "#stop", "#new-chat"):
            assert on_first_screen(page, selector), f"{selector} is on the first screen ({name})"
        chat, composer, stop = box(page, "#chatbot"), box(page, "#composer"), box(page, "#stop")
        assert composer["y"] - (chat["y"] + chat["height"]) < 40, "the composer sits right under the chat"
        assert stop["y"] + stop["height"] > height - 40, "the chat takes the height the rest leaves"
        # The empty chat shows its examples from the first one.
        assert page.evaluate("document.querySelector('#chatbot').scrollTop") == 0
        first = page.locator("#chatbot .example").first.bounding_box()
        assert chat["y"] <= first["y"] and first["y"] + first["height"] <= chat["y"] + chat["height"]

        page.locator("#composer textarea").fill("Plan a day trip to Lisbon.")
        page.locator("#composer button.submit-button").tap()
        page.wait_for_function("() => document.querySelector('#composer textarea').disabled", timeout=30_000)
        page.wait_for_function(IDLE, timeout=120_000)
        assert page.evaluate("window.scrollY") == 0, "the page stays where it was: the chat and the composer in view"
        last = page.locator("#chatbot .message-row").last.bounding_box()
        assert chat["y"] < last["y"] + last["height"] <= chat["y"] + chat["height"] + 1, "the reply's end shows"
        assert on_first_screen(page, "#composer")
        screenshot(page, f"layout-{name}-after-a-reply")
        # A new conversation shows the examples from the first again.
        page.locator("#new-chat").tap()
        page.wait_for_selector("#chatbot .example", timeout=30_000)
        page.wait_for_function("() => document.querySelector('#chatbot').scrollTop === 0", timeout=10_000)
    finally:
        context.close()


def fonts_drawing(cdp, selector: str) -> set[str]:
    """The fonts Chromium drew the element's text in, by family (emoji aside)."""
    node = cdp.send("DOM.querySelector", {"nodeId": cdp.send("DOM.getDocument")["root"]["nodeId"],
                                          "selector": selector})["nodeId"]
    assert node, f"{selector} is on the page"
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return {f["familyName"] for f in fonts} - {"Noto Color Emoji"}


def test_bold_text_is_drawn_in_the_theme_fonts_alone(app_server, page):
    page.goto(app_server.url)
    page.locator("#composer textarea").fill("How many tokens is this?")
    page.wait_for_selector("#token-counts th", timeout=30_000)
    page.evaluate("""() => { const b = document.createElement('b'); b.id = 'bold-code';
                             b.style.fontFamily = 'var(--font-mono)'; b.textContent = 'def tokens(): return 42';
                             document.querySelector('#token-counts').append(b); }""")
    page.evaluate("document.fonts.ready")
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    for selector in ("#title h2", "#token-counts th", "#token-counts td b"):
        assert fonts_drawing(cdp, selector) == {"Source Sans 3"}, f"{selector}: one font, the theme's"
    assert fonts_drawing(cdp, "#bold-code") == {"IBM Plex Mono"}, "bold code: the theme's mono font"


LAYERS = ("#layer-messages", "#layer-template", "#layer-expanded")


def shown(page, selector: str) -> bool:
    return page.evaluate(f"() => document.querySelector('{selector}').getBoundingClientRect().width > 0")


def test_the_three_protocol_layers_side_by_side_on_a_projector_one_at_a_time_below(screen):
    """On a wide screen the message data, the template and the expanded tokens stand next to
    each other; narrower, a switch shows one at a time, and each is the live one when picked."""
    name, page = screen
    page.fill("#composer textarea", "What is in this picture?")
    page.wait_for_function("() => document.querySelector('#template-messages').innerText.includes('in this picture')",
                           timeout=30_000)
    page.locator("#layers").scroll_into_view_if_needed()
    if name == "projector":
        assert not page.locator("#layer-choice").is_visible(), "no switch when all three are shown"
        boxes = [page.locator(s).bounding_box() for s in LAYERS]
        assert all(b and b["width"] > 200 for b in boxes)
        assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"], "in order, left to right"
        assert max(b["y"] for b in boxes) - min(b["y"] for b in boxes) < 2, "on one line"
        screenshot(page, "layers-side-by-side-projector")
        return
    assert [shown(page, s) for s in LAYERS] == [True, False, False]
    for label, index in (("Template", 1), ("Expanded", 2), ("Messages", 0)):
        page.get_by_role("radio", name=label).click()
        page.wait_for_function(f"() => document.querySelector('{LAYERS[index]}').getBoundingClientRect().width > 0")
        assert [shown(page, s) for s in LAYERS] == [i == index for i in range(3)]
        if label == "Template":
            assert "in this picture" in page.inner_text("#template-raw"), "kept current while it was hidden"
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    screenshot(page, f"layers-one-at-a-time-{name}")
