"""Bare `generate` against the app's engine on a GPU, on a model with Gemma 4 E2B's real shape.

    python -m bench.gpu_bench                        # CUDA, E2B shape, bfloat16: under 5 minutes
    python -m bench.gpu_bench --with-drafter         # the same, then again with an MTP drafter: under 10
    python -m bench.gpu_bench --device cpu --tiny    # a smoke check anywhere (the bundled tiny shape)

No downloads: the model is built from the config classes with random weights (E2B's numbers
below), and the inputs come from the bundled tokenizer and processor. Its vocabulary is the
real 262,144 entries (embeddings, the per-layer embeddings, the output layer), so the work
per token is E2B's; the bundled tokenizer only uses the first few thousand ids, and the
multimodal token ids are set to the bundled tokenizer's. Random weights say nothing about
answers, but tokens cost the same whatever they are, and every reply is held to exactly
`--tokens` tokens (EOS suppressed), so both sides do identical work.

Where E2B's numbers come from: google/gemma-4-E2B-it's config.json (not reachable here) as
reproduced in public config-parsing test fixtures (a Rust loader's
`test_parse_gemma4_e2b_config`, agreeing with two other parsers' fixtures on every field they
share) and an EasyDeL mirror of the config (the audio tower). They check out against
transformers 5.23: the model built from them has 5.10 B parameters, the "5.1 B total, 2.3 B
effective" published for E2B; transformers documents its Gemma 4 vision and audio config
defaults as E2B's, and they match.

Figures, medians over interleaved runs (bench.harness): tokens/s of `generate` with
TextIteratorStreamer and of `LocalEngine.stream` on the same model and request, and the
time to first token of each, text-only and with a 1080p photo (decoding it included).

`--with-drafter` measures the same pairs a second time with a random MTP drafter in the
shape `Gemma4AssistantConfig` documents for google/gemma-4-E2B-it-assistant (reading E2B's
1536-wide states, 2048 centroids over the 262,144-token vocabulary, top 32) passed to both
sides as `assistant_model`. transformers does not publish the drafter's own stack, so its
width and depth below (4 layers of 256) are an assumption. Random weights accept almost no
drafts: the figures say what drafting costs the app against bare `generate`, not the speed-up
a trained drafter brings.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from . import media_files
from .harness import Figure, Section, Target, interleaved, paired, table
from .streaming import IMAGE_PROMPT, PROMPT, bare_generate, engine_stream

E2B_TEXT = dict(
    hidden_size=1536, num_hidden_layers=35, num_attention_heads=8, num_key_value_heads=1, head_dim=256,
    global_head_dim=512, intermediate_size=6144, use_double_wide_mlp=True, sliding_window=512,
    vocab_size=262_144, vocab_size_per_layer_input=262_144, hidden_size_per_layer_input=256,
    num_kv_shared_layers=20, final_logit_softcapping=30.0, max_position_embeddings=131_072,
    layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 7,
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                     "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1_000_000.0}},
)
E2B_VISION = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16, num_attention_heads=12,
                  num_key_value_heads=12, head_dim=64, patch_size=16, pooling_kernel_size=3,
                  position_embedding_size=10_240, use_clipped_linears=True, standardize=False)
E2B_AUDIO = dict(hidden_size=1024, num_hidden_layers=12, num_attention_heads=8, subsampling_conv_channels=[128, 32],
                 conv_kernel_size=5, attention_chunk_size=12, attention_context_left=13, attention_context_right=0,
                 output_proj_dims=1536, residual_weight=0.5, use_clipped_linears=True)
E2B_DRAFTER = dict(backbone_hidden_size=1536, use_ordered_embeddings=True, num_centroids=2048,
                   centroid_intermediate_top_k=32)
E2B_DRAFTER_TEXT = dict(
    hidden_size=256, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
    head_dim=256, global_head_dim=512, sliding_window=512, vocab_size=262_144, vocab_size_per_layer_input=0,
    hidden_size_per_layer_input=0, num_kv_shared_layers=4, final_logit_softcapping=30.0,
    max_position_embeddings=131_072, layer_types=["sliding_attention"] * 3 + ["full_attention"],
    rope_parameters=E2B_TEXT["rope_parameters"],
)
MULTIMODAL_TOKEN_IDS = ("image_token_id", "boi_token_id", "eoi_token_id", "audio_token_id", "boa_token_id",
                        "eoa_token_index", "video_token_id")


def e2b_config():
    """E2B's architecture, with the bundled tokenizer's multimodal token ids."""
    from transformers import AutoConfig, Gemma4AudioConfig, Gemma4Config, Gemma4TextConfig, Gemma4VisionConfig

    from gemma4_ui.config import BUNDLED_MODEL

    bundled = AutoConfig.from_pretrained(BUNDLED_MODEL)
    return Gemma4Config(text_config=Gemma4TextConfig(**E2B_TEXT), vision_config=Gemma4VisionConfig(**E2B_VISION),
                        audio_config=Gemma4AudioConfig(**E2B_AUDIO),
                        **{name: getattr(bundled, name) for name in MULTIMODAL_TOKEN_IDS})


def e2b_drafter_config():
    from transformers import Gemma4AssistantConfig, Gemma4TextConfig

    return Gemma4AssistantConfig(text_config=Gemma4TextConfig(**E2B_DRAFTER_TEXT), **E2B_DRAFTER)


def random_drafter(config, device: str, dtype):
    """An MTP drafter with random weights, on the device, drafting 4 tokens a round."""
    import torch
    from transformers import AutoModelForCausalLM

    from gemma4_ui.engines.backports import backport_mtp_kv_sharing

    backport_mtp_kv_sharing()
    torch.manual_seed(1)
    with torch.device(device):
        drafter = AutoModelForCausalLM.from_config(config, dtype=dtype)
    drafter.generation_config.num_assistant_tokens = 4
    return drafter.eval()


def random_model(config, device: str, dtype):
    """Random weights, initialised on the device itself (5 B parameters take minutes on a CPU)."""
    import torch
    from transformers import AutoModelForMultimodalLM, GenerationConfig

    from gemma4_ui.config import BUNDLED_MODEL
    from gemma4_ui.engines.backports import backport_mtp_kv_sharing

    backport_mtp_kv_sharing()  # so that a target keeps the key/value states a drafter reads
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForMultimodalLM.from_config(config, dtype=dtype)
    model.eval()
    model.generation_config = GenerationConfig.from_pretrained(BUNDLED_MODEL)
    return model


def engine_over(model, device: str, drafter=None):
    """The app's LocalEngine serving `model` (drafting with `drafter`), every reply held to
    max_new_tokens."""
    from transformers import AutoProcessor

    from gemma4_ui.config import BUNDLED_MODEL
    from gemma4_ui.engines.local.engine import LocalEngine

    from .app_server import generate_to_max_length

    generate_to_max_length(model)
    return LocalEngine("tiny", device=device).adopt(model, AutoProcessor.from_pretrained(BUNDLED_MODEL), drafter)


def measure(engine, tokens: int, runs: int, photo: Path, name: str = "gpu") -> Section:
    sides = {
        "bare text": lambda: bare_generate(engine, PROMPT, tokens),
        "engine text": lambda: engine_stream(engine, PROMPT, tokens),
        "bare image": lambda: bare_generate(engine, IMAGE_PROMPT, tokens, photo),
        "engine image": lambda: engine_stream(engine, IMAGE_PROMPT, tokens, photo),
    }
    for side in sides.values():  # warm-up: kernels, allocator, lazy imports
        side()
    timings = interleaved(sides, runs)
    for name, runs_ in timings.items():
        assert {t.tokens for t in runs_} == {tokens}, f"{name} generated {[t.tokens for t in runs_]} tokens"
    rate = {name: [t.tokens_per_second for t in runs_] for name, runs_ in timings.items()}
    ttft = {name: [1000 * t.time_to_first_token for t in runs_] for name, runs_ in timings.items()}
    ratio = lambda a, b: a / b  # noqa: E731
    added = lambda a, b: a - b  # noqa: E731
    return Section(name, [
        Figure("bare generate tokens/s, text", rate["bare text"], "tok/s", digits=1),
        Figure("engine ÷ bare tokens/s, text", paired(rate["engine text"], rate["bare text"], ratio),
               target=Target("≥", 0.95)),
        Figure("engine ÷ bare tokens/s, 1080p photo", paired(rate["engine image"], rate["bare image"], ratio),
               target=Target("≥", 0.95)),
        Figure("TTFT bare generate, text", ttft["bare text"], "ms", digits=0),
        Figure("TTFT added by the engine, text", paired(ttft["engine text"], ttft["bare text"], added), "ms",
               Target("<", 50), digits=0),
        Figure("TTFT bare generate, 1080p photo", ttft["bare image"], "ms", digits=0),
        Figure("TTFT added by the engine, 1080p photo", paired(ttft["engine image"], ttft["bare image"], added), "ms",
               Target("<", 50), digits=0, note="both decode the JPEG: load_image vs the app's load_media"),
    ])


def main(argv: list[str] | None = None) -> int:
    import torch
    from transformers import AutoConfig

    from gemma4_ui.config import BUNDLED_MODEL

    parser = argparse.ArgumentParser(prog="python -m bench.gpu_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="the bundled tiny model's shape instead of E2B's")
    parser.add_argument("--tokens", type=int, help="reply length (default 256, or 32 with --tiny)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--with-drafter", action="store_true",
                        help="measure again with a random MTP drafter of the E2B drafter's shape")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device here; for a smoke check use --device cpu --tiny")
    tokens = args.tokens or (32 if args.tiny else 256)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    started = time.perf_counter()
    config = AutoConfig.from_pretrained(BUNDLED_MODEL) if args.tiny else e2b_config()
    model = random_model(config, args.device, dtype)
    engine = engine_over(model, args.device)
    parameters = sum(p.numel() for p in model.parameters())
    where = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    print(f"[gpu_bench] {'tiny' if args.tiny else 'E2B'} shape, {parameters / 1e6:,.0f} M parameters, {dtype} "
          f"on {where}; built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gemma4-gpu-bench-") as scratch:
        photo = media_files.photo_jpeg(Path(scratch) / "photo-1080p.jpg", 1920, 1080)
        sections = [measure(engine, tokens, args.runs, photo)]
        if args.with_drafter:
            drafter_config = tiny_drafter_config(config) if args.tiny else e2b_drafter_config()
            drafter = random_drafter(drafter_config, args.device, dtype)
            print(f"[gpu_bench] drafter: {sum(p.numel() for p in drafter.parameters()) / 1e6:,.0f} M parameters",
                  file=sys.stderr)
            drafting = measure(engine_over(model, args.device, drafter), tokens, args.runs, photo, "gpu + MTP drafter")
            for figure in drafting.figures:
                figure.name += ", MTP drafter"
            sections.append(drafting)
    print(table(sections))
    print(f"[gpu_bench] {time.perf_counter() - started:.0f} s in all", file=sys.stderr)
    return 1 if any(f.verdict == "FAIL" for section in sections for f in section.figures) else 0


def tiny_drafter_config(target_config):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from scripts.build_tiny_checkpoints import drafter_config

    return drafter_config(target_config)


if __name__ == "__main__":
    sys.exit(main())
