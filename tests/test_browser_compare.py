"""Compare in Debian's Chromium at phone, laptop and projector sizes, on the bundled model:
thinking off against on, then two image budgets, each with both prompts' counts and the
template diff; keep one side and continue. On a replay engine paced like a slow model: B
says it waits while A runs (one generation at a time), Stop stops both, and a new
conversation closes the comparison."""

from __future__ import annotations

import pytest
from conftest import screenshot, start_app
from replay import ReplayEngine
from test_browser import EXAMPLES, attach, no_horizontal_scroll, open_app

SIZES = {"phone": (390, 844), "laptop": (1366, 768), "projector": (1920, 1080)}


@pytest.fixture(scope="module")
def tiny_server(tiny_engine):
    server = start_app(tiny_engine, max_new_tokens=6, temperature=0.0)
    yield server
    server.demo.close()


def compare(page, text: str | None = None) -> None:
    if text is not None:
        page.fill("#composer textarea", text)
    page.click("#compare-run")
    page.wait_for_selector("#compare-panel", state="visible", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=120_000)


def counts_row(page, name: str) -> list[str]:
    return page.evaluate(f"""() => [...document.querySelectorAll('#compare-counts tr')]
        .map(r => [...r.cells].map(c => c.innerText.trim())).find(cells => cells[0] === {name!r})""")


def pick(page, label_id: str, value: str) -> None:
    page.click(f"#{label_id} input")
    page.fill(f"#{label_id} input", value)  # the list filters by what is typed
    page.get_by_role("option", name=value, exact=True).click()


@pytest.mark.parametrize("size", list(SIZES))
def test_compare_thinking_and_image_budgets_then_keep_one(tiny_server, page, size):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    open_app(page, tiny_server.url)
    page.click("#compare-view > button")
    page.locator("#compare-thinking").get_by_label("on").check()
    compare(page, "Why is the sky blue?")
    assert "thinking on" in page.inner_text("#compare-b-heading") and "thinking off" in page.inner_text(
        "#compare-a-heading")
    control = counts_row(page, "Control")
    assert int(control[2]) == int(control[1]) + 1 and control[3] == "+1", control
    assert "<|think|>" in page.inner_text("#compare-diff .diff-added")
    assert page.inner_text("#compare-a-chat").strip() and page.inner_text("#compare-b-chat").strip()
    a, b = (page.locator(f"#compare-{side}").bounding_box() for side in ("a", "b"))
    if size == "phone":
        assert b["y"] >= a["y"] + a["height"] - 1, "the columns stack on a phone"
    else:
        assert abs(a["y"] - b["y"]) < 2 and b["x"] >= a["x"] + a["width"] - 1, "side by side"
    assert no_horizontal_scroll(page)
    screenshot(page, f"compare-thinking-{size}")

    # Keep B: the chat continues with B's version, A's stays beside it.
    page.click("#keep-b")
    page.wait_for_selector("#compare-panel", state="hidden", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#chat-history').innerText.includes('‹ 2/2 ›')",
                           timeout=30_000)
    page.fill("#composer textarea", "And then?")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('#chat-history [data-testid=user]').length === 2",
                           timeout=60_000)
    page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=60_000)
    assert "And then?" in page.inner_text("#template-messages"), "the next prompt follows the branch kept"

    # Two image budgets: the same template, other image soft tokens.
    page.locator("#compare-thinking").get_by_label("same").check()
    pick(page, "compare-budget", "1120")
    attach(page, EXAMPLES / "shapes.png")
    page.wait_for_selector("#composer img", timeout=30_000)
    compare(page, "What is this?")
    page.wait_for_function("() => document.querySelector('#compare-b-heading').innerText.includes('image budget 1120')",
                           timeout=30_000)
    image = counts_row(page, "Image")
    assert int(image[1].replace(",", "")) < int(image[2].replace(",", "")) and image[3].startswith("+"), image
    assert "the same" in page.inner_text("#compare-diff"), "the budget changes the expansion, not the template"
    assert no_horizontal_scroll(page)
    screenshot(page, f"compare-budget-{size}")


@pytest.fixture(scope="module")
def two_models(tiny_engine, tmp_path_factory):
    """The bundled model, and a tiny random Gemma 4 Unified as the second model (--compare-model)."""
    from gemma4_ui.engines.local.engine import LocalEngine
    from scripts.build_tiny_checkpoints import build_unified

    unified = LocalEngine(str(build_unified(tmp_path_factory.mktemp("second") / "unified")), device="cpu").load()
    server = start_app(tiny_engine, second=unified, max_new_tokens=6, temperature=0.0)
    yield server
    server.demo.close()


def send(page, text: str, count: int) -> None:
    page.fill("#composer textarea", text)
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelectorAll('#chat-history [data-testid=user]').length === {count}",
                           timeout=60_000)
    page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=60_000)


def test_an_earlier_message_answered_by_the_second_model(two_models, page):
    page.set_viewport_size({"width": 1366, "height": 900})
    open_app(page, two_models.url)
    assert "+1 to compare" in page.inner_text("#model-status")
    send(page, "Hello", 1)
    send(page, "Goodbye", 2)
    page.fill("#composer textarea", "a draft I keep")
    page.click("#compare-view > button")
    pick(page, "compare-message", "Your message 1: Hello")
    pick(page, "compare-model", "unified")
    compare(page)
    assert "model unified" in page.inner_text("#compare-b-heading")
    assert "tiny-gemma4" in page.inner_text("#compare-a-heading"), "A names its model when two run"
    page.wait_for_function("() => document.querySelector('#chat-history').innerText.includes('‹ 2/3 ›')",
                           timeout=30_000)
    assert page.locator("#chat-history [data-testid=user]").count() == 1, "the chat goes on from the earlier message"
    assert page.input_value("#composer textarea") == "a draft I keep", "the draft was not the message answered"
    assert no_horizontal_scroll(page)
    screenshot(page, "compare-earlier-message-second-model")


def test_a_script_compares_an_earlier_message_with_the_second_model(two_models):
    client = two_models.client()
    for text in ("Hello", "Goodbye"):
        client.predict({"text": text, "files": []}, api_name="/chat")
    data = client.predict(None, b_model="unified", b_no_system_prompt=True, answer_message=2, api_name="/compare")
    assert data["models"]["b"] == "unified" and data["message_index"] == 3 and data["versions"] == {"a": 1, "b": 2}
    assert data["differs"] == ["model unified"], "no system prompt was set, so dropping it changes nothing"


def test_b_says_it_waits_and_stop_stops_both(processor, page):
    server = start_app(ReplayEngine(processor, lambda prompt: "Once upon a time " * 200 + "<turn|>",
                                    seconds_per_chunk=0.03))
    try:
        open_app(page, server.url)
        page.click("#compare-view > button")
        page.fill("#composer textarea", "Tell me a story")
        page.click("#compare-run")
        page.wait_for_function("() => document.querySelector('#compare-b-heading')?.innerText.includes('Waiting')",
                               timeout=30_000)
        page.wait_for_function("() => document.querySelector('#compare-a-chat')?.innerText.length > 40",
                               timeout=30_000)
        page.click("#stop")
        page.wait_for_function("() => document.querySelector('#stop').disabled", timeout=30_000)
        assert "Stopped" in page.inner_text("#compare-a-chat")
        assert "Waiting" not in page.inner_text("#compare-b-heading")
        assert "Once upon" not in page.inner_text("#compare-b-chat"), "B never started"
        page.click("#new-chat")
        page.wait_for_selector("#compare-panel", state="hidden", timeout=30_000)
    finally:
        server.demo.close()
