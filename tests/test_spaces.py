"""The repo is a Hugging Face Space as it stands, and ZeroGPU is handled right."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import threading

import pytest
from conftest import ROOT

from gemma4_ui.engines.local import zerogpu as gpu


def front_matter() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "README.md begins with YAML front matter"
    data = {}
    key = None
    for line in match.group(1).splitlines():
        if line.startswith("  - ") and key:
            data.setdefault(key, []).append(line[4:].strip())
        elif ":" in line:
            key, value = line.split(":", 1)
            data[key.strip()] = value.strip().strip('"') or []
    return data


def pinned(package: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.startswith(f"{package}=="):
            return line.split("==", 1)[1]
    raise AssertionError(f"{package} is not pinned")


def test_front_matter_is_a_valid_gradio_space():
    meta = front_matter()
    assert meta["sdk"] == "gradio"
    assert meta["sdk_version"] == pinned("gradio")
    assert meta["app_file"] == "app.py"
    assert meta["python_version"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "google/gemma-4-E2B-it" in meta["models"]
    assert meta["license"] and meta["title"] and meta["emoji"]
    assert 0 < len(meta["short_description"]) <= 60  # the Hub's limit


def test_importing_and_building_the_ui_loads_no_model_and_no_cuda():
    code = """
import json, sys
import torch
import app
from gemma4_ui.config import Settings
from gemma4_ui.engines.local.device import _MODELS
from gemma4_ui.engines.local.engine import LocalEngine
from gemma4_ui.web.handlers.shared import SharedChatHandlers
from gemma4_ui.web.app import build_ui
engine = LocalEngine("tiny")
build_ui(SharedChatHandlers(engine, Settings(model="tiny")))
print(json.dumps({"cuda": torch.cuda.is_initialized(), "models": len(_MODELS), "loaded": engine.loaded}))
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    state = json.loads(result.stdout.strip().splitlines()[-1])
    assert state == {"cuda": False, "models": 0, "loaded": False}


@pytest.mark.parametrize("tokens,images,frames,clips", [(256, 0, 0, 0), (1024, 1, 0, 0), (4096, 0, 32, 1)])
def test_gpu_duration_grows_with_the_request_and_stays_bounded(tokens, images, frames, clips):
    seconds = gpu.estimate_gpu_seconds(tokens, images, frames, clips)
    assert gpu.BASE_SECONDS < seconds <= gpu.MAX_SECONDS
    assert gpu.estimate_gpu_seconds(tokens * 2, images, frames, clips) >= seconds
    assert gpu.estimate_gpu_seconds(tokens, images + 1, frames + 8, clips) > seconds
    assert gpu.estimate_gpu_seconds(10**7) == gpu.MAX_SECONDS


def test_gpu_duration_reads_the_request(processor):
    from PIL import Image

    inputs = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image", "image": Image.new("RGB", (64, 64))},
                                      {"type": "text", "text": "hi"}]}],
        tokenize=True, return_dict=True, return_tensors="pt", add_generation_prompt=True)
    assert gpu.gpu_duration("k", inputs, {"max_new_tokens": 100}) == gpu.estimate_gpu_seconds(100, images=1)


def test_off_zerogpu_the_decorated_path_is_the_plain_function(tiny_engine):
    from gemma4_ui.core.events import Done
    from gemma4_ui.core.prompt import PromptSpec
    from gemma4_ui.engines.base import GenerationRequest
    from gemma4_ui.engines.local import device

    assert "SPACES_ZERO_GPU" not in os.environ
    assert inspect.isgeneratorfunction(device.generate_on_device), "spaces.GPU left it untouched"
    events = list(tiny_engine.stream(GenerationRequest(PromptSpec([{"role": "user", "content": "Hi"}]),
                                                       max_new_tokens=5, temperature=0), threading.Event()))
    assert isinstance(events[-1], Done) and events[-1].stats.generated_tokens >= 1


def test_stop_reaches_generate_in_a_forked_worker(tiny_engine):
    """On ZeroGPU, `spaces` runs `generate_on_device` in a forked worker process. The only
    stop signal it carries there is its `stop_event`: set when our consumer closes the
    generator, and answered in the worker by closing the generator too (`thread_wrapper` ->
    `iterate` in spaces/zero/wrappers.py). This runs that protocol in a real fork: closing
    the generator there must stop `generate` within a few tokens, without any cancel flag
    of the parent's."""
    import multiprocessing

    from gemma4_ui.core.prompt import PromptSpec, model_inputs
    from gemma4_ui.engines.local import device

    inputs = model_inputs(tiny_engine.processor, PromptSpec([{"role": "user", "content": "Tell me a story."}]))
    generation = {"max_new_tokens": 3000, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0,
                  "min_new_tokens": 3000}
    fork = multiprocessing.get_context("fork")
    stop_event, progress = fork.Event(), fork.Queue()

    def worker() -> None:  # as spaces' iterate(): next(), then close on stop_event
        import torch

        torch.set_num_threads(1)
        batches = device.generate_on_device(tiny_engine._key, inputs, generation)
        tokens = 0
        for batch in batches:
            tokens += len(batch)
            progress.put(tokens)
            if stop_event.is_set():
                batches.close()
                break
        left = [t.name for t in threading.enumerate() if t.name == "gemma4-generate"]
        progress.put(("closed", tokens, left))

    process = fork.Process(target=worker, daemon=True)
    process.start()
    try:
        first = progress.get(timeout=120)
        assert isinstance(first, int)
        stop_event.set()
        while not isinstance(message := progress.get(timeout=60), tuple):
            pass
        _, tokens, generating = message
        assert tokens < 3000 and generating == [], "generate stopped in the worker and its thread was joined"
        process.join(timeout=30)
        assert process.exitcode == 0
    finally:
        if process.is_alive():
            process.kill()


def test_the_consumer_stops_and_closes_the_stream_when_cancelled(tiny_engine):
    """The cancel flag is checked by the consumer, which closes the generator on the device
    side: the user's flag never needs to reach the process that generates."""
    from gemma4_ui.core.events import Done
    from gemma4_ui.core.prompt import PromptSpec
    from gemma4_ui.engines.base import GenerationRequest

    cancel = threading.Event()
    request = GenerationRequest(PromptSpec([{"role": "user", "content": "Tell me a story."}]), max_new_tokens=3000)
    events = []
    for event in tiny_engine.stream(request, cancel):
        events.append(event)
        cancel.set()
    assert isinstance(events[-1], Done) and events[-1].stats.stop_reason == "cancelled"
    assert events[-1].stats.generated_tokens < 100
    assert not any(t.name == "gemma4-generate" for t in threading.enumerate())
