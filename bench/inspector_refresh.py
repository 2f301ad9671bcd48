"""Inspector refresh: from a change of the draft to updated token counts, with a realistic
history (10 turns: a 12 MP photo, a 1080p screenshot, a 1600×1200 photo, a 30 s recording).

In-process: `InspectorHandlers.inspect`, as the UI calls it on every change of the composer.
In the browser: type into the composer, or attach a photo, and wait until #token-counts
shows the new counts (Gradio's queue, the handler, the HTML update, rendering).

The inspector counts with a copy of the processor that expands each medium once; the
figures also check that its ids equal the real processor's, token for token.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from tests.conftest import CHAT_FILE_INPUT

from . import media_files
from .chromium import app_page, browser
from .context import Context
from .harness import Figure, Section, Target, interleaved

REPLY = ("Here is what I can tell you about it, step by step, with the details that matter most and a short "
         "summary at the end so that the answer stays easy to follow. ") * 5
TEXT_TOKENS = ("() => Number((document.querySelector('#token-counts').innerText"
               ".match(/Text tokens\\s+([\\d,]+)/) || [0, '-1'])[1].replace(/,/g, ''))")
# Type one word into the composer; resolve when the counts show more text tokens.
TYPE_SCRIPT = """async (word) => {
    const textTokens = %s;
    const counts = document.querySelector('#token-counts');
    const textarea = document.querySelector('#composer textarea');
    const before = textTokens();
    const changed = new Promise(resolve => new MutationObserver((_, observer) => {
        if (textTokens() > before) { observer.disconnect(); resolve(performance.now()); }
    }).observe(counts, {subtree: true, childList: true, characterData: true}));
    const started = performance.now();
    textarea.value += ' ' + word;
    textarea.dispatchEvent(new Event('input', {bubbles: true}));
    return (await changed) - started;
}""" % TEXT_TOKENS


def history(ctx: Context):
    from gemma4_ui.core.conversation import AssistantTurn, Conversation, UserTurn
    from gemma4_ui.media.decoding import load_media

    screenshot = media_files.screenshot_png(ctx.workdir / "screenshot.png")
    second_photo = media_files.photo_jpeg(ctx.workdir / "second-photo.jpg", 1600, 1200, seed=5)
    return Conversation([
        UserTurn("What is in this photo?", [load_media(ctx.photo)]), AssistantTurn(content=REPLY),
        UserTurn("Which colours dominate?"), AssistantTurn(content=REPLY),
        UserTurn("Transcribe this recording.", [load_media(ctx.audio)]), AssistantTurn(content=REPLY),
        UserTurn("Compare the screenshot with the photo.", [load_media(screenshot), load_media(second_photo)]),
        AssistantTurn(content=REPLY),
        UserTurn("Summarise our conversation."), AssistantTurn(content=REPLY),
    ])


def fresh_copies(photo: Path, folder: Path, count: int) -> list[Path]:
    """Copies under new names: each attach is a file the app has never decoded."""
    folder.mkdir(exist_ok=True)
    return [Path(shutil.copy(photo, folder / f"attached-{time.monotonic_ns()}-{n}.jpg")) for n in range(count)]


def timed_ms(call) -> float:
    started = time.perf_counter()
    call()
    return 1000 * (time.perf_counter() - started)


def _options():
    from gemma4_ui.core.options import ChatOptions

    return ChatOptions(max_new_tokens=256, temperature=0.0)


# -- exactness ---------------------------------------------------------------------------------

def differing_ids(session, conversation) -> int:
    """Positions where the inspector's ids or token types differ from the real processor's."""
    from gemma4_ui.core.prompt import build_spec, model_inputs

    spec = build_spec(conversation, _options(), session.registry)
    real = model_inputs(session.engine.processor, spec)
    counted = model_inputs(session._counting_processor(session.engine.processor), spec)
    differing = 0
    for key in ("input_ids", "mm_token_type_ids"):
        a, b = real[key][0].tolist(), counted[key][0].tolist()
        differing += abs(len(a) - len(b)) + sum(x != y for x, y in zip(a, b))
    return differing


def exactness_conversation(ctx: Context, conversation, attached: list):
    """The history, a draft with `attached`, and what stresses the cache most: a video and a
    second clip of another length (audio features are padded to the longest clip)."""
    from gemma4_ui.core.conversation import Conversation, UserTurn
    from gemma4_ui.media.decoding import load_media

    short_clip = media_files.speech_like_wav(ctx.workdir / "short.wav", seconds=3.3, seed=7)
    video = Path(__file__).resolve().parent.parent / "assets" / "examples" / "bouncing_ball.mp4"
    media = [*attached, load_media(video), load_media(short_clip)]
    return Conversation(conversation.turns + [UserTurn("And these?", media)])


# -- the figures -------------------------------------------------------------------------------

def in_process(ctx: Context, conversation) -> list[Figure]:
    from gemma4_ui.config import Settings
    from gemma4_ui.core.prompt import build_spec, model_inputs
    from gemma4_ui.web.handlers.shared import SharedChatHandlers
    from gemma4_ui.web.session import Draft

    session = SharedChatHandlers(ctx.engine, Settings(model="tiny"))
    user = session.new_session()
    session.inspector.inspect(None, conversation, user, False, _options())  # after a reply the UI refreshes once
    attachments = iter(fresh_copies(ctx.photo, ctx.workdir / "attach", 2 * ctx.runs + 1))
    words = iter(range(10**6))
    spec = build_spec(conversation, _options(), session.registry)

    def type_text() -> float:
        draft = {"text": "Tell me more about" + f" word{next(words)}", "files": []}
        return timed_ms(lambda: session.inspector.inspect(draft, conversation, user, False, _options()))

    def attach_photo() -> float:
        draft = {"text": "And this one?", "files": [str(next(attachments))]}
        return timed_ms(lambda: session.inspector.inspect(draft, conversation, user, False, _options()))

    ms = interleaved({"text": type_text, "image": attach_photo,
                      "processor": lambda: timed_ms(lambda: model_inputs(ctx.engine.processor, spec))}, 2 * ctx.runs)
    attached = session.user_turn(Draft("And this one?", [str(next(attachments))]), user).media
    preview = exactness_conversation(ctx, conversation, attached)
    return [
        Figure("inspector, text typed (in-process)", ms["text"], "ms", Target("<", 100), digits=1),
        Figure("inspector, 12 MP photo attached (in-process)", ms["image"], "ms", Target("<", 500), digits=0,
               note="decoding the new photo included"),
        Figure("one full processor pass over the history, for scale", ms["processor"], "ms", digits=0,
               note="what every refresh cost before the inspector cached each medium's expansion"),
        Figure("inspector ids differing from the processor's", [float(differing_ids(session, preview))], "",
               Target("≤", 0), digits=0, note="history + a video + two clips of different lengths + the new photo"),
    ]


def in_browser(ctx: Context, conversation) -> list[Figure]:
    from gemma4_ui.core import transcript
    from gemma4_ui.core.options import ChatOptions

    saved = ctx.workdir / "history.json"
    saved.write_text(transcript.dumps(conversation, ChatOptions()), encoding="utf-8")
    attachments = fresh_copies(ctx.photo, ctx.workdir / "attach-browser", ctx.runs + 1)
    text_ms, image_ms = [], []
    with browser() as chromium:
        for run, attachment in enumerate(attachments):  # the first run warms the server up
            with app_page(chromium, ctx.app.url) as page:
                load_history(page, saved)
                typed = [page.evaluate(TYPE_SCRIPT, f"word{n}") for n in range(3)]
                started = time.perf_counter()
                page.set_input_files("#composer input[type=file]", str(attachment))
                page.wait_for_function(f"() => document.querySelector('#token-counts').innerText"
                                       f".includes('{attachment.name}')", timeout=60_000)
                attached = 1000 * (time.perf_counter() - started)
            if run:
                text_ms += typed
                image_ms.append(attached)
    return [
        Figure("inspector, text typed (Chromium, end to end)", text_ms, "ms", Target("<", 100), digits=0),
        Figure("inspector, 12 MP photo attached (Chromium, end to end)", image_ms, "ms", Target("<", 500),
               digits=0, note="from choosing the file; its upload included"),
    ]


def load_history(page, saved: Path) -> None:
    """Load the saved conversation, then wait until the inspector has settled on it."""
    page.get_by_role("tab", name="Save / load").click()  # tabs render when first shown
    page.set_input_files(CHAT_FILE_INPUT, str(saved))
    page.wait_for_function(
        "() => /Audio soft tokens\\s+[1-9]/.test(document.querySelector('#token-counts').innerText)",
        timeout=120_000)
    settled, last = time.monotonic(), page.inner_text("#token-counts")
    while time.monotonic() - settled < 1.0:  # refreshes after loading (settings change too) end
        time.sleep(0.1)
        now = page.inner_text("#token-counts")
        if now != last:
            settled, last = time.monotonic(), now


def inspector_refresh(ctx: Context) -> Section:
    conversation = history(ctx)
    return Section("inspector", in_process(ctx, conversation) + in_browser(ctx, conversation))
