"""The local engine's streamer: tokenizers' DecodeStream over the bundled tokenizer, fed as
`generate` feeds it (the prompt first, then one tensor per forward pass)."""

from __future__ import annotations

import random

import torch

from gemma4_ui.engines.local.device import TokenStream


def stream_text(tokenizer, steps: list[list[int]]) -> tuple[str, TokenStream]:
    stream = TokenStream(tokenizer)
    stream.put(torch.tensor([[tokenizer.bos_token_id]]))  # the prompt, which is not streamed
    for step in steps:
        stream.put(torch.tensor([step]))
    stream.end()
    pieces = [text for batch in stream.chunks(timeout=5) for _, text in batch]
    return "".join(pieces), stream


def test_streamed_text_equals_the_decoded_text(processor):
    tokenizer = processor.tokenizer
    text = "Grüße aus Köln 🙂 — 東京の天気は？ <|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>"
    ids = tokenizer.encode(text, add_special_tokens=False)
    streamed, _ = stream_text(tokenizer, [[i] for i in ids])
    assert streamed == tokenizer.decode(ids, skip_special_tokens=False)


def test_a_character_split_over_byte_tokens_arrives_whole(processor):
    tokenizer = processor.tokenizer
    byte_ids = [tokenizer.convert_tokens_to_ids(f"<0x{b:02X}>") for b in "🙂".encode()]
    stream = TokenStream(tokenizer)
    stream.put(torch.tensor([[tokenizer.bos_token_id]]))
    for token_id in byte_ids:
        stream.put(torch.tensor([[token_id]]))
    stream.end()
    pieces = [text for batch in stream.chunks(timeout=5) for _, text in batch]
    assert pieces == ["", "", "", "🙂"], "no broken character, nothing taken back"


def test_random_ids_never_break_the_stream(processor):
    """Random weights emit invalid UTF-8 byte runs, on which DecodeStream raises: the stream
    goes on and every token's text is delivered."""
    tokenizer = processor.tokenizer
    byte_ids = [tokenizer.convert_tokens_to_ids(f"<0x{b:02X}>") for b in range(256)]
    rng = random.Random(0)
    for _ in range(200):
        ids = [rng.choice(byte_ids) if rng.random() < 0.4 else rng.randrange(len(tokenizer))
               for _ in range(rng.randint(1, 30))]
        streamed, _ = stream_text(tokenizer, [[i] for i in ids])
        assert len(streamed) >= len(ids) // 4  # at most 4 bytes per character


def test_accepted_drafts_are_counted_from_multi_token_steps(processor):
    """With assisted decoding a forward pass hands over every draft token it kept plus one of
    its own."""
    tokenizer = processor.tokenizer
    ids = tokenizer.encode("one two three four five six", add_special_tokens=False)
    steps = [ids[:1], ids[1:4], ids[4:5], ids[5:]]
    streamed, stream = stream_text(tokenizer, steps)
    assert streamed == tokenizer.decode(ids, skip_special_tokens=False)
    assert stream.accepted == sum(len(step) - 1 for step in steps)
