"""What the UI and the log write: no markdown markup where it is not rendered, names said
once, the model status in one line, and a reply length that suits the model."""

from __future__ import annotations

from replay import ReplayEngine

from gemma4_ui.config import BUNDLED_TRAINED, Settings
from gemma4_ui.engines.base import ModelStatus
from gemma4_ui.tools.registry import ToolRegistry, default_registry
from gemma4_ui.web.examples import EXAMPLE_SCHEMA
from gemma4_ui.web.handlers.shared import TRAINED_DEMO_TEMPERATURE, UNTRAINED_DEMO_MAX_NEW_TOKENS, SharedChatHandlers
from gemma4_ui.web.handlers.tools import tool_choices, tools_markdown


def test_tool_docs_and_choices_read_cleanly():
    registry = ToolRegistry()
    for spec in default_registry().specs():
        registry.adopt(spec)
    registry.declare(EXAMPLE_SCHEMA)
    docs = tools_markdown(registry)
    summaries = [line for line in docs.splitlines() if "<summary>" in line]
    assert len(summaries) == len(registry.specs()) and not any("**" in line for line in summaries), \
        "markdown is not rendered inside <summary>"
    assert "sample data" in docs
    assert "<b>Weather (demo, sample data)</b>" in docs, "raw HTML: no markdown escapes (they would show)"
    assert not any("\\" in line for line in summaries)
    labels = dict((value, label) for label, value in tool_choices(registry))
    assert labels["lookup_order"] == "lookup_order", "a declared tool is named once"
    assert labels["calculator"].endswith("— calculator")


def test_the_status_is_plain_text_and_has_a_one_line_headline():
    status = ModelStatus("tiny", "tiny-gemma4", "bundled", device="cpu", dtype="float32")
    assert "**" not in status.describe() and status.describe().startswith("tiny-gemma4 on cpu (float32)")
    assert status.headline() == "tiny-gemma4 · cpu · " + ("demo model" if BUNDLED_TRAINED else "random weights")
    hub = ModelStatus("google/gemma-4-E2B-it", "google/gemma-4-E2B-it", "hub", device="cuda", notice="Slow disk")
    assert hub.headline() == "google/gemma-4-E2B-it · cuda ⚠️" and "Slow disk" in hub.describe()


def test_the_default_reply_length_is_short_only_for_the_untrained_bundle(processor):
    engine = ReplayEngine(processor, [])  # its status says: the bundled model
    untrained = UNTRAINED_DEMO_MAX_NEW_TOKENS if not BUNDLED_TRAINED else Settings.max_new_tokens
    def default(settings: Settings) -> int:
        return SharedChatHandlers(engine, settings).default_options().max_new_tokens

    assert default(Settings()) == untrained
    assert default(Settings(max_new_tokens=600)) == 600, "the operator's choice stays"
    engine.status = ModelStatus("google/gemma-4-E2B-it", "google/gemma-4-E2B-it", "hub")
    assert default(Settings()) == Settings.max_new_tokens


def test_the_trained_bundle_defaults_to_greedy_decoding(processor):
    """It was trained and measured greedy; the operator's temperature stays, and other models sample."""
    engine = ReplayEngine(processor, [])  # its status says: the bundled model
    def default(settings: Settings) -> float:
        return SharedChatHandlers(engine, settings).default_options().temperature

    assert default(Settings()) == (TRAINED_DEMO_TEMPERATURE if BUNDLED_TRAINED else Settings.temperature)
    assert default(Settings(temperature=0.7)) == 0.7
    engine.status = ModelStatus("google/gemma-4-E2B-it", "google/gemma-4-E2B-it", "hub")
    assert default(Settings()) == Settings.temperature


def test_the_trained_bundle_starts_with_its_built_in_tools_on(processor):
    """It is there to show the protocol, tool calls first; the operator's choice stays, and a
    real checkpoint starts with none."""
    engine = ReplayEngine(processor, [])  # its status says: the bundled model
    def default(settings: Settings) -> list[str]:
        return SharedChatHandlers(engine, settings).default_options().enabled_tools

    builtins = ["calculator", "convert_units", "current_time", "get_current_weather"]
    assert sorted(default(Settings())) == (builtins if BUNDLED_TRAINED else [])
    assert default(Settings(enabled_tools=["calculator"])) == ["calculator"]
    assert default(Settings(enabled_tools=[])) == [], "the operator can start with none"
    engine.status = ModelStatus("google/gemma-4-E2B-it", "google/gemma-4-E2B-it", "hub")
    assert default(Settings()) == []
