"""The bundled tokenizer lets a model copy: a name has the same tokens in the user's message
as in a call's argument, wherever it stands and whatever punctuation follows it."""

from __future__ import annotations

import pytest

from scripts import phrasing, synthetic_data

QUOTE = '<|"|>'
# Every frame the data generator asks in (training's and the evaluation's), with each word that
# may follow the argument, and punctuation around it.
def _around(frame: str) -> tuple[str, str]:
    start = frame.index("{x}")
    return frame[:start][-4:], frame[start + 3:][:4]


_FRAMES = {_around(f): f for table in (phrasing.WEATHER, phrasing.TIME, phrasing.CALCULATOR)
           for family in table for f in (frame.replace("{X}", "{x}") for frame in family.frames)}.values()
_AFTER = {"", "?", ".", "!", *(part for slot in (phrasing.WHEN, phrasing.FILLER)
                               for part in slot.train[:2] + slot.held_out[:2])}
QUESTIONS = tuple(frame.replace("{x}", "{c}" + after) for frame in _FRAMES for after in sorted(_AFTER)) + (
    "{c}, please.", "({c})", "'{c}'", '"{c}"', "{c}/{c}")
NAMES = (synthetic_data.HELD_OUT_CITIES + synthetic_data.MORE_HELD_OUT_CITIES + synthetic_data.held_out_time_zones()
         + ("17.5% of 2,340", "sqrt(81) + 3^2", "N'Djamena", "Xi'an", "Saint-Étienne", "Łódź", "Nuuk",
            "Ciudad del Este", "Baden-Baden", "Ağrı", "Đà Nẵng", "東京", "Zaporizhzhia"))


def argument_tokens(tokenizer, value: str) -> list[int]:
    ids = tokenizer.encode(f"{QUOTE}{value}{QUOTE}", add_special_tokens=False)
    quote = tokenizer.convert_tokens_to_ids(QUOTE)
    assert ids[0] == ids[-1] == quote
    return ids[1:-1]


def contains(haystack: list[int], needle: list[int]) -> bool:
    return any(haystack[i:i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


@pytest.mark.parametrize("name", NAMES)
def test_a_name_has_the_same_tokens_in_the_message_and_in_the_argument(processor, name):
    tokenizer = processor.tokenizer
    argument = argument_tokens(tokenizer, name)
    for question in QUESTIONS:
        text = question.replace("{c}", name).replace("{z}", name).replace("{e}", name)
        message = tokenizer.encode(text, add_special_tokens=False)
        assert contains(message, argument), (text, tokenizer.convert_ids_to_tokens(message),
                                             tokenizer.convert_ids_to_tokens(argument))


def test_every_control_token_is_a_named_attribute(processor):
    from scripts.build_tiny_gemma4 import NAMED_TOKENS

    tokenizer = processor.tokenizer
    for attribute, token in NAMED_TOKENS.items():
        assert getattr(tokenizer, attribute) == token
        assert token == "<unk>" or tokenizer.convert_tokens_to_ids(token) != tokenizer.unk_token_id
