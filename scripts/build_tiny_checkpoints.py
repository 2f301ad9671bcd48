"""Build tiny random checkpoints of the rest of the Gemma 4 family, for tests and offline demos.

    python scripts/build_tiny_checkpoints.py unified OUT        # Gemma 4 12B "Unified" in miniature
    python scripts/build_tiny_checkpoints.py drafter OUT --target PATH   # an MTP drafter for PATH

    make run ARGS="--model OUT_UNIFIED --assistant OUT_DRAFTER"

Both are built from the transformers config classes with the bundled tokenizer, so their
processors count soft tokens exactly as the real ones do (the Unified image, audio and video
processors at their real defaults). Seeded: the same seed gives the same weights. A few MB
each, built in seconds, so tests build them into a temporary folder instead of committing them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gemma4_ui.engines.backports import backport_mtp_kv_sharing  # noqa: E402

BUNDLED_MODEL = ROOT / "assets" / "tiny-gemma4"
DRAFT_TOKENS = 4  # tokens the drafter proposes per round (the real drafters' configs set their own)


def _bundle_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(BUNDLED_MODEL)


def _bundle_generation_config():
    from transformers import GenerationConfig

    return GenerationConfig.from_pretrained(BUNDLED_MODEL)


def unified_processor(tokenizer, chat_template: str | None):
    from transformers import (
        Gemma4UnifiedAudioFeatureExtractor,
        Gemma4UnifiedImageProcessor,
        Gemma4UnifiedProcessor,
        Gemma4UnifiedVideoProcessor,
    )

    return Gemma4UnifiedProcessor(
        feature_extractor=Gemma4UnifiedAudioFeatureExtractor(),
        image_processor=Gemma4UnifiedImageProcessor(),
        tokenizer=tokenizer,
        video_processor=Gemma4UnifiedVideoProcessor(),
        chat_template=chat_template,
    )


def unified_config(processor):
    """The 12B Unified layout (sliding/full attention, a linear patch embedding for pixels, raw
    40 ms waveform frames for audio) at toy width and depth; media token ids from the tokenizer."""
    from transformers import (
        Gemma4UnifiedAudioConfig,
        Gemma4UnifiedConfig,
        Gemma4UnifiedTextConfig,
        Gemma4UnifiedVisionConfig,
    )

    tokenizer = processor.tokenizer
    hidden = 64
    text = Gemma4UnifiedTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=32,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=128,
        max_position_embeddings=32768,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    vision = Gemma4UnifiedVisionConfig(mm_embed_dim=hidden, output_proj_dims=hidden)
    audio = Gemma4UnifiedAudioConfig()  # 640 samples per token: 40 ms at 16 kHz, as the real one
    return Gemma4UnifiedConfig(
        text_config=text,
        vision_config=vision,
        audio_config=audio,
        boi_token_id=tokenizer.boi_token_id,
        eoi_token_id=tokenizer.eoi_token_id,
        image_token_id=processor.image_token_id,
        video_token_id=processor.video_token_id,
        boa_token_id=tokenizer.boa_token_id,
        eoa_token_index=tokenizer.eoa_token_id,
        audio_token_id=processor.audio_token_id,
    )


def build_unified(out: Path, seed: int = 0, chat_template: str | None = None) -> Path:
    """A tiny `Gemma4UnifiedForConditionalGeneration` with its processor. `chat_template`
    defaults to the bundle's; pass "" to write a checkpoint that has none."""
    import torch
    from transformers import Gemma4UnifiedForConditionalGeneration

    out = Path(out)
    tokenizer = _bundle_tokenizer()
    tokenizer.chat_template = None  # the processor's template is the checkpoint's one
    if chat_template is None:
        chat_template = (BUNDLED_MODEL / "chat_template.jinja").read_text()
    processor = unified_processor(tokenizer, chat_template or None)
    torch.manual_seed(seed)
    model = Gemma4UnifiedForConditionalGeneration(unified_config(processor))
    model.generation_config = _bundle_generation_config()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def drafter_config(target_config):
    """An MTP drafter shaped to read `target_config`'s shared key/value states: the same
    attention geometry (KV heads, head sizes, layer types), every layer sharing the target's
    cache, inputs of twice the target's width (token embedding + last hidden state)."""
    from transformers import (
        Gemma4AssistantConfig,
        Gemma4TextConfig,
        Gemma4UnifiedAssistantConfig,
        Gemma4UnifiedTextConfig,
    )

    target_text = target_config.get_text_config()
    unified = target_config.model_type.startswith("gemma4_unified")
    text_class, assistant_class = ((Gemma4UnifiedTextConfig, Gemma4UnifiedAssistantConfig) if unified
                                   else (Gemma4TextConfig, Gemma4AssistantConfig))
    head_dim = {kind: target_text.per_layer_config[target_text.layer_types.index(kind)].head_dim
                for kind in ("sliding_attention", "full_attention")}
    extra = {} if unified else {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}
    text = text_class(
        vocab_size=target_text.vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=target_text.num_key_value_heads * 2,
        num_key_value_heads=target_text.num_key_value_heads,
        head_dim=head_dim["sliding_attention"],
        global_head_dim=head_dim["full_attention"],
        layer_types=["sliding_attention", "full_attention"],
        num_kv_shared_layers=2,
        sliding_window=target_text.sliding_window,
        max_position_embeddings=target_text.max_position_embeddings,
        pad_token_id=target_text.pad_token_id,
        eos_token_id=target_text.eos_token_id,
        bos_token_id=target_text.bos_token_id,
        **extra,
    )
    return assistant_class(text_config=text, backbone_hidden_size=target_text.hidden_size)


def build_drafter(target: Path, out: Path, seed: int = 0) -> Path:
    """A tiny random `Gemma4AssistantForCausalLM` (or the Unified one) for the checkpoint at
    `target`, with the target's tokenizer so the folder is a complete checkpoint."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, Gemma4AssistantForCausalLM, Gemma4UnifiedAssistantForCausalLM

    backport_mtp_kv_sharing()
    out = Path(out)
    config = drafter_config(AutoConfig.from_pretrained(target))
    model_class = (Gemma4UnifiedAssistantForCausalLM if config.model_type == "gemma4_unified_assistant"
                   else Gemma4AssistantForCausalLM)
    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config = _bundle_generation_config()
    model.generation_config.num_assistant_tokens = DRAFT_TOKENS
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(target).save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["unified", "drafter"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--target", type=Path, default=BUNDLED_MODEL,
                        help="the checkpoint the drafter drafts for (default: the bundled model)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.kind == "unified":
        path = build_unified(args.out, args.seed)
    else:
        path = build_drafter(args.target, args.out, args.seed)
    size = sum(f.stat().st_size for f in path.iterdir()) / 1e6
    print(f"wrote {path} ({size:.1f} MB)")


if __name__ == "__main__":
    sys.exit(main())
