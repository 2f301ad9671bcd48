"""Build the bundled offline Gemma 4 in `assets/tiny-gemma4/` from scratch.

    python scripts/build_tiny_gemma4.py [--out assets/tiny-gemma4] [--seed 0]

What it writes, all loadable with `AutoProcessor` / `AutoModelForMultimodalLM` offline:
  1. a byte-fallback BPE tokenizer (a few thousand tokens) carrying every Gemma 4 control
     token as a named attribute, plus our Gemma 4 `response_template` for `parse_response`;
  2. the real Gemma 4 image, video and audio processors at their E2B defaults, so soft-token
     counts match the real model, and `chat_template.jinja` (authored in that folder, kept);
  3. a small randomly initialised `Gemma4ForConditionalGeneration` (vision and audio towers
     included) and a generation config that stops on `<eos>`, `<turn|>` and `<|tool_response>`.

Seeded: the same seed gives byte-identical files. `scripts/train_tiny_gemma4.py` later
replaces the random weights with trained ones, keeping this tokenizer and config.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.tokenizer_corpus import corpus  # noqa: E402

DEFAULT_OUT = ROOT / "assets" / "tiny-gemma4"
VOCAB_SIZE = 4096

# Named control tokens (tokenizer_config key -> token), as listed in the protocol doc.
# Order fixes their ids: the four standard tokens first, then the protocol's.
NAMED_TOKENS = {
    "pad_token": "<pad>",
    "eos_token": "<eos>",
    "bos_token": "<bos>",
    "unk_token": "<unk>",
    "mask_token": "<mask>",
    "sot_token": "<|turn>",
    "eot_token": "<turn|>",
    "think_token": "<|think|>",
    "soc_token": "<|channel>",
    "eoc_token": "<channel|>",
    "std_token": "<|tool>",
    "etd_token": "<tool|>",
    "stc_token": "<|tool_call>",
    "etc_token": "<tool_call|>",
    "str_token": "<|tool_response>",
    "etr_token": "<tool_response|>",
    "escape_token": '<|"|>',
    "boi_token": "<|image>",
    "image_token": "<|image|>",
    "eoi_token": "<image|>",
    "boa_token": "<|audio>",
    "audio_token": "<|audio|>",
    "eoa_token": "<audio|>",
}
# The processor registers <|video|> itself; having it in the vocabulary fixes its id.
VIDEO_TOKEN = "<|video|>"
SPECIAL_TOKENS = [*NAMED_TOKENS.values(), VIDEO_TOKEN]
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def build_tokenizer(out: Path, seed: int):
    """Train the BPE on our corpus, then lay out the vocabulary as: control tokens, the 256
    byte-fallback tokens, then the learned pieces. Digits never merge (as in Gemma)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, trainers
    from transformers import GemmaTokenizer

    # 1. Learn merges on pieces that never hold a space ("▁") or a punctuation mark, with
    #    digits and newline runs kept apart. A name then has the same tokens wherever it
    #    stands: after a space in the user's message, after `<|"|>` in a call's argument,
    #    before "?" or "/" — so the model can copy it token for token.
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    trainer_tok.normalizer = normalizers.Replace(" ", "▁")
    trainer_tok.pre_tokenizer = copy_friendly_pre_tokenizer()
    n_reserved = len(SPECIAL_TOKENS) + len(BYTE_TOKENS)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - n_reserved, min_frequency=2, show_progress=False, special_tokens=[]
    )
    trainer_tok.train_from_iterator(corpus(seed), trainer=trainer)
    learned = json.loads(trainer_tok.to_str())["model"]

    # 2. Final vocabulary with fixed ids for the control and byte tokens.
    vocab: dict[str, int] = {}
    for token in [*SPECIAL_TOKENS, *BYTE_TOKENS]:
        vocab[token] = len(vocab)
    for piece, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]

    # 3. GemmaTokenizer's pipeline (spaces become "▁", byte fallback), with the same pre-split
    #    as the training, so no piece spans a space or a punctuation mark.
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = copy_friendly_pre_tokenizer()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])

    from gemma4_ui.core.parsing import GEMMA4_RESPONSE_TEMPLATE

    hf_tok = GemmaTokenizer(
        vocab=vocab,
        merges=merges,
        add_bos_token=False,  # the chat template writes <bos> itself
        add_eos_token=False,
        model_max_length=131072,
        response_template=GEMMA4_RESPONSE_TEMPLATE,
        extra_special_tokens={k: v for k, v in NAMED_TOKENS.items() if k not in _STANDARD_KEYS},
        **{k: v for k, v in NAMED_TOKENS.items() if k in _STANDARD_KEYS},
    )
    hf_tok._tokenizer = tok
    return hf_tok


def copy_friendly_pre_tokenizer():
    """Spaces ("▁"), each punctuation or symbol character and each digit stand alone;
    newline runs stay together."""
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n+"), behavior="isolated"),
        pre_tokenizers.Split(Regex("[^\\p{L}\\p{M}\\n]"), behavior="isolated"),
    ])


_STANDARD_KEYS = {"pad_token", "eos_token", "bos_token", "unk_token", "mask_token"}


def build_processor(tokenizer, template_path: Path):
    """The real Gemma 4 processors at their E2B defaults (image budget 280, video 70 per frame
    and 32 frames, 16 kHz audio capped at 750 tokens)."""
    from transformers import Gemma4AudioFeatureExtractor, Gemma4ImageProcessor, Gemma4Processor, Gemma4VideoProcessor

    return Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=Gemma4ImageProcessor(),
        tokenizer=tokenizer,
        video_processor=Gemma4VideoProcessor(),
        chat_template=template_path.read_text(encoding="utf-8"),
        image_seq_length=280,
        audio_seq_length=750,
        audio_ms_per_token=40,
    )


DEFAULT_LAYERS = 4  # the bundle's depth (a training stage may grow it: train_tiny_gemma4.grow_layers)


def tiny_config(tokenizer, layers: int = DEFAULT_LAYERS):
    """Gemma 4 in miniature: the E2B layout (sliding and full attention, per-layer embeddings,
    vision and audio towers) at a size that trains on a laptop CPU. Two choices serve copying
    (a tool's argument is a copy of the user's words): the sliding layers see only the last
    three tokens, which makes them previous-token heads for the full layers' look-ups, and
    every layer keeps its own keys and values (no KV sharing, four KV heads)."""
    from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4TextConfig, Gemma4VisionConfig

    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in NAMED_TOKENS.items()}
    text = Gemma4TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=192,
        intermediate_size=576,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=48,
        global_head_dim=96,
        layer_types=["sliding_attention", "full_attention"] * (layers // 2),
        num_kv_shared_layers=0,
        sliding_window=3,
        max_position_embeddings=131072,
        vocab_size_per_layer_input=len(tokenizer),
        hidden_size_per_layer_input=16,
        final_logit_softcapping=30.0,
        pad_token_id=ids["pad_token"],
        eos_token_id=ids["eos_token"],
        bos_token_id=ids["bos_token"],
    )
    vision = Gemma4VisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        patch_size=16,
        pooling_kernel_size=3,
        position_embedding_size=10240,
    )
    # transformers sizes the audio input projection as (channels[0] // 4) * channels[1], which is
    # right only when channels[0] equals the 128 mel bins (as in E2B's [128, 32]).
    audio = Gemma4AudioConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        subsampling_conv_channels=[128, 8],
        output_proj_dims=32,
    )
    return Gemma4Config(
        text_config=text,
        vision_config=vision,
        audio_config=audio,
        boi_token_id=ids["boi_token"],
        eoi_token_id=ids["eoi_token"],
        image_token_id=ids["image_token"],
        video_token_id=tokenizer.convert_tokens_to_ids(VIDEO_TOKEN),
        boa_token_id=ids["boa_token"],
        eoa_token_index=ids["eoa_token"],
        audio_token_id=ids["audio_token"],
    )


def generation_config(tokenizer):
    from transformers import GenerationConfig

    stop = [tokenizer.convert_tokens_to_ids(t) for t in ("<eos>", "<turn|>", "<|tool_response>")]
    return GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=stop,
        do_sample=True,
        temperature=1.0,
        top_p=0.95,
        top_k=64,
    )


def build(out: Path = DEFAULT_OUT, seed: int = 0, weights: bool = True) -> None:
    import torch
    from transformers import Gemma4ForConditionalGeneration

    out.mkdir(parents=True, exist_ok=True)
    template_path = out / "chat_template.jinja"
    tokenizer = build_tokenizer(out, seed)
    processor = build_processor(tokenizer, template_path)
    processor.save_pretrained(out)
    if weights:
        torch.manual_seed(seed)
        model = Gemma4ForConditionalGeneration(tiny_config(processor.tokenizer)).to(torch.bfloat16)
        model.generation_config = generation_config(processor.tokenizer)
        model.save_pretrained(out)
        (out / "training.json").unlink(missing_ok=True)  # these weights are untrained
    print(f"wrote {out} (vocab {len(processor.tokenizer)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-weights", action="store_true", help="rewrite the tokenizer and processor files, keep config and weights"
    )
    args = parser.parse_args()
    build(args.out, args.seed, weights=not args.no_weights)


if __name__ == "__main__":
    main()
