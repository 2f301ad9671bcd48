"""Shared fixtures: the bundled tiny Gemma 4 through the real transformers classes, a real
Gradio server on loopback, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import settings

# CI explores the same examples at every run (HYPOTHESIS_PROFILE=ci, .ci/run): a landing never
# fails on an input no earlier run tried. Elsewhere each run tries new ones.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ARTIFACTS = ROOT / "test-artifacts"
BUNDLED_MODEL = ROOT / "assets" / "tiny-gemma4"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic", "--no-first-run"]
# "Load a conversation" is a gr.UploadButton: its file input sits just before the button.
CHAT_FILE_INPUT = "input[type=file]:has(+ #upload-chat)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def processor():
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(BUNDLED_MODEL)


@pytest.fixture(scope="session")
def tiny_engine():
    from gemma4_ui.engines.local.engine import LocalEngine

    return LocalEngine("tiny", device="cpu").load()


@pytest.fixture(scope="session")
def tiny_process_engine():
    """The bundled model in a generation process of its own, as the app runs it."""
    from gemma4_ui.engines.local.engine import LocalEngine

    engine = LocalEngine("tiny", device="cpu", separate_process=True).load()
    yield engine
    engine.close()


# -- a real `transformers serve`, for the remote engine -------------------------------------------

@pytest.fixture(scope="session")
def server_port(tmp_path_factory):
    """`transformers serve` with the bundled model preloaded. An empty Hub cache, so that
    /v1/models answers (with no models: the preloaded one is not listed)."""
    port = free_port()
    work = tmp_path_factory.mktemp("serve")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(work / "hub")}
    (work / "hub").mkdir()
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve",  # = `transformers serve`
               str(BUNDLED_MODEL), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    with open(work / "serve.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for_health(port, process, work / "serve.log")
        yield port
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen, grace: float = 15) -> None:
    """Terminate, and kill what does not end within `grace` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_for_health(port: int, process: subprocess.Popen, log: Path, limit: float = 180) -> None:
    deadline = time.time() + limit
    while time.time() < deadline:
        if process.poll() is not None:
            pytest.fail(f"transformers serve exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"transformers serve did not become healthy in {limit:g} s:\n{log.read_text()[-3000:]}")


class AppServer:
    def __init__(self, demo, url: str, session):
        self.demo, self.url, self.session = demo, url, session

    def client(self):
        from gradio_client import Client

        return Client(self.url, verbose=False)


def start_app(engine, second=None, **overrides) -> AppServer:
    from gemma4_ui.config import Settings
    from gemma4_ui.web.app import build_ui, enable_queue, page_options
    from gemma4_ui.web.handlers.shared import SharedChatHandlers

    settings = Settings(model="tiny", **overrides)
    session = SharedChatHandlers(engine, settings, second=second)
    demo = enable_queue(build_ui(session), settings.gpu_concurrency)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **page_options(),
                max_file_size=int(settings.limits.max_file_mb * 1024 * 1024))
    return AppServer(demo, f"http://127.0.0.1:{port}/", session)


@pytest.fixture(scope="session")
def app_server(tiny_engine):
    server = start_app(tiny_engine)
    yield server
    server.demo.close()


@pytest.fixture()
def client(app_server):
    return app_server.client()


@pytest.fixture(scope="session")
def playwright():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright):
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


@pytest.fixture()
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    context.close()


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture()
def session_handlers(tiny_engine):
    """The handlers all users share, on the tiny model, with default settings."""
    from gemma4_ui.config import Settings
    from gemma4_ui.web.handlers.shared import SharedChatHandlers

    return SharedChatHandlers(tiny_engine, Settings(model="tiny"))


def chat_messages(result) -> list[dict]:
    """The chat from a /chat (or /tool_result, /cancel_tool) result: the app's chat is two
    Chatbots, the history and below it the live part (a streaming turn, or a notice). While a
    turn streams the history is not sent (gradio_client shows an update marker there), so a
    streamed update holds the live part only."""
    return [message for part in result if isinstance(part, list) for message in part]
