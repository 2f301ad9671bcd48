"""The bundled model's training scripts: what they build must hold before hours go into them."""

from __future__ import annotations

import random
import re

import pytest
import torch
from conftest import ROOT
from transformers import AutoProcessor, Gemma4ForConditionalGeneration

from scripts import phrasing
from scripts.build_tiny_gemma4 import tiny_config
from scripts.train_tiny_gemma4 import grow_layers, layer_count


@pytest.fixture(scope="module")
def tokenizer():
    return AutoProcessor.from_pretrained(ROOT / "assets" / "tiny-gemma4").tokenizer


def test_a_grown_model_computes_what_the_smaller_one_did(tokenizer):
    torch.manual_seed(0)
    small = Gemma4ForConditionalGeneration(tiny_config(tokenizer, 4)).float().eval()
    for p in small.parameters():  # norms away from their init, so a silenced layer is not one by chance
        p.data.add_(0.05 * torch.randn_like(p))
    grown_state = grow_layers(small.state_dict(), 6)
    grown = Gemma4ForConditionalGeneration(tiny_config(tokenizer, 6)).float().eval()
    grown.load_state_dict(grown_state)
    ids = tokenizer("What's the weather in Baden-Baden this morning?", return_tensors="pt").input_ids
    with torch.no_grad():
        before, after = small(input_ids=ids).logits, grown(input_ids=ids).logits
    assert layer_count(grown_state) == 6
    assert torch.equal(before, after)
    # the new layers are not dead: their inner weights are copies, only their output norms are shut
    assert grown_state["model.language_model.layers.2.self_attn.q_proj.weight"].abs().sum() > 0
    assert grown_state["model.language_model.layers.2.post_attention_layernorm.weight"].abs().sum() == 0


def test_layers_grow_by_whole_pairs_only(tokenizer):
    state = Gemma4ForConditionalGeneration(tiny_config(tokenizer, 4)).state_dict()
    for layers in (4, 5, 2):
        with pytest.raises(ValueError):
            grow_layers(state, layers)


def test_loosened_requests_keep_the_argument_and_no_held_out_word(monkeypatch):
    monkeypatch.setattr(phrasing, "LOOSE_SHARE", 0.3)
    rng = random.Random(0)
    held_out = phrasing._HELD_OUT_SLOT_WORDS
    assert {"kindly", "presently", "mum"} <= held_out
    assert not held_out & set(phrasing.EVERYDAY_WORDS)
    loosened = 0
    for _ in range(400):
        family = rng.choice(phrasing.by_split(phrasing.WEATHER, phrasing.TRAIN))
        frame = rng.choice(family.frames)
        loose = phrasing.loosen(rng, frame)
        assert loose.count("{x}") == 1
        if not frame.startswith("{x}"):  # the word before the argument ("in", "for") stays next to it
            assert _word_before_argument(loose) == _word_before_argument(frame)
        text, written = phrasing.compose(rng, phrasing.TRAIN, family, {"x": "Baden-Baden"})
        assert written["x"] in text
        words = set(re.findall(r"[a-z']+", text.lower()))
        loosened += bool(words & set(phrasing.EVERYDAY_WORDS) - set(re.findall(r"[a-z']+", " ".join(
            family.frames).lower())))
    assert loosened > 60  # a fair share of the rows is in wording no family holds


def _word_before_argument(frame: str) -> str:
    return frame.split("{x}")[0].split()[-1].lower()


def test_the_held_out_split_is_never_loosened(monkeypatch):
    monkeypatch.setattr(phrasing, "LOOSE_SHARE", 1.0)

    def no_loosening(rng, frame):
        raise AssertionError(f"held-out frame loosened: {frame}")

    monkeypatch.setattr(phrasing, "loosen", no_loosening)
    rng = random.Random(1)
    for table in (phrasing.WEATHER, phrasing.CALCULATOR, phrasing.TIME):
        for family in phrasing.by_split(table, phrasing.HELD_OUT):
            for _ in range(50):
                phrasing.compose(rng, phrasing.HELD_OUT, family, {"x": "Oslo"})


def test_by_default_no_training_request_is_loosened(monkeypatch):
    """The bundle's stages ran without loosened wording; a rebuild must draw the same kind of data."""
    def no_loosening(rng, frame):
        raise AssertionError(f"frame loosened by default: {frame}")

    monkeypatch.setattr(phrasing, "loosen", no_loosening)
    rng = random.Random(2)
    for family in phrasing.by_split(phrasing.WEATHER, phrasing.TRAIN):
        for _ in range(30):
            phrasing.compose(rng, phrasing.TRAIN, family, {"x": "Oslo"})


def test_first_contact_writes_a_checkpoint_out_as_the_model_it_is(tmp_path):
    from safetensors.torch import load_file

    from scripts.first_contact import model_folder

    bundle = ROOT / "assets" / "tiny-gemma4"
    folder = model_folder(ROOT / "checkpoints" / "stage14.pt", tmp_path)
    assert model_folder(bundle, tmp_path / "unused") == bundle
    written, shipped = load_file(folder / "model.safetensors"), load_file(bundle / "model.safetensors")
    assert written.keys() == shipped.keys()
    assert all(torch.equal(written[k], shipped[k]) for k in shipped), "the carried checkpoint is the bundle"
    assert (folder / "tokenizer.json").read_bytes() == (bundle / "tokenizer.json").read_bytes()


def test_first_contact_counts_only_a_clean_reply_with_the_argument_as_written():
    from scripts.first_contact import C, U, is_right

    def reply(calls=(), text="The answer is 4.", stop="stop", notices=()):
        return {"tool_calls": [dict(name=n, arguments=a, status="ok") for n, a in calls], "text": text,
                "stats": {"stop_reason": stop}, "notices": list(notices)}

    assert is_right(reply([(C, {"expression": "2 + 2"})]), C, "2 + 2")
    assert not is_right(reply([(C, {"expression": "2 + 2 please"})]), C, "2 + 2")
    assert not is_right(reply([(C, {"expression": "2 + 2"})], stop="length"), C, "2 + 2")
    assert not is_right(reply([(C, {"expression": "2 + 2"})], notices=["Stopped: the reply kept repeating"]), C, "2 + 2")
    assert not is_right(reply(), C, "2 + 2"), "no call where one is needed"
    assert not is_right(reply([(C, {"expression": "1"})]), None, None), "a call where none is needed"
    assert is_right(reply(text="Hello!"), None, None)
    assert not is_right(reply(text=" "), None, None), "an empty reply"
    assert is_right(reply([(U, {"from_unit": "km", "to_unit": "miles", "value": 5})]), U, ("km", "miles"))
    assert not is_right(reply([(U, {"from_unit": "km", "to_unit": "km", "value": 5})]), U, ("km", "miles"))
