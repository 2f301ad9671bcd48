"""The rest of the Gemma 4 family through the app's engine and inspector: tiny random
checkpoints of the 12B Unified model and of MTP drafters, built from the config classes at
test time (scripts/build_tiny_checkpoints.py), and checkpoints whose templates differ from the
bundle's."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import torch
from conftest import ROOT, free_port, stop_process
from gradio_client import Client
from test_inspector import assert_consistent, make_audio, make_image
from transformers import AutoModelForCausalLM, AutoModelForMultimodalLM, AutoProcessor

from gemma4_ui.config import BUNDLED_MODEL
from gemma4_ui.core import model_family
from gemma4_ui.core.conversation import Conversation, UserTurn
from gemma4_ui.core.events import Done
from gemma4_ui.core.options import ChatOptions
from gemma4_ui.core.parsing import GEMMA4_RESPONSE_TEMPLATE, response_template_for
from gemma4_ui.core.prompt import PromptSpec, build_spec, model_inputs, template_text
from gemma4_ui.engines.base import GenerationRequest, ModelLoadError, ModelStatus
from gemma4_ui.engines.drafting import matching_drafter, resolve_drafter
from gemma4_ui.engines.local.engine import LocalEngine
from gemma4_ui.inspector import layers as inspector
from gemma4_ui.media.decoding import load_media
from gemma4_ui.tools.registry import default_registry
from scripts.build_tiny_checkpoints import build_drafter, build_unified

EXAMPLES = ROOT / "assets" / "examples"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("family")
    unified = build_unified(root / "unified")
    return {
        "unified": unified,
        "unified_drafter": build_drafter(unified, root / "unified-drafter"),
        "drafter": build_drafter(BUNDLED_MODEL, root / "drafter"),
    }


@pytest.fixture(scope="module")
def unified_engine(checkpoints):
    return LocalEngine(str(checkpoints["unified"]), device="cpu").load()


def greedy(engine, spec: PromptSpec, max_new_tokens: int = 12) -> Done:
    events = list(engine.stream(GenerationRequest(spec, max_new_tokens=max_new_tokens, temperature=0),
                                threading.Event()))
    assert isinstance(events[-1], Done), events[-1]
    return events[-1]


def chat_spec(engine, media, text="Describe this.") -> PromptSpec:
    return build_spec(Conversation([UserTurn(text, media)]), ChatOptions(), default_registry(), engine.audio_first)


# -- the Unified model -------------------------------------------------------------------------------

def test_the_unified_checkpoint_loads_with_its_own_classes(unified_engine):
    assert type(unified_engine.processor).__name__ == "Gemma4UnifiedProcessor"
    assert type(unified_engine.model).__name__ == "Gemma4UnifiedForConditionalGeneration"
    assert model_family.is_unified(unified_engine.processor) and unified_engine.audio_first


def test_the_unified_model_chats_with_text_images_audio_and_video(unified_engine, tmp_path):
    media = [make_image(tmp_path / "photo.png", (640, 480)), make_audio(tmp_path / "clip.wav", 1.5),
             load_media(str(EXAMPLES / "bouncing_ball.mp4"))]
    spec = chat_spec(unified_engine, media)
    done = greedy(unified_engine, spec, max_new_tokens=6)
    assert done.stats.generated_tokens >= 1 and done.stats.stop_reason in ("stop", "length")
    assert done.stats.prompt_tokens == model_inputs(unified_engine.processor, spec)["input_ids"].shape[-1]
    parts = [part["type"] for part in spec.messages[0]["content"]]
    assert parts == ["audio", "image", "video", "text"], "the Unified model hears audio best early in the prompt"


def test_inspector_counts_equal_the_unified_processor(unified_engine, tmp_path):
    processor = unified_engine.processor
    media = [make_image(tmp_path / "wide.png", (1600, 300)), make_image(tmp_path / "tall.png", (480, 800)),
             make_audio(tmp_path / "short.wav", 0.7), make_audio(tmp_path / "long.wav", 4.2),
             load_media(str(EXAMPLES / "bouncing_ball.mp4"))]
    spec = chat_spec(unified_engine, media)
    real = model_inputs(processor, spec)
    cached = model_inputs(inspector.counting_processor(processor), spec)
    assert cached["input_ids"].tolist() == real["input_ids"].tolist()
    assert cached["mm_token_type_ids"].tolist() == real["mm_token_type_ids"].tolist()
    counts = inspector.count_tokens(processor, real, media, 280, unified_engine.context_length)
    assert_consistent(processor, real, counts)

    # Each image: the Unified image processor's own soft-token count and resize.
    images = [m for m in media if m.kind == "image"]
    processed = processor.image_processor([m.data for m in images], max_soft_tokens=280)
    assert [i.soft_tokens for i in counts.images] == list(processed["num_soft_tokens_per_image"])
    for image in counts.images:
        width, height = image.resized
        assert image.soft_tokens == (width // 48) * (height // 48)
    # Audio: one token per 40 ms waveform frame, no encoder downsampling.
    samples_per_token = processor.feature_extractor.audio_samples_per_token
    assert [a.soft_tokens for a in counts.audio] == [
        math.ceil(len(m.data) / samples_per_token) for m in media if m.kind == "audio"]
    (video,) = counts.videos
    assert video.soft_tokens == video.frames * video.tokens_per_frame > 0


def test_audio_late_in_a_unified_prompt_is_flagged(unified_engine, tmp_path):
    processor = unified_engine.processor
    early = make_audio(tmp_path / "early.wav", 1.0)
    spec = chat_spec(unified_engine, [early])
    counts = inspector.count_tokens(processor, model_inputs(processor, spec), [early], 280)
    assert counts.audio[0].warning is None
    late = make_audio(tmp_path / "late.wav", 1.0)
    photos = [make_image(tmp_path / f"photo{n}.png", (640, 480)) for n in range(2)]
    conversation = Conversation([UserTurn("Look.", photos), UserTurn("And listen.", [late])])
    spec = build_spec(conversation, ChatOptions(), default_registry(), unified_engine.audio_first)
    inputs = model_inputs(processor, spec)
    start = inputs["mm_token_type_ids"][0].tolist().index(inspector.AUDIO)
    assert start > model_family.UNIFIED_AUDIO_POSITION_LIMIT
    counts = inspector.count_tokens(processor, inputs, conversation.media(), 280)
    assert f"starts at token {start:,}" in counts.audio[0].warning
    assert "hears audio past ~450 tokens less well" in counts.audio[0].warning


# -- speculative decoding with an MTP drafter -----------------------------------------------------------

@pytest.mark.parametrize("target,drafter", [("tiny", "drafter"), ("unified", "unified_drafter")])
def test_greedy_output_with_the_drafter_equals_greedy_output_without(checkpoints, tiny_engine, unified_engine,
                                                                    target, drafter):
    plain = tiny_engine if target == "tiny" else unified_engine
    assisted = LocalEngine(plain.resolved.path, device="cpu", assistant=str(checkpoints[drafter])).load()
    assert assisted.status.assistant == drafter.replace("_", "-")
    spec = PromptSpec([{"role": "user", "content": "Tell me a story about a lighthouse."}])
    without, with_drafter = greedy(plain, spec), greedy(assisted, spec)
    assert with_drafter.raw == without.raw
    assert with_drafter.stats.generated_tokens == without.stats.generated_tokens
    assert without.stats.drafted_tokens is None and "drafted_tokens" not in without.stats.as_dict()
    stats = with_drafter.stats
    assert stats.drafted_tokens > 0 and 0 <= stats.accepted_tokens <= stats.drafted_tokens
    assert {"drafted_tokens", "accepted_tokens", "acceptance_rate"} <= set(stats.as_dict())


def test_accepted_drafts_are_counted(checkpoints):
    """A target and a drafter that agree on every token (both with all-zero output weights, so
    both pick token 0): the drafts are kept, and the counts say so."""
    target = AutoModelForMultimodalLM.from_pretrained(BUNDLED_MODEL, dtype=torch.float32).eval()
    drafter = AutoModelForCausalLM.from_pretrained(checkpoints["drafter"], dtype=torch.float32).eval()
    with torch.no_grad():
        target.get_output_embeddings().weight.zero_()
        drafter.lm_head.weight.zero_()
    engine = LocalEngine("tiny", device="cpu").adopt(target, AutoProcessor.from_pretrained(BUNDLED_MODEL), drafter)
    per_round = drafter.generation_config.num_assistant_tokens
    # The prompt's pass gives one token; each later pass its drafts, all kept, plus one of its own.
    tokens = 1 + 2 * (per_round + 1)
    stats = greedy(engine, PromptSpec([{"role": "user", "content": "Hi"}]), max_new_tokens=tokens).stats
    assert stats.generated_tokens == tokens
    assert stats.drafted_tokens == stats.accepted_tokens == 2 * per_round
    assert stats.as_dict()["acceptance_rate"] == 1.0


def test_a_drafter_made_for_another_model_is_refused(checkpoints):
    with pytest.raises(ModelLoadError, match=r"drafts for a model 64 wide .* use the drafter made for it"):
        LocalEngine("tiny", device="cpu", assistant=str(checkpoints["unified_drafter"])).load()
    with pytest.raises(ModelLoadError, match="not a Gemma 4 MTP drafter"):
        LocalEngine("tiny", device="cpu", assistant=str(checkpoints["unified"])).load()


def test_drafting_defaults_on_only_for_hub_checkpoints_on_cuda():
    assert matching_drafter("google/gemma-4-E2B-it") == "google/gemma-4-E2B-it-assistant"
    assert matching_drafter("google/gemma-4-12B-it") == "google/gemma-4-12B-it-assistant"
    assert matching_drafter("someone/finetune") is None
    on_cpu = ModelStatus("google/gemma-4-E2B-it", "google/gemma-4-E2B-it", "cache", device="cpu")
    assert resolve_drafter("auto", on_cpu) is None
    bundled = ModelStatus("tiny", "tiny-gemma4", "bundled", device="cuda")
    assert resolve_drafter("auto", bundled) is None
    assert resolve_drafter("none", ModelStatus("x", "x", "cache", device="cuda")) is None
    with pytest.raises(ModelLoadError, match="not cached here and the Hub is unreachable"):
        resolve_drafter("google/gemma-4-E2B-it-assistant", on_cpu)  # asked for explicitly: an error, not silence


# -- the checkpoint's own templates ------------------------------------------------------------------

def edit_tokenizer_config(path, edit) -> dict | None:
    config_file = path / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    edit(config)
    config_file.write_text(json.dumps(config))
    return config.get("response_template")


def test_the_checkpoints_own_chat_and_response_templates_are_used(tmp_path):
    """A checkpoint that writes an empty thought when thinking is off (as 26B-A4B and 31B do),
    and one that ships no chat template at all."""
    bundled = (BUNDLED_MODEL / "chat_template.jinja").read_text()
    marker = "{{- '<|turn>model\\n' -}}"
    assert marker in bundled
    large = bundled.replace(marker, "{{- '<|turn>model\\n<|channel>thought\\n<channel|>' -}}")
    path = build_unified(tmp_path / "large", chat_template=large)
    own_template = edit_tokenizer_config(path, lambda c: c["response_template"]["defaults"].update(revision="large"))
    engine = LocalEngine(str(path), device="cpu").load()
    assert response_template_for(engine.processor.tokenizer) == own_template
    spec = PromptSpec([{"role": "user", "content": "Hi"}])
    prompt = template_text(engine.processor, spec)
    assert prompt.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    done = greedy(engine, spec, max_new_tokens=4)
    assert "<|channel>" not in done.content and "<channel|>" not in done.content

    # An older revision: no chat template, and only the legacy `response_schema`.
    path = build_unified(tmp_path / "bare", chat_template="")
    edit_tokenizer_config(path, lambda c: c.update(response_schema=c.pop("response_template")))
    bare = LocalEngine(str(path), device="cpu").load()
    assert response_template_for(bare.processor.tokenizer) == GEMMA4_RESPONSE_TEMPLATE
    assert bare.processor.chat_template == bundled
    assert "ships no chat template" in bare.status.describe()
    assert template_text(bare.processor, spec).endswith("<|turn>model\n")


# -- the app, as `make run ARGS="--model PATH --assistant PATH"` starts it ---------------------------

def test_the_app_serves_the_unified_model_with_its_drafter_offline(checkpoints, tmp_path):
    port = free_port()
    command = [sys.executable, "app.py", "--model", str(checkpoints["unified"]),
               "--assistant", str(checkpoints["unified_drafter"]), "--device", "cpu", "--port", str(port)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    log = tmp_path / "app.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 180
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.time() < deadline, "the app did not start in 180 s"
            try:
                with urllib.request.urlopen(url + "config", timeout=2) as answer:
                    config = json.load(answer)
                break
            except OSError:
                time.sleep(0.5)
        status = next(c["props"]["value"] for c in config["components"] if c["props"].get("elem_id") == "model-status")
        assert "unified on cpu" in status and "drafting with unified-drafter" in status
        reply = Client(url, verbose=False).predict({"text": "Hello!", "files": []}, max_new_tokens=6, temperature=0,
                                                   api_name="/chat")
        assert reply, "the app answered"
    finally:
        stop_process(process, grace=20)


def test_modalities_follow_the_checkpoints_parts(unified_engine, tiny_engine):
    from transformers import AutoConfig

    assert unified_engine.modalities == tiny_engine.modalities == {"text", "image", "audio", "video"}
    no_audio = AutoConfig.from_pretrained(BUNDLED_MODEL, audio_config=None)  # as 26B-A4B and 31B
    assert model_family.modalities(no_audio) == {"text", "image", "video"}
    text_only = AutoConfig.from_pretrained(BUNDLED_MODEL, audio_config=None, vision_config=None)
    assert model_family.modalities(text_only) == {"text"}
