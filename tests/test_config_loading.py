"""Command line, environment variables, and where the model comes from."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

from gemma4_ui.config import BUNDLED_MODEL, BUNDLED_TRAINED, parse_settings, second_model_settings
from gemma4_ui.engines.base import ModelLoadError, build_engine
from gemma4_ui.engines.loading import hub_reachable, pick_device, resolve_model


def test_defaults():
    settings = parse_settings([])
    assert settings.model is None and settings.backend == "local" and settings.device == "auto"
    assert settings.limits.max_audio_seconds == 30 and settings.limits.max_files_per_message == 8


def test_environment_then_flags(monkeypatch):
    monkeypatch.setenv("GEMMA4_MODEL", "tiny")
    monkeypatch.setenv("GEMMA4_MAX_FILE_MB", "5")
    monkeypatch.setenv("GEMMA4_THINKING", "true")
    monkeypatch.setenv("GEMMA4_SYSTEM_PROMPT", "Be brief.")
    settings = parse_settings([])
    assert settings.model == "tiny" and settings.limits.max_file_mb == 5 and settings.thinking
    assert settings.system_prompt == "Be brief."
    settings = parse_settings(["--model", "/some/path", "--max-file-mb", "7", "--no-thinking"])
    assert settings.model == "/some/path" and settings.limits.max_file_mb == 7 and not settings.thinking


def test_the_prompt_limit_from_flag_and_variable(monkeypatch, capsys):
    assert parse_settings([]).max_prompt_tokens is None, "unset: by the device (the engine's prompt_limit)"
    monkeypatch.setenv("GEMMA4_MAX_PROMPT_TOKENS", "4000")
    assert parse_settings([]).max_prompt_tokens == 4000
    assert parse_settings(["--max-prompt-tokens", "0"]).max_prompt_tokens == 0, "the flag wins; 0: the context"
    assert build_engine(parse_settings(["--model", "tiny"])).max_prompt_tokens == 4000, "the local engine takes it"
    monkeypatch.delenv("GEMMA4_MAX_PROMPT_TOKENS")
    for argv in (["--max-prompt-tokens", "-1"],
                 ["--backend", "openai", "--base-url", "http://x/v1", "--max-prompt-tokens", "4000"]):
        with pytest.raises(SystemExit):
            parse_settings(argv)
    err = capsys.readouterr().err
    assert "--max-prompt-tokens [GEMMA4_MAX_PROMPT_TOKENS] must be at least 0" in err and "a server sets its own" in err
    settings = parse_settings(["--backend", "openai", "--base-url", "http://x/v1", "--max-prompt-tokens", "0"])
    assert settings.max_prompt_tokens == 0


def test_bad_options_are_refused(capsys):
    for argv in (["--backend", "nope"], ["--backend", "openai"], ["--device", "tpu"],
                 ["--backend", "openai", "--base-url", "http://x/v1", "--assistant", "google/gemma-4-E2B-it-assistant"]):
        with pytest.raises(SystemExit):
            parse_settings(argv)
    assert "--base-url" in capsys.readouterr().err


def test_help_lists_every_option_with_its_variable():
    result = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    for text in ("--model", "GEMMA4_MODEL", "--device", "--dtype", "--host", "--port", "--share", "--backend",
                 "--max-audio-seconds"):
        assert text in result.stdout


def test_tiny_and_local_paths():
    tiny = resolve_model("tiny")
    assert tiny.path == str(BUNDLED_MODEL) and tiny.status.is_bundled and not tiny.status.notice
    local = resolve_model(str(BUNDLED_MODEL))
    assert local.status.source == "local" and local.path == str(BUNDLED_MODEL)


def test_unreachable_hub_falls_back_to_the_bundled_model_and_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not hub_reachable()
    resolved = resolve_model(None)
    assert resolved.status.is_bundled and resolved.path == str(BUNDLED_MODEL)
    assert "google/gemma-4-E2B-it" in resolved.status.notice and "unreachable" in resolved.status.notice
    honest = "not an assistant" if BUNDLED_TRAINED else "random weights"
    assert "bundled" in resolved.status.describe() and honest in resolved.status.describe()


def test_other_failures_are_reported_not_hidden(tmp_path):
    with pytest.raises(ModelLoadError, match="not a model folder"):
        resolve_model(str(tmp_path / "missing"))
    with pytest.raises(ModelLoadError, match="no CUDA"):
        pick_device("cuda", "auto")
    with pytest.raises(ModelLoadError, match="--dtype"):
        pick_device("cpu", "int3")


def test_a_folder_that_is_not_a_model_is_reported(tmp_path):
    from gemma4_ui.engines.loading import load_processor

    with pytest.raises(ModelLoadError, match="Could not load"):
        load_processor(resolve_model(str(tmp_path)))


def test_app_exits_with_a_clear_message_when_the_model_cannot_load(tmp_path):
    result = subprocess.run([sys.executable, "app.py", "--model", str(tmp_path)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1
    assert "Could not load" in result.stderr


def test_the_second_model_is_a_checkpoint_or_a_server(monkeypatch):
    assert second_model_settings(parse_settings(["--model", "tiny"])) is None
    local = second_model_settings(parse_settings(["--model", "tiny", "--compare-model", "google/gemma-4-E4B-it",
                                                  "--temperature", "0.5"]))
    assert (local.backend, local.model, local.temperature, local.compare_model) == (
        "local", "google/gemma-4-E4B-it", 0.5, None)
    monkeypatch.setenv("GEMMA4_COMPARE_MODEL", "http://127.0.0.1:8000/v1")
    remote = second_model_settings(parse_settings(["--model", "tiny", "--api-key", "k"]))
    assert (remote.backend, remote.base_url, remote.model, remote.api_key) == ("openai", "http://127.0.0.1:8000/v1",
                                                                                None, "k")


def test_app_exits_with_a_clear_message_when_the_second_model_cannot_load(tmp_path):
    result = subprocess.run([sys.executable, "app.py", "--model", "tiny", "--compare-model", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 1
    assert "Could not load" in result.stderr or "not a model folder" in result.stderr
