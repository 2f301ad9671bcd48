"""Synthetic conversations that teach the bundled tiny Gemma 4 the protocol.

Every example is built the way the app builds a turn: canonical turns (`conversation.py`),
rendered by `to_gemma_messages` and OUR chat template (`build_spec` + `template_text`), tools
run through the real registry (`ToolRegistry.execute`), media expanded by the real processor
(`model_inputs`). Only what the model writes is composed here, and every output is checked
to reappear byte for byte in the prompt of the next round, so the model learns exactly the
bytes the template writes back.

    python scripts/synthetic_data.py [--seed 0] [--show 6]   # print a few rendered examples

Arguments are never taken from a fixed list: city names are random syllables, numbers,
units and time zones are drawn afresh, so the model has to copy them from the user's
message. `HELD_OUT_CITIES` and `held_out_time_zones()` never occur in what the user says or
the model writes here (they are the evaluation's); the built-in tools' own declarations
name a few cities (Paris, Tokyo, San Francisco) and are rendered as the app renders them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import hashlib
import random
import re
import sys
import types
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gemma4_ui.core.conversation import AssistantTurn, Conversation, ToolRound, UserTurn  # noqa: E402
from gemma4_ui.core.events import ToolCall, ToolResult  # noqa: E402
from gemma4_ui.core.options import ChatOptions  # noqa: E402
from gemma4_ui.core.prompt import build_spec, model_inputs, template_text  # noqa: E402
from gemma4_ui.engines.openai import tool_message_content  # noqa: E402
from gemma4_ui.media.decoding import AUDIO_SAMPLING_RATE, MediaItem  # noqa: E402
from gemma4_ui.tools import builtin as builtin_tools  # noqa: E402
from gemma4_ui.tools.registry import ToolRegistry, default_registry  # noqa: E402
from scripts import phrasing  # noqa: E402
from scripts.phrasing import TRAIN  # noqa: E402

BUILTIN_TOOLS = ("calculator", "convert_units", "current_time", "get_current_weather")
SERVED_SHARE = 0.35  # episodes rendered as a server renders them (see Episode.served)
NO_TOOLS_SHARE = 0.4  # episodes that need no tool, asked with none enabled (a real checkpoint's default)
QUOTE = '<|"|>'
THOUGHT_OPEN, THOUGHT_CLOSE = "<|channel>thought\n", "\n<channel|>"
END_OF_TURN, CALLS_DONE = "<turn|>", "<|tool_response>"
MEDIA_PLACEHOLDERS = ("<|image|>", "<|audio|>", "<|video|>")

# Cities the evaluation and the tests ask about; none of them is ever generated.
HELD_OUT_CITIES = (
    "Ouagadougou", "Tegucigalpa", "Ulaanbaatar", "Santa Cruz de la Sierra", "Paris", "Tokyo", "Reykjavik",
    "Antananarivo", "Nouakchott", "Bujumbura", "Thiruvananthapuram", "Ljubljana", "Chisinau", "Bloemfontein",
    "Yellowknife", "Valparaiso", "Kathmandu", "Bishkek", "Dushanbe", "Ashgabat", "Tbilisi", "Yerevan",
    "Vientiane", "Phnom Penh", "Port Moresby", "Honiara", "Kigali", "Lilongwe", "Maputo", "Windhoek",
    "Gaborone", "Mbabane", "Maseru", "Asmara", "Mogadishu", "Khartoum", "Niamey", "Bamako", "Conakry",
    "Freetown", "Monrovia", "Yamoussoukro", "Porto-Novo", "Lomé", "Libreville", "Brazzaville", "Kinshasa",
    "Las Palmas de Gran Canaria", "Rio de Janeiro", "Buenos Aires", "Ho Chi Minh City", "Kuala Lumpur",
    "Addis Ababa", "Dar es Salaam", "Salt Lake City", "Bandar Seri Begawan", "São Paulo", "Zürich",
    "Lima", "Oslo", "Quito",
)
# More of them, held out from stage 7's data on: the shapes the first list has few of
# (hyphens, links, letters outside ASCII, four and more words, apostrophes).
MORE_HELD_OUT_CITIES = (
    "Nuuk", "Saint-Étienne", "Łódź", "Baden-Baden", "N'Djamena", "Xi'an", "Đà Nẵng", "Ciudad del Este",
    "Zaporizhzhia", "Stratford-upon-Avon", "Aix-en-Provence", "Frankfurt am Main", "Castellón de la Plana",
    "Tromsø", "Reykjavík", "Malmö", "Düsseldorf", "Gdańsk", "Kraków", "Chiang Mai", "Nha Trang", "Port Louis",
    "Nizhny Novgorod", "Rostov-on-Don", "Petropavlovsk-Kamchatsky", "Guatemala City", "San José", "Bogotá",
    "Medellín", "Asunción", "Montevideo", "Cochabamba", "Iquitos", "Puerto Princesa", "Kota Kinabalu",
    "Banda Aceh", "Villa Carlos Paz", "Santiago de los Caballeros", "Alcalá de Henares", "Le Puy-en-Velay",
)
_HELD_OUT_PATTERN = re.compile("|".join(re.escape(c.lower()) for c in HELD_OUT_CITIES + MORE_HELD_OUT_CITIES))
_ZONE_REGIONS = re.compile(r"^(Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific)/")


def mentions_held_out(text: str) -> bool:
    """True if `text` names a held-out city (or a zone whose city is held out)."""
    return bool(_HELD_OUT_PATTERN.search(text.lower().replace("_", " ")))


def time_zone_names() -> list[str]:
    return sorted(z for z in zoneinfo.available_timezones() if _ZONE_REGIONS.match(z))


@functools.lru_cache(maxsize=1)
def held_out_time_zones() -> tuple[str, ...]:
    """About one zone in five, chosen by a hash of its name (stable across machines)."""
    return tuple(z for z in time_zone_names() if hashlib.sha256(z.encode()).digest()[0] % 5 == 0 or mentions_held_out(z))


@functools.lru_cache(maxsize=1)
def _held_out_zone_pattern() -> re.Pattern:
    """A held-out zone as users write it: its IANA name or its city ("America/Bahia", "Bahia")."""
    forms = {form for z in held_out_time_zones() for form in (z, zone_city(z))}
    return re.compile(r"(?<![\w/])(" + "|".join(map(re.escape, sorted(forms, key=len, reverse=True))) + r")(?![\w/])")


def mentions_held_out_zone(text: str) -> bool:
    return bool(_held_out_zone_pattern().search(text))


def zone_city(zone: str) -> str:
    return zone.rsplit("/", 1)[1].replace("_", " ")


def training_time_zones() -> list[str]:
    return [z for z in time_zone_names() if not mentions_held_out_zone(z) and not mentions_held_out_zone(zone_city(z))]


# --- word material ---------------------------------------------------------------------

ONSETS = ("", "", "b", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "y", "z",
          "ch", "sh", "th", "kh", "br", "dr", "gr", "kr", "tr", "st", "ts", "ng", "gu", "qu", "bl", "pl", "x")
VOWELS = ("a", "a", "e", "e", "i", "o", "o", "u", "ou", "aa", "ei", "ia", "ua", "ue", "oo", "y", "ae", "io", "au")
CODAS = ("", "", "", "", "n", "r", "l", "m", "s", "k", "t", "ng", "sh", "x", "rd", "lt", "b", "g")
ACCENTS = {"a": "áãåä", "e": "éèê", "i": "í", "o": "óøö", "u": "üú", "n": "ñ", "c": "ç", "s": "š"}
CITY_PREFIXES = ("San", "Santa", "Port", "New", "Saint", "Fort", "Mount", "Lake", "North", "South", "East", "West",
                 "El", "La", "Los", "Al", "Puerto", "Ciudad", "Nueva", "Bandar", "Kota", "Nova", "Villa", "Cape",
                 "Bad", "Ban", "Old", "Upper", "Little", "Great")
CITY_LINKS = (" de ", " de la ", " del ", " do ", " da ", " am ", " upon ", " on ", " sur ", "-", " di ", " al ",
              " es ", " el ")
REGION_CODES = ("AB", "QX", "ZN", "TR", "KL", "MO", "VE", "PA", "DU", "RI", "SY", "LO", "NT", "EW", "BG", "HK")

ADJECTIVES = ("small", "brave", "quiet", "golden", "bright", "curious", "gentle", "tall", "tiny", "clever",
              "silver", "sleepy", "happy", "lonely", "wise", "green", "red", "blue", "wooden", "friendly", "shy")
NOUNS = ("fox", "lantern", "river", "robot", "garden", "dragon", "boat", "owl", "tree", "castle", "cat", "train",
         "mountain", "village", "bird", "key", "map", "star", "forest", "bridge", "horse", "kite", "clock", "whale")
PLACES = ("the market", "the hill", "the old bridge", "the harbour", "the forest", "the library", "the garden",
          "the river bank", "the tower", "the village square", "the bakery", "the meadow", "the cave", "the beach")
FOODS = ("bread", "soup", "apples", "tea", "honey cakes", "rice", "plums", "warm milk", "cheese", "berries")
COLOURS = ("gold", "pink", "purple", "orange", "grey", "silver", "deep blue", "red")
SYSTEM_PROMPTS = ("You are a helpful assistant.", "You are a concise assistant.", "Answer briefly.",
                  "You are a friendly assistant. Keep answers short.", "Be precise and polite.",
                  "You are a helpful assistant that uses tools when they help.", "Reply in plain English.")


def pick(rng: random.Random, options):
    return options[rng.randrange(len(options))]


LETTERS = "abcdefghijklmnopqrstuvwxyz"


def letter_word(rng: random.Random) -> str:
    """Letters at random ("Kzorptaw"): names whose pieces the model has never seen together,
    so copying cannot lean on familiar syllables."""
    return "".join(pick(rng, LETTERS) for _ in range(rng.randint(3, 11)))


def syllable_word(rng: random.Random, syllables: tuple[int, int] = (1, 3)) -> str:
    while True:
        if rng.random() < 0.15:
            word = letter_word(rng)
        else:
            word = "".join(pick(rng, ONSETS) + pick(rng, VOWELS) + pick(rng, CODAS)
                           for _ in range(rng.randint(*syllables)))
        if rng.random() < 0.03 and len(word) > 3:  # an apostrophe, as in N'Djamena or Xi'an
            i = rng.randint(1, len(word) - 2)
            word = word[:i] + "'" + word[i:]
        if rng.random() < 0.08:  # now and then a letter with a diacritic, which the tokenizer spells in bytes
            spots = [i for i, ch in enumerate(word) if ch in ACCENTS]
            if spots:
                i = pick(rng, spots)
                word = word[:i] + pick(rng, ACCENTS[word[i]]) + word[i + 1:]
        word = word.capitalize()
        # Under three letters ("Do", "Ua") reads as a word, not a name; held-out names never appear.
        if len(word) >= 3 and not mentions_held_out(word) and not mentions_held_out_zone(word):
            return word


def city_name(rng: random.Random) -> str:
    """A city nobody has heard of: one to four words of random syllables, sometimes with a
    prefix ("Port"), a link ("de la") or a region code, so multi-word names get copied too."""
    while True:
        shape = rng.random()
        if shape < 0.5:
            name = syllable_word(rng, (1, 4))
        elif shape < 0.7:
            name = f"{pick(rng, CITY_PREFIXES)} {syllable_word(rng)}"
        elif shape < 0.8:
            name = f"{syllable_word(rng)} {syllable_word(rng)}"
        elif shape < 0.92:
            name = f"{syllable_word(rng)}{pick(rng, CITY_LINKS)}{syllable_word(rng)}"
        else:
            name = f"{pick(rng, CITY_PREFIXES)} {syllable_word(rng)}{pick(rng, CITY_LINKS)}{syllable_word(rng)}"
        if rng.random() < 0.12:
            name += f", {pick(rng, REGION_CODES)}"
        if rng.random() < 0.04:
            name = name.lower()  # people type like this too; the call copies it as typed
        if not mentions_held_out(name) and not mentions_held_out_zone(name):
            return name


# Letters from many Latin alphabets, for names written with several of them (Đà Nẵng, Łódź):
# the tokenizer spells each in bytes, and a model must copy every byte.
MARKED_LETTERS = {"a": "áàâãäåāăąạảẵ", "c": "çćčĉ", "d": "đď", "e": "éèêëēėęěẹ", "g": "ğģ", "i": "íìîïīı",
                  "l": "łľļ", "n": "ñńňņ", "o": "óòôõöøōőơ", "r": "řŕ", "s": "śšşș", "t": "ťţț",
                  "u": "úùûüūůűư", "y": "ýÿ", "z": "źżž"}
HYPHEN_LINKS = ("-", "-upon-", "-on-", "-en-", "-sur-", "-am-", "-le-", "-de-", "-la-", "-sous-", "-in-")
CITY_SUFFIXES = ("City", "Town", "Beach", "Springs", "Falls", "Heights", "Harbour", "Bay", "Hills", "Junction",
                 "Island", "Valley")


@functools.lru_cache(maxsize=1)
def capitalised_pieces() -> tuple[str, ...]:
    """The bundled tokenizer's pieces that are a capitalised word on their own ("Berlin",
    "Cairo", "Bandar"): a city can be one such piece, and a model never made to write it
    garbles it."""
    import json

    tokenizer = json.loads((ROOT / "assets" / "tiny-gemma4" / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    return tuple(sorted(p for p in vocab if re.fullmatch(r"[A-Z][a-z]+", p) and not mentions_held_out(p)))


def place_name(rng: random.Random) -> str:
    """A city for a weather question: `city_name`'s shapes, and longer ones that it rarely
    makes, which real cities have: three to five plain words (as in Ho Chi Minh City or Bandar
    Seri Begawan), a prefix and words around a link (Las Palmas de Gran Canaria), a suffix
    word, and words that are single pieces of the vocabulary. (`city_name` itself stays as it
    is: the tokenizer's corpus is made from it.)"""
    while True:
        shape = rng.random()
        if shape < 0.5:
            return city_name(rng)
        if shape < 0.65:
            words = [syllable_word(rng, (1, 2)) for _ in range(rng.randint(3, 5))]
            if rng.random() < 0.3:
                words[0] = pick(rng, CITY_PREFIXES)
            name = " ".join(words)
        elif shape < 0.75:
            before = " ".join(syllable_word(rng) for _ in range(rng.randint(1, 2)))
            after = " ".join(syllable_word(rng) for _ in range(rng.randint(1, 2)))
            name = f"{pick(rng, CITY_PREFIXES)} {before}{pick(rng, CITY_LINKS)}{after}"
        elif shape < 0.8:
            name = " ".join(syllable_word(rng) for _ in range(rng.randint(1, 3))) + f" {pick(rng, CITY_SUFFIXES)}"
        elif shape < 0.84:
            name = "".join(syllable_word(rng) + pick(rng, HYPHEN_LINKS) for _ in range(rng.randint(1, 2)))
            name += syllable_word(rng)
            if rng.random() < 0.25:
                name = f"{pick(rng, CITY_PREFIXES)} {name}"
        elif shape < 0.88:
            name = " ".join(marked(rng, syllable_word(rng)) for _ in range(rng.randint(1, 3)))
        else:
            words = [pick(rng, capitalised_pieces()) if rng.random() < 0.7 else syllable_word(rng)
                     for _ in range(pick(rng, (1, 1, 1, 1, 2, 2, 3)))]
            name = " ".join(words)
        if not mentions_held_out(name) and not mentions_held_out_zone(name):
            return name


def marked(rng: random.Random, word: str) -> str:
    """The word with a third of its letters (at least one) marked: ł, ẵ, ø, ș..."""
    spots = [i for i, ch in enumerate(word.lower()) if ch in MARKED_LETTERS]
    letters = list(word)
    for i in rng.sample(spots, max(1, len(spots) // 3)) if spots else []:
        letter = pick(rng, MARKED_LETTERS[word[i].lower()])
        letters[i] = letter.upper() if word[i].isupper() else letter
    return "".join(letters)


def person_name(rng: random.Random) -> str:
    first = syllable_word(rng, (1, 2))
    return first if rng.random() < 0.4 else f"{first} {syllable_word(rng, (1, 2))}"


def spelled(n: int) -> str:
    return ("zero", "one", "two", "three", "four")[n]


# --- media -----------------------------------------------------------------------------


def random_colour(rng: random.Random) -> tuple[int, int, int]:
    return (rng.randrange(256), rng.randrange(256), rng.randrange(256))


def draw_picture(rng: random.Random, width: int, height: int):
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), random_colour(rng))
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(1, 6)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randint(4, max(5, width // 2)), y0 + rng.randint(4, max(5, height // 2))
        shape = rng.randrange(3)
        if shape == 0:
            draw.ellipse([x0, y0, x1, y1], fill=random_colour(rng))
        elif shape == 1:
            draw.rectangle([x0, y0, x1, y1], fill=random_colour(rng))
        else:
            draw.polygon([(x0, y1), ((x0 + x1) // 2, y0), (x1, y1)], fill=random_colour(rng))
    return image


def synthetic_image(rng: random.Random) -> MediaItem:
    width, height = rng.randint(32, 900), rng.randint(32, 900)
    return MediaItem("image", "picture.png", "picture.png", draw_picture(rng, width, height))


def synthetic_audio(rng: random.Random) -> MediaItem:
    """0.3 to 3 s of tones, chirps or noise at 16 kHz, as `load_media` returns audio."""
    seconds = rng.uniform(0.3, 3.0)
    t = np.arange(int(seconds * AUDIO_SAMPLING_RATE)) / AUDIO_SAMPLING_RATE
    noise = np.random.default_rng(rng.randrange(2**32))
    kind = rng.randrange(3)
    if kind == 0:
        wave = sum(np.sin(2 * np.pi * rng.uniform(80, 2000) * t) for _ in range(rng.randint(1, 3)))
    elif kind == 1:
        wave = np.sin(2 * np.pi * (rng.uniform(100, 500) + rng.uniform(50, 800) * t) * t)
    else:
        wave = noise.standard_normal(len(t))
    wave = wave / (np.abs(wave).max() + 1e-6) * rng.uniform(0.05, 0.6)
    return MediaItem("audio", "clip.wav", "clip.wav", wave.astype(np.float32))


def synthetic_video(rng: random.Random) -> MediaItem:
    """A shape moving over a background, with the metadata `load_media` would report. Most
    clips are a few frames (cheap); some have the app's 32, like a real upload."""
    from transformers.video_utils import VideoMetadata

    frames = rng.choice([rng.randint(1, 8), rng.randint(1, 8), rng.randint(9, 32), 32, 32])
    if frames == 32 and rng.random() < 0.6:  # an upload's size: the app's clip is 480 x 270
        width, height = rng.randint(240, 800), rng.randint(180, 600)
    else:
        width, height = rng.randint(48, 320), rng.randint(48, 320)
    background, colour = random_colour(rng), random_colour(rng)
    size = rng.randint(6, max(7, min(width, height) // 2))
    data = np.empty((frames, height, width, 3), dtype=np.uint8)
    data[:] = background
    for index in range(frames):
        x = int((width - size) * index / max(1, frames - 1))
        y = int((height - size) * abs(np.sin(index / 3)))
        data[index, y:y + size, x:x + size] = colour
    fps = rng.choice([10.0, 15.0, 24.0, 25.0, 30.0])
    step = rng.randint(1, 12)
    metadata = VideoMetadata(
        total_num_frames=frames * step, fps=fps, width=width, height=height, duration=frames * step / fps,
        video_backend="opencv", frames_indices=[i * step for i in range(frames)],
    )
    return MediaItem("video", "clip.mp4", "clip.mp4", data, video_metadata=metadata)


def media_phrase(media: list[MediaItem]) -> str:
    """'one image', 'two images and an audio clip', 'an image, an audio clip and a video'."""
    parts = []
    for kind, one, many in (("image", "one image", "images"), ("audio", "an audio clip", "audio clips"),
                            ("video", "a video", "videos")):
        count = sum(1 for m in media if m.kind == kind)
        if count:
            parts.append(one if count == 1 else f"{spelled(count)} {many}")
    if len(parts) == 2 and parts[0] == "one image":
        parts[0] = "an image"  # "an image and an audio clip" reads better than "one image and ..."
    if len(parts) == 3 and parts[0] == "one image":
        parts[0] = "an image"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# --- one exchange: what the user says and what the model writes back -----------------------


@dataclass
class Exchange:
    """One user message and the model's reply. `calls` are made first (then `answer` gets the
    tool results); with no calls `answer` gets an empty list. Thoughts are used only when
    thinking is on."""

    category: str
    user: UserTurn
    thought: str
    answer: Callable[[list[ToolResult]], tuple[str, str]]  # results -> (thought after results, answer)
    calls: list[tuple[str, dict]] = field(default_factory=list)
    tools: tuple[str, ...] = ()  # tools that must be enabled
    client_tool: dict | None = None  # a declared tool's schema
    client_response: dict | None = None  # what the user answers for it


def direct(category: str, text: str, thought: str, answer: str, media=()) -> Exchange:
    return Exchange(category, UserTurn(text, list(media)), thought, lambda _: ("", answer))


def call_text(name: str, arguments: dict) -> str:
    """A call as Gemma 4 writes it (and as the template renders it back)."""
    return f"<|tool_call>call:{name}{gemma_value(arguments)}<tool_call|>"


def gemma_value(value) -> str:
    if isinstance(value, str):
        return f"{QUOTE}{value}{QUOTE}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].lower())
        return "{" + ",".join(f"{k}:{gemma_value(v)}" for k, v in items) + "}"
    return str(value)


def canonical_number(rng: random.Random, low: float, high: float, decimals_choices=(0, 0, 1, 2)) -> str:
    """A number as the template prints it back (str of the parsed value): no trailing zeros."""
    decimals = pick(rng, decimals_choices)
    value = round(rng.uniform(low, high), decimals)
    text = str(int(value)) if decimals == 0 or value.is_integer() else str(value)
    return "0" if float(text) == 0 else text


# weather ---------------------------------------------------------------------------------

def weather_exchange(rng: random.Random, city: str | None = None, question: str | None = None,
                     split: str = TRAIN) -> Exchange:
    """A weather question in one of the split's phrasing families (or `question`, with {c})."""
    city = city or place_name(rng)
    fahrenheit = question is None and rng.random() < 0.12
    if question is None:
        family = pick(rng, phrasing.by_split(phrasing.WEATHER, split))
        after = phrasing.FAHRENHEIT.pick(rng, split) if fahrenheit else ""
        text, written = phrasing.compose(rng, split, family, {"x": city}, after=after)
        city = written["x"]
    else:
        text = question.format(c=city)
    arguments = {"location": city, **({"unit": "fahrenheit"} if fahrenheit else {})}

    def answer(results: list[ToolResult]) -> tuple[str, str]:
        r = results[0].response
        unit = "degrees Fahrenheit" if r["unit"] == "fahrenheit" else "degrees Celsius"
        thought = f"The tool says it is {r['temperature']} {unit} and {r['weather']} in {city}. I will tell the user."
        text = pick(rng, (f"It is {r['temperature']} {unit} and {r['weather']} in {city}.",
                          f"In {city} it is {r['weather']} and {r['temperature']} {unit}.",
                          f"The weather in {city} is {r['weather']}, {r['temperature']} {unit}."))
        return thought, text + " (The weather tool returns sample data.)" * (rng.random() < 0.2)

    thought = f"The user asks about the weather in {city}. I will call get_current_weather with location {city}."
    return Exchange("weather", UserTurn(text), thought, answer,
                    calls=[("get_current_weather", arguments)], tools=("get_current_weather",))


def weather_follow_up(rng: random.Random) -> Exchange:
    exchange = weather_exchange(rng, question=pick(rng, ("And in {c}?", "What about {c}?", "And {c}?",
                                                         "How about {c}?")))
    exchange.category = "weather follow-up"
    return exchange


# calculator ------------------------------------------------------------------------------


def calc_number(rng: random.Random, allow_commas: bool = True) -> str:
    return phrasing.number(rng, allow_commas)


def expression(rng: random.Random) -> str:
    return phrasing.symbolic_expression(rng)


def lopsided_expression(rng: random.Random) -> str:
    """A large number and a small one: the result shares its first digits with the large
    operand ("30.49 + 8,263,910" is 8263940.49), and an answer must quote the result's digits,
    not go on with the operand's."""
    large, small = f"{rng.randint(1000, 9_999_999):,}", calc_number(rng)
    if rng.random() < 0.5:
        large = large.replace(",", "")
    return pick(rng, (f"{large} + {small}", f"{small} + {large}", f"{large} - {small}", f"{small} - {large}",
                      f"{small}+{large}", f"{large}-{small}"))


def calculator_exchange(rng: random.Random, split: str = TRAIN) -> Exchange:
    """Arithmetic in symbols or in words, asked in one of the split's families; the call copies
    the arithmetic as written (the calculator reads words too)."""
    while True:  # arithmetic the calculator answers (no division by zero, no overflow)
        expr, table = _calculator_request(rng)
        try:
            builtin_tools.calculator(expr)
            break
        except ValueError:
            continue
    text, written = phrasing.compose(rng, split, pick(rng, phrasing.by_split(table, split)), {"x": expr},
                                     when=False)
    expr = written["x"]

    def answer(results: list[ToolResult]) -> tuple[str, str]:
        value = results[0].response["result"]
        thought = f"The calculator returned {value}. I will give that as the answer."
        return thought, pick(rng, (f"{expr} = {value}.", f"The answer is {value}.", f"{expr} is {value}.",
                                   f"That is {value}."))

    thought = f"The user wants to know {expr}. I will use the calculator."
    return Exchange("calculator", UserTurn(text), thought, answer,
                    calls=[("calculator", {"expression": expr})], tools=("calculator",))


def _calculator_request(rng: random.Random) -> tuple[str, tuple]:
    shape = rng.random()
    if shape < 0.2:
        expr, table = lopsided_expression(rng), phrasing.CALCULATOR
    elif shape < 0.55:
        expr, table = expression(rng), phrasing.CALCULATOR
    elif shape < 0.85:
        expr, table = phrasing.worded_expression(rng), phrasing.CALCULATOR
    else:
        expr, table = phrasing.worded_expression(rng, verbal=True), phrasing.CALCULATOR_VERBAL
    return expr, table


# unit conversion -------------------------------------------------------------------------

UNIT_SPELLINGS = phrasing.UNIT_SPELLINGS


def convert_exchange(rng: random.Random, split: str = TRAIN) -> Exchange:
    quantity = pick(rng, tuple(UNIT_SPELLINGS))
    source, target = rng.sample(UNIT_SPELLINGS[quantity], 2)
    low = -40 if quantity == "temperature" else 0.1
    value_text = canonical_number(rng, low, pick(rng, (10, 100, 1000)))
    if source[0] == "K":
        value_text = value_text.lstrip("-")  # no temperature is below 0 K
    family = pick(rng, phrasing.by_split(phrasing.CONVERT, split))
    text, written = phrasing.compose(rng, split, family, {"v": value_text, "f": pick(rng, source),
                                                          "t": pick(rng, target)}, when=False)
    from_unit, to_unit = written["f"], written["t"]
    value = float(value_text) if "." in value_text else int(value_text)
    arguments = {"value": value, "from_unit": from_unit, "to_unit": to_unit}

    def answer(results: list[ToolResult]) -> tuple[str, str]:
        result = results[0].response["result"]
        thought = f"The tool says {value_text} {from_unit} is {result} {to_unit}."
        return thought, pick(rng, (f"{value_text} {from_unit} is {result} {to_unit}.",
                                   f"That is {result} {to_unit}."))

    thought = f"The user wants {value_text} {from_unit} in {to_unit}. I will call convert_units."
    return Exchange("convert_units", UserTurn(text), thought, answer,
                    calls=[("convert_units", arguments)], tools=("convert_units",))


# time ------------------------------------------------------------------------------------

def time_zone_text(rng: random.Random, zones: list[str]) -> str:
    """How a user names a zone: IANA name, its city, a city of `_CITY_ZONES`, an offset or UTC;
    always one `current_time` understands."""
    shape = rng.random()
    if shape < 0.45:
        return pick(rng, zones)
    if shape < 0.75:
        return zone_city(pick(rng, zones))
    if shape < 0.85:
        return pick(rng, training_other_cities())
    if shape < 0.96:
        hours, minutes = rng.randint(0, 13), pick(rng, (0, 0, 0, 30, 45))
        return f"UTC{pick(rng, '+-')}{hours:02d}:{minutes:02d}"
    return "UTC"


@functools.lru_cache(maxsize=1)
def training_other_cities() -> tuple[str, ...]:
    """Cities the time tool knows by their country's zone, as people write them."""
    cities = [c for group in builtin_tools._CITY_ZONES.values() for c in group]
    names = (" ".join(w.capitalize() for w in c.split()) for c in cities)
    return tuple(n for n in names if not mentions_held_out(n) and not mentions_held_out_zone(n))


def time_exchange(rng: random.Random, zones: list[str], split: str = TRAIN, zone: str | None = None) -> Exchange:
    zone = zone or time_zone_text(rng, zones)
    text, written = phrasing.compose(rng, split, pick(rng, phrasing.by_split(phrasing.TIME, split)), {"x": zone})
    zone = written["x"]

    def answer(results: list[ToolResult]) -> tuple[str, str]:
        r = results[0].response
        thought = f"The tool says it is {r['time']} on {r['weekday']}, {r['date']} in {zone}."
        return thought, pick(rng, (f"It is {r['time']} on {r['weekday']}, {r['date']} in {zone}.",
                                   f"In {zone} it is {r['weekday']}, {r['date']}, and the time is {r['time']}."))

    thought = f"The user asks for the time in {zone}. I will call current_time."
    return Exchange("current_time", UserTurn(text), thought, answer,
                    calls=[("current_time", {"timezone": zone})], tools=("current_time",))


@contextlib.contextmanager
def frozen_clock(instant: dt.datetime) -> Iterator[None]:
    """`current_time` reads the wall clock; the training data must not depend on the day it is
    built, so the tool runs (for real) against a clock stopped at `instant`."""

    class StoppedDatetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return instant.astimezone(tz)

    clock = types.SimpleNamespace(**{name: getattr(dt, name) for name in dir(dt) if not name.startswith("_")})
    clock.datetime = StoppedDatetime
    with mock.patch.object(builtin_tools, "dt", clock):
        yield


def random_instant(rng: random.Random) -> dt.datetime:
    start = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    return start + dt.timedelta(seconds=rng.randrange(15 * 365 * 86400))


# client tools (declared by the user; the user answers them) ---------------------------------

CLIENT_VERBS = {"lookup": ("look up", "Looks up"), "find": ("find", "Finds"), "book": ("book", "Books"),
                "cancel": ("cancel", "Cancels"), "track": ("track", "Tracks"), "reserve": ("reserve", "Reserves"),
                "create": ("create", "Creates"), "check": ("check", "Checks the status of"),
                "update": ("update", "Updates"), "schedule": ("schedule", "Schedules"),
                "send": ("send", "Sends"), "rate": ("rate", "Rates")}
CLIENT_NOUNS = ("order", "table", "ticket", "flight", "room", "package", "invoice", "meeting", "reminder",
                "account", "appointment", "car", "parcel", "delivery", "course", "seat")
CLIENT_STATUS = ("confirmed", "shipped", "pending", "done", "cancelled", "booked", "delivered", "on hold",
                 "in transit", "approved")


def client_parameters(rng: random.Random, noun: str) -> list[tuple[str, str, Callable[[], tuple[object, str]]]]:
    """(name, JSON type, draw) where draw() gives (value, the words a user would say for it)."""

    def number_id():
        v = rng.randint(1, 99999)
        return v, pick(rng, (f"{noun} {v}", f"{noun} number {v}", f"{noun} id {v}"))

    def people():
        v = rng.randint(1, 20)
        return v, f"for {v} people"

    def name():
        v = person_name(rng)
        return v, pick(rng, (f"under the name {v}", f"for {v}", f"name {v}"))

    def date():
        v = f"20{rng.randint(24, 39)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return v, f"on {v}"

    def time_of_day():
        v = f"{rng.randint(0, 23):02d}:{pick(rng, ('00', '15', '30', '45'))}"
        return v, f"at {v}"

    def email():
        v = f"{syllable_word(rng, (1, 2)).lower()}.{syllable_word(rng, (1, 2)).lower()}@example.com"
        return v, f"to {v}"

    def city():
        v = city_name(rng)
        return v, f"in {v}"

    def seats():
        v = rng.randint(1, 9)
        return v, f"with {v} seats"

    def code():
        v = f"{syllable_word(rng, (1, 1)).upper()[:2]}-{rng.randint(100, 9999)}"
        return v, f"with code {v}"

    def urgent():
        v = rng.random() < 0.5
        return v, "(urgent)" if v else "(not urgent)"

    def title():
        v = f"{pick(rng, ADJECTIVES)} {pick(rng, NOUNS)}"
        return v, f'called "{v}"'

    def amount():
        v = round(rng.uniform(1, 999), pick(rng, (0, 2)))
        v = int(v) if float(v).is_integer() else v
        return v, f"for {v} dollars"

    pool = [(f"{noun}_id", "integer", number_id), ("people", "integer", people), ("name", "string", name),
            ("date", "string", date), ("time", "string", time_of_day), ("email", "string", email),
            ("city", "string", city), ("seats", "integer", seats), ("code", "string", code),
            ("urgent", "boolean", urgent), ("title", "string", title), ("amount", "number", amount)]
    return rng.sample(pool, rng.randint(1, 3))


def client_tool_exchange(rng: random.Random) -> Exchange:
    verb = pick(rng, tuple(CLIENT_VERBS))
    noun = pick(rng, CLIENT_NOUNS)
    spoken_verb, description_verb = CLIENT_VERBS[verb]
    name = f"{verb}_{noun}"
    parameters = client_parameters(rng, noun)
    arguments, phrases = {}, []
    for param, _, draw in parameters:
        value, words = draw()
        arguments[param] = value
        phrases.append(words)
    schema = {"name": name, "description": f"{description_verb} a {noun}.",
              "parameters": {"type": "object",
                             "properties": {p: {"type": kind, "description": f"The {p.replace('_', ' ')}"}
                                            for p, kind, _ in parameters},
                             "required": [p for p, _, _ in parameters]}}
    opener = pick(rng, ("Please ", "Can you ", "I want to ", "", "Could you "))
    request = f"{opener}{spoken_verb} the {noun} {' '.join(phrases)}"
    request = request[0].upper() + request[1:] + ("?" if opener in ("Can you ", "Could you ") else ".")
    status = pick(rng, CLIENT_STATUS)
    response = {"status": status}
    if rng.random() < 0.5:
        response["reference"] = f"R-{rng.randint(1000, 99999)}"

    def answer(results: list[ToolResult]) -> tuple[str, str]:
        got = results[0].response
        reference = f" The reference is {got['reference']}." if "reference" in got else ""
        thought = f"{name} returned the status {got['status']}."
        return thought, f"The {noun} is {got['status']}.{reference}"

    thought = f"The user wants to {spoken_verb} the {noun}. I will call {name}."
    return Exchange("client tool", UserTurn(request), thought, answer, calls=[(name, arguments)],
                    client_tool=schema, client_response=response)


# copying ------------------------------------------------------------------------------------

REPEAT_REQUESTS = ("Repeat after me: {p}", "Say exactly this: {p}", "Echo: {p}", "Copy this text: {p}",
                   "Please repeat: {p}", "Repeat exactly: {p}", 'Repeat "{p}"', "Say {p}")


def zone_like(rng: random.Random) -> str:
    """A made-up "Region/Some_City" in the shape of an IANA time zone name."""
    region = pick(rng, ("Africa", "America", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific"))
    city = "_".join(syllable_word(rng, (1, 3)) for _ in range(pick(rng, (1, 1, 2, 3))))
    return f"{region}/{city}"


def copy_payload(rng: random.Random) -> str:
    """Names, numbers, times, words and expressions: what the tools' arguments are made of."""
    makers = (lambda: city_name(rng), lambda: person_name(rng), lambda: calc_number(rng),
              lambda: f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", lambda: pick(rng, NOUNS),
              lambda: pick(rng, ADJECTIVES), lambda: syllable_word(rng).lower(), lambda: expression(rng),
              lambda: canonical_number(rng, -50, 5000), lambda: zone_like(rng), lambda: city_name(rng))
    return pick(rng, (" ", ", ", " ")).join(pick(rng, makers)() for _ in range(rng.randint(1, 5)))


def repeat_exchange(rng: random.Random) -> Exchange:
    """Say the user's words back exactly: the plainest practice for copying arguments."""
    payload = copy_payload(rng)
    return direct("repeat", pick(rng, REPEAT_REQUESTS).format(p=payload),
                  "The user wants me to repeat their words exactly.", payload)


# chat without tools --------------------------------------------------------------------------

IDENTITY = "I am a small Gemma 4 demo model trained on synthetic data."
CAPABILITIES = ("I can think out loud, call tools such as the calculator or the weather, say which media "
                "you sent and tell long stories.")
GREETINGS = ("Hi", "Hello", "Hello!", "Hey there", "Good morning", "Good evening", "Hi! How are you?", "hello",
             "Hey!", "Greetings.", "Hello, nice to meet you.")
IDENTITY_QUESTIONS = ("Who are you?", "What are you?", "What model are you?", "Introduce yourself.",
                      "Tell me about yourself.", "who are you", "What can you do?", "Are you a Gemma model?")
THANKS = ("Thanks!", "Thank you.", "Thanks, that helps.", "Great, thank you!", "ok thanks", "Thanks, that's all.",
          "That's all, thank you.", "Perfect, thanks!", "Cool, thanks", "Thank you so much!", "Awesome, thanks.",
          "Bye!", "Goodbye.", "See you later!", "Nice, that's it for now.", "OK, bye", "Thanks a lot.")
SMALL_TALK = (("How are you?", "I am fine, thank you! Ask me about the weather, a sum, a unit or the time."),
              ("How are you doing today?", "I am fine, thank you! Ask me about the weather, a sum, a unit or the time."),
              ("What's up?", "Not much! Ask me about the weather, a sum, a unit or the time."),
              ("Are you there?", "Yes, I am here. Ask me about the weather, a sum, a unit or the time."),
              ("Can you help me?", "I will try! I can check the weather, do arithmetic, convert units and tell the time."),
              ("ok", "OK! Ask me anything else."), ("Cool.", "Glad you like it! Ask me anything else."),
              ("Nice!", "Thank you! Ask me anything else."), ("Test", "Hello! I am here and working."),
              ("Are you a robot?", f"Yes. {IDENTITY}"), ("Do you have feelings?", f"No. {IDENTITY}"))
FACTS = (
    ("How many days are in a week?", "There are seven days in a week."),
    ("How many hours are in a day?", "There are 24 hours in a day."),
    ("How many minutes are in an hour?", "There are 60 minutes in an hour."),
    ("What colour is the sky on a clear day?", "The sky is blue on a clear day."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What is water made of?", "Water is made of hydrogen and oxygen."),
    ("At what temperature does water boil?", "Water boils at 100 degrees Celsius at sea level."),
    ("At what temperature does water freeze?", "Water freezes at 0 degrees Celsius."),
    ("How many continents are there?", "There are seven continents."),
    ("What is the largest planet?", "Jupiter is the largest planet in the solar system."),
    ("What do bees make?", "Bees make honey."),
    ("How many sides does a triangle have?", "A triangle has three sides."),
    ("How many months are in a year?", "There are twelve months in a year."),
    ("What is the opposite of hot?", "The opposite of hot is cold."),
    ("What gas do plants take in?", "Plants take in carbon dioxide and give off oxygen."),
    ("What is the closest star to Earth?", "The Sun is the closest star to Earth."),
    ("How many letters are in the English alphabet?", "There are 26 letters in the English alphabet."),
    ("What is the fastest land animal?", "The cheetah is the fastest land animal."),
    ("What is Gemma?", "Gemma is a family of open models from Google. I am a tiny Gemma 4 demo model."),
    ("What is the chemical symbol for gold?", "The chemical symbol for gold is Au."),
    ("How many planets are in the solar system?", "There are eight planets in the solar system."),
    ("What is the tallest animal?", "The giraffe is the tallest animal."),
    ("What do you call a baby cat?", "A baby cat is called a kitten."),
    ("How many strings does a violin have?", "A violin has four strings."),
)
TOPIC_QUESTIONS = ("What is {t}?", "Explain {t}.", "Tell me about {t}.", "Why is {t} important?",
                   "Can you describe {t}?", "What do you know about {t}?")


def unknown_topic(rng: random.Random) -> str:
    return pick(rng, (f"the {pick(rng, ADJECTIVES)} {pick(rng, NOUNS)}", syllable_word(rng).lower(),
                      f"{syllable_word(rng)} theory", f"the history of {syllable_word(rng)}"))


# Requests a tiny model cannot do: it says so, in the same words whatever was asked, instead
# of calling a tool or rambling. The requests are put together from parts (so that no list of
# them is learnt by heart) and the reply copies nothing from them: a thought that restated a
# long request it had never seen ran on in loops.
WHAT_I_CAN_DO = ("I can check the weather, do arithmetic, convert units, tell the time, count the media you "
                 "send and tell long stories.")
DECLINE_THOUGHT = "The user asks for something I cannot do. I will say so."
DECLINE_ANSWER = f"I am a tiny demo model trained on synthetic data, so I cannot help with that. {WHAT_I_CAN_DO}"
UNKNOWN_THOUGHT = "The user asks about something I do not know. I will say so."
UNKNOWN_ANSWER = f"I am a tiny demo model trained on synthetic data, so I do not know about that. {WHAT_I_CAN_DO}"
REQUEST_OPENERS = ("", "", "", "Please ", "Can you ", "Could you ", "I need you to ", "Help me ", "Hey, ",
                   "Quick one: ", "I want you to ", "Would you ")
REQUEST_ACTIONS = (
    "write a poem about {t}", "write a haiku about {t}", "write a song about {t}", "write a short note to {n}",
    "write an email to {n}", "write a speech about {t}", "write a review of {t}", "write a joke about {t}",
    "tell me a joke", "tell me a riddle", "tell me something funny", "plan a day trip to {p}",
    "plan a weekend in {p}", "plan a party for {n}", "plan my week", "make a shopping list for {f}",
    "give me a recipe for {f}", "give me ideas for {t}", "give me travel tips for {p}", "give me advice about {t}",
    "translate '{t}' into French", "translate '{t}' into {lang}", "summarize the history of {p}",
    "summarize this article", "explain how {t} works", "explain why {t} matters", "describe {t} in detail",
    "compare {t} and {u}", "list ten facts about {t}", "recommend a book about {t}", "recommend a film",
    "design a logo for {n}", "draw a picture of {t}", "sing a song", "fix my code", "debug my code",
    "write Python code that sorts a list", "write a function that {code}", "solve this puzzle",
    "help me with my homework", "check my spelling", "rewrite this paragraph", "brainstorm names for {t}",
    "teach me {lang}", "teach me to play chess", "play a game with me", "book a table for {n}",
    "find me a hotel in {p}", "order {f} for me", "set an alarm", "send a message to {n}",
    "count the tokens in this message", "tell me how many words this is", "remember my name",
    "write a long essay about {t}", "search the web for {t}", "open a website", "call {n}",
    "read my emails", "make a website about {t}", "give me the news", "predict the stock market",
)
QUESTION_REQUESTS = (
    "How do I {do}?", "How can I {do}?", "What is the best way to {do}?", "Why do {t}s {verb}?",
    "Why is {t} so {adj}?", "Who invented {t}?", "Who was {n}?", "When was {p} founded?", "Where can I buy {f}?",
    "Which {t} should I choose?", "Is {t} better than {u}?", "What should I cook with {f}?",
    "What should I see in {p}?", "What is the meaning of life?", "What happens if {t} {verb}s?",
)
DOINGS = ("learn to swim", "bake {f}", "fix a bike", "grow tomatoes", "train a {t}", "get to {p}", "sleep better",
          "learn {lang}", "write a novel", "start a company", "paint a {t}", "build a {t}", "save money",
          "make friends", "cook {f}")
VERBS = ("fly", "sing", "sleep", "glow", "move", "change colour", "grow", "shine", "float", "fall")
LANGUAGES = ("Spanish", "German", "Japanese", "Italian", "Swahili", "Korean", "Dutch", "Latin")
CODE_TASKS = ("adds two numbers", "reverses a string", "reads a file", "counts words", "checks for primes")


# What people type into a demo, never in the training data (`--eval` asks them): each reply
# must end cleanly, with a thought exactly when thinking is on, and call no tool.
HELD_OUT_REQUESTS = (
    "Compose a limerick about a penguin.", "What's the capital of Peru?", "Can you recommend a podcast?",
    "How do volcanoes erupt?", "Knit me a scarf.", "Write a cover letter for a barista job.",
    "Explain quantum computing to a child.", "Who will win the next World Cup?", "Make up a riddle about the moon.",
    "What's your favourite colour?", "Tell me a bedtime poem.", "Summarise Hamlet in one line.",
    "How tall is Mount Everest?", "Write a SQL query that counts users.", "What's the best pizza topping?",
    "Give me a motivational quote.", "Why do cats purr?", "Explain how a rainbow forms.",
    "Draft a tweet about spring.", "What year did the Berlin Wall fall?", "Suggest a name for my puppy.",
    "Can you help me study for an exam?", "List three uses of vinegar.", "What is love?",
    "Do you dream?", "Tell me about black holes.", "How do I tie a tie?", "Plan a birthday dinner for six.",
    "Write a haiku about autumn leaves.", "Translate 'good night' into Portuguese.",
)


# Everyday messages a newcomer types, none of them in the training data: each must end by
# itself, briefly, and call no tool it does not need.
HELD_OUT_EVERYDAY = (
    "Hey, how's it going?", "Good afternoon!", "Yo", "Thanks a bunch!", "Cheers, that's everything.",
    "Who made you?", "What's your name?", "Can you speak French?", "Tell me something interesting.",
    "I'm bored.", "What should I do today?", "Do you like music?", "Is this thing on?",
    "How many tokens is this message?", "What's the meaning of your name?", "Are you better than ChatGPT?",
    "Write me an essay about climate change.", "lol", "Can I ask you something?", "Good night!",
    "What day is your birthday?", "Sing me a song about rain.", "Explain machine learning in one sentence.",
    "What can't you do?", "hmm", "Nice to meet you.", "How old are you?", "Please summarize our chat.",
    "What's the best programming language?", "Help!",
)


def request_text(rng: random.Random) -> str:
    """A request or a question the model cannot answer, from parts."""
    thing = lambda: f"the {pick(rng, ADJECTIVES)} {pick(rng, NOUNS)}" if rng.random() < 0.6 else pick(rng, NOUNS)  # noqa: E731
    parts = dict(t=thing(), u=thing(), p=place_name(rng), n=person_name(rng), f=pick(rng, FOODS),
                 lang=pick(rng, LANGUAGES), code=pick(rng, CODE_TASKS), adj=pick(rng, ADJECTIVES),
                 verb=pick(rng, VERBS))
    if rng.random() < 0.3:
        parts["do"] = pick(rng, DOINGS).format(**parts)
        return pick(rng, QUESTION_REQUESTS).format(**parts)
    opener = pick(rng, REQUEST_OPENERS)
    action = pick(rng, REQUEST_ACTIONS).format(**parts)
    text = opener + action
    text = text[0].upper() + text[1:]
    end = "?" if opener.strip().lower() in ("can you", "could you", "would you") else pick(rng, (".", ".", "!", ""))
    text += end
    return text if text not in HELD_OUT_REQUESTS + HELD_OUT_EVERYDAY else request_text(rng)


def task_exchange(rng: random.Random) -> Exchange:
    text = request_text(rng)
    if rng.random() < 0.15:
        text = text.lower()
    return direct("task", text, DECLINE_THOUGHT, DECLINE_ANSWER)


def chat_exchange(rng: random.Random) -> Exchange:
    kind = rng.randrange(14)
    if kind >= 12:
        question, answer = pick(rng, SMALL_TALK)
        return direct("small talk", question, "The user is making small talk. I will answer briefly.", answer)
    if kind >= 10:
        return task_exchange(rng)
    if kind < 2:
        text = pick(rng, GREETINGS)
        if rng.random() < 0.3:
            text += pick(rng, ("!", ".", "", " :)", " there", " friend"))
        if rng.random() < 0.2:
            text = text.lower()
        return direct("greeting", text, "The user greets me. I will greet them back and say what I can do.",
                      f"Hello! {IDENTITY} {CAPABILITIES}")
    if kind < 4:
        text = pick(rng, IDENTITY_QUESTIONS)
        return direct("identity", text, f"The user asks: {text} I will introduce myself.",
                      f"{IDENTITY} {CAPABILITIES}")
    if kind < 5:
        text = pick(rng, THANKS)
        return direct("thanks", text, "The user thanks me. I will reply politely.",
                      "You are welcome! Ask me anything else.")
    if kind < 8:
        question, answer = pick(rng, FACTS)
        return direct("fact", question, f"The user asks: {question} I know this one.", answer)
    text = pick(rng, TOPIC_QUESTIONS).format(t=unknown_topic(rng))
    return direct("unknown topic", text, UNKNOWN_THOUGHT, UNKNOWN_ANSWER)


# The tool's name in the Tools panel, and what it does: a question that needs a tool that is
# off gets one fixed sentence naming it, whatever the question's words.
TOOL_MISSING = {
    "get_current_weather": ("Weather", "the weather tool"), "calculator": ("Calculator", "the calculator"),
    "convert_units": ("Unit conversion", "the unit conversion tool"),
    "current_time": ("Date & time", "the date and time tool"),
}


def tool_missing_answer(tool: str) -> str:
    label, name = TOOL_MISSING[tool]
    return f"I need {name} for that: turn on \"{label}\" in Tools, then ask again."


def tool_question(rng: random.Random, tool: str, zones: list[str], split: str = TRAIN) -> Exchange:
    return {"get_current_weather": lambda: weather_exchange(rng, split=split),
            "calculator": lambda: calculator_exchange(rng, split),
            "convert_units": lambda: convert_exchange(rng, split),
            "current_time": lambda: time_exchange(rng, zones, split)}[tool]()


def tool_missing_exchange(rng: random.Random, zones: list[str], split: str = TRAIN,
                          tool: str | None = None) -> tuple[Exchange, str]:
    """A question that needs a tool that is not enabled: say which one, instead of guessing."""
    tool = tool or pick(rng, BUILTIN_TOOLS)
    source = tool_question(rng, tool, zones, split)
    thought = f"The user needs {TOOL_MISSING[tool][1]}, but it is not enabled. I will say so."
    return direct("tool missing", source.user.text, thought, tool_missing_answer(tool)), tool


# stories -----------------------------------------------------------------------------------

STORY_REQUESTS = ("Write a long story.", "Tell me a long story.", "Write a long story about {t}.",
                  "Tell me a long story about {t}.", "I want a long story about {t}.", "Please write a long story.",
                  "Can you tell me a long story?", "write a long story about {t}", "Tell me a very long story.")


def story_sentence(rng: random.Random, hero: str, friend: str) -> str:
    adjective, noun, place = pick(rng, ADJECTIVES), pick(rng, NOUNS), pick(rng, PLACES)
    return pick(rng, (
        f"{hero} walked to {place} and saw a {adjective} {noun}.",
        f"The {noun} near {place} was {adjective} and very old.",
        f"{hero} found a {adjective} {noun} under a stone.",
        f"Then {hero} said hello to {friend}.",
        f"The sky over {place} turned {pick(rng, COLOURS)}.",
        f"{hero} and {friend} shared {pick(rng, FOODS)} and laughed.",
        f"A {adjective} {noun} followed them to {place}.",
        f"{friend} told a story about a {adjective} {noun}.",
        f"The wind carried the smell of {pick(rng, FOODS)} from {place}.",
        f"{hero} wondered where the {noun} had come from.",
        f"They rested by {place} until the evening.",
        f"In the morning {hero} woke up early and looked for the {noun}.",
        f"{friend} was {adjective}, but {hero} was {pick(rng, ADJECTIVES)}.",
        f"Nobody in {place} had ever seen such a {adjective} {noun}.",
        f"So {hero} drew a map of {place} on a piece of paper.",
        f"The road to {place} was long and full of {noun}s.",
        f"{hero} sang a song about the {adjective} {noun}.",
        f"At night the stars shone over {place}.",
        f"{friend} asked {hero} what they should do next.",
        f"After a while they heard a {adjective} sound from {place}.",
    ))


def story_exchange(rng: random.Random) -> Exchange:
    """A long answer (20 to 45 sentences) that ends with `<turn|>`: the app's Stop button
    needs a reply that streams for a while."""
    topic = f"a {pick(rng, ADJECTIVES)} {pick(rng, NOUNS)}" if rng.random() < 0.7 else person_name(rng)
    request = pick(rng, STORY_REQUESTS)
    hero, friend = person_name(rng), person_name(rng)
    about = topic if "{t}" in request else f"{hero} and a {pick(rng, ADJECTIVES)} {pick(rng, NOUNS)}"
    sentences = [f"Once upon a time there was {about}.", f"{hero} lived near {pick(rng, PLACES)} with {friend}."]
    sentences += [story_sentence(rng, hero, friend) for _ in range(rng.randint(17, 42))]
    sentences.append(f"And so {hero} and {friend} went home, happy. The end.")
    thought = (f"The user wants a long story about {topic}. I will write many sentences." if "{t}" in request
               else "The user wants a long story. I will write many sentences.")
    return direct("long story", request.format(t=topic), thought, " ".join(sentences))


# media -----------------------------------------------------------------------------------

MEDIA_QUESTIONS = ("What did I send?", "What is this?", "Describe this.", "What do you see?",
                   "What is in this file?", "Can you tell me what I attached?", "What did you receive?",
                   "Look at this.", "What's this?", "Describe what I sent.", "")


def media_exchange(rng: random.Random) -> Exchange:
    shape = rng.random()
    if shape < 0.26:
        media = [synthetic_image(rng)]
    elif shape < 0.45:
        media = [synthetic_image(rng) for _ in range(2)]
    elif shape < 0.5:
        media = [synthetic_image(rng) for _ in range(3)]
    elif shape < 0.65:
        media = [synthetic_audio(rng)]
    elif shape < 0.85:
        media = [synthetic_video(rng)]
    elif shape < 0.93:
        media = [synthetic_image(rng) for _ in range(rng.randint(1, 2))] + [synthetic_audio(rng)]
    elif shape < 0.97:
        media = [synthetic_image(rng), synthetic_video(rng)]
    else:
        media = [synthetic_audio(rng) for _ in range(2)]
    phrase = media_phrase(media)
    text = pick(rng, MEDIA_QUESTIONS)
    thought = (f"The user sent {phrase} and asks: {text} I will say what I received." if text
               else f"The user sent {phrase} without a question. I will say what I received.")
    return direct("media", text, thought, f"I received {phrase}.", media=media)


# --- episodes: exchanges played through the app's own conversation code ----------------------


@dataclass
class Episode:
    exchanges: list[Exchange]
    options: ChatOptions
    registry: ToolRegistry
    # Rendered as an OpenAI-compatible server renders it: the prompt after a tool's response
    # holds no thought from before the call (the API has no field for thoughts), and each
    # response is the JSON text of a `tool` message (`{value:<|"|>{...}<|"|>}`). The model must
    # answer from that response too, not think and call again.
    served: bool = False

    @property
    def category(self) -> str:
        return self.exchanges[-1].category


@dataclass
class Step:
    """One generation round: the prompt the app renders and what the model writes."""

    prompt: str
    output: str
    spec: object


def thought_block(thought: str, thinking: bool) -> str:
    return f"{THOUGHT_OPEN}{thought}{THOUGHT_CLOSE}" if thinking else ""


def play(episode: Episode, processor) -> list[Step]:
    """Run the episode the way `TurnRunner` runs turns: render the prompt, take the model's
    output, run its calls through the registry, render again."""
    conversation, steps = Conversation(), []
    thinking = episode.options.thinking
    enabled = set(episode.options.enabled_tools)

    def render() -> tuple[str, object]:
        spec = build_spec(conversation, episode.options, episode.registry)
        return template_text(processor, spec), spec

    for exchange in episode.exchanges:
        conversation.turns += [exchange.user, AssistantTurn()]
        turn = conversation.turns[-1]
        prompt, spec = render()
        if not exchange.calls:
            after, answer = exchange.answer([])
            steps.append(Step(prompt, thought_block(exchange.thought, thinking) + answer + END_OF_TURN, spec))
            turn.reasoning, turn.content = (exchange.thought if thinking else ""), answer
            continue
        calls = [ToolCall(name, arguments, id=f"call_{i}") for i, (name, arguments) in enumerate(exchange.calls)]
        output = thought_block(exchange.thought, thinking) + "".join(call_text(c.name, c.arguments) for c in calls)
        steps.append(Step(prompt, output + CALLS_DONE, spec))
        kept_thought = thinking and not episode.served
        round_ = ToolRound(calls=calls, reasoning=exchange.thought if kept_thought else "")
        turn.rounds.append(round_)
        results = []
        for call in calls:
            result = episode.registry.execute(call, enabled)
            if result.status == "client":
                result = ToolResult(call.name, call.id, "ok", exchange.client_response, 0.0)
            assert result.status == "ok", f"a training call must succeed: {call} -> {result.response}"
            results.append(result)
            round_.results.append(replace(result, response=tool_message_content(result.response))
                                  if episode.served else result)
        after, answer = exchange.answer(results)
        prompt, spec = render()
        steps.append(Step(prompt, (f"{after}{THOUGHT_CLOSE}" if thinking else "") + answer + END_OF_TURN, spec))
        turn.reasoning, turn.content = (after if thinking else ""), answer
    return steps


# --- tokenising an episode ------------------------------------------------------------------


@dataclass
class Example:
    """One training sequence. `target[i]` says whether token i is the model's own output (it
    is trained to predict it); `media` holds the processor outputs for the model's forward,
    pixel values as uint8 (they are k/255 exactly) to keep the dataset small."""

    category: str
    input_ids: "torch.Tensor"  # noqa: F821 - int32 (n,)
    target: "torch.Tensor"  # noqa: F821 - bool (n,)
    media: dict

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def tokenize(episode: Episode, steps: list[Step], processor) -> Example:
    """The final round's prompt as the app tokenises it, then the final output. Earlier
    outputs that reappear verbatim in the final prompt (the calls of this turn, the answers of
    earlier turns when thinking is off) are trained too; the others (earlier thoughts, which
    the template drops) are not."""
    import torch

    tokenizer = processor.tokenizer
    last = steps[-1]
    encoded = tokenizer(last.prompt, add_special_tokens=False, return_offsets_mapping=True)
    plain_ids = encoded["input_ids"]
    output_ids = tokenizer(last.output, add_special_tokens=False)["input_ids"]
    assert tokenizer(last.prompt + last.output, add_special_tokens=False)["input_ids"] == plain_ids + output_ids, \
        "an output must start on a token boundary"
    has_media = any(m for e in episode.exchanges for m in e.user.media)
    # With media, the real processor expands each placeholder into its soft tokens (layer 3);
    # a text-only prompt is tokenised by the same tokenizer with nothing to expand.
    inputs = model_inputs(processor, last.spec) if has_media else {"input_ids": torch.tensor([plain_ids])}
    prompt_ids = inputs["input_ids"][0]
    prompt_target = earlier_outputs(steps, plain_ids, encoded["offset_mapping"], len(prompt_ids), tokenizer)
    return Example(
        category=episode.category,
        input_ids=torch.cat([prompt_ids, torch.tensor(output_ids)]).to(torch.int32),
        target=torch.cat([prompt_target, torch.ones(len(output_ids), dtype=torch.bool)]),
        media=compact_media(inputs) if has_media else {},
    )


def earlier_outputs(steps: list[Step], plain_ids: list[int], offsets: list, expanded_length: int, tokenizer):
    """Which tokens of the final prompt are earlier outputs, located in the unexpanded prompt
    and mapped onto the expanded ids from the end: after the last media placeholder both
    tokenisations are the same. Outputs before that placeholder are left untrained."""
    import torch

    media_ids = {tokenizer.convert_tokens_to_ids(t) for t in MEDIA_PLACEHOLDERS}
    after_media = next((i + 1 for i in range(len(plain_ids) - 1, -1, -1) if plain_ids[i] in media_ids), 0)
    media_end = offsets[after_media - 1][1] if after_media else 0
    shift = expanded_length - len(plain_ids)
    final_text = steps[-1].prompt + steps[-1].output
    target = torch.zeros(expanded_length, dtype=torch.bool)
    for step in steps[:-1]:
        start, end = len(step.prompt), len(step.prompt) + len(step.output)
        if start < media_end or not final_text.startswith(step.prompt + step.output):
            continue  # an output before the last media, or a thought the template dropped
        for i in range(after_media, len(plain_ids)):
            token_start, token_end = offsets[i]
            inside = start <= token_start and token_end <= end
            assert inside or token_end <= start or token_start >= end, "an output must start on a token boundary"
            target[shift + i] = target[shift + i] or inside
    return target


def compact_media(inputs) -> dict:
    """The processor outputs the forward needs besides the ids, pixel values as uint8."""
    import torch

    media = {key: value for key, value in inputs.items() if key not in ("input_ids", "attention_mask")}
    for key in ("pixel_values", "pixel_values_videos"):
        if key in media:
            media[key] = (media[key] * 255).round().to(torch.uint8)
    return media


# --- the mix ----------------------------------------------------------------------------

# Episodes per category for the default dataset (about 5.5 million tokens).
DEFAULT_MIX = {
    "weather": 1500,
    "calculator": 800,
    "convert_units": 500,
    "current_time": 500,
    "client tool": 600,
    "chat": 950,
    "task": 300,
    "repeat": 400,
    "tool missing": 500,
    "long story": 220,
    "media": 950,
    "weather follow-up": 180,
}


class EpisodeMaker:
    """Draws episodes: the category's exchange, then options (thinking, system prompt,
    image budget, tools: the needed ones plus random others) and sometimes earlier turns."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.zones = training_time_zones()
        self.builtins = default_registry()

    def exchange(self, category: str) -> tuple[Exchange, set[str]]:
        """The category's exchange and tools that must NOT be enabled for it."""
        rng = self.rng
        if category == "weather":
            return weather_exchange(rng), set()
        if category == "calculator":
            return calculator_exchange(rng), set()
        if category == "convert_units":
            return convert_exchange(rng), set()
        if category == "current_time":
            return time_exchange(rng, self.zones), set()
        if category == "client tool":
            return client_tool_exchange(rng), set()
        if category == "chat":
            return chat_exchange(rng), set()
        if category == "task":
            return task_exchange(rng), set()
        if category == "tool missing":
            exchange, missing = tool_missing_exchange(rng, self.zones)
            return exchange, {missing}
        if category == "long story":
            return story_exchange(rng), set()
        if category == "media":
            return media_exchange(rng), set()
        if category == "repeat":
            return repeat_exchange(rng), set()
        raise ValueError(f"unknown category {category!r}")

    def history(self, thinking: bool) -> list[Exchange]:
        """Earlier exchanges (cheap, text-only ones). With thinking off every exchange is
        trained, so conversations run longer; with it on only the last one is (the template
        drops earlier thoughts), so they stay short."""
        count = pick(self.rng, (0, 0, 1) if thinking else (0, 1, 1, 2, 2, 3, 4))
        kinds = ("weather", "weather", "calculator", "convert_units", "current_time", "chat", "repeat")
        return [self.exchange(pick(self.rng, kinds))[0] for _ in range(count)]

    def episode(self, category: str) -> Episode:
        rng = self.rng
        thinking = rng.random() < 0.5
        forbidden: set[str] = set()
        if category == "weather follow-up":
            exchanges = self.history(thinking)[:1] + [weather_exchange(rng), weather_follow_up(rng)]
        elif category == "repeat":
            exchanges = [repeat_exchange(rng) for _ in range(1 if thinking else rng.randint(2, 8))]
        else:
            final, forbidden = self.exchange(category)
            history = [] if category in ("long story", "media") and rng.random() < 0.7 else self.history(thinking)
            exchanges = [e for e in history if not set(e.tools) & forbidden] + [final]
        needed = {tool for e in exchanges for tool in e.tools}
        # Often every tool is on (as in the app's examples): the question, not the tool list,
        # must decide which tool is called. The app starts with none enabled, so what needs no
        # tool is often asked with none.
        extra = ({tool for tool in BUILTIN_TOOLS if rng.random() < 0.6} if rng.random() < 0.7
                 else set(BUILTIN_TOOLS)) - forbidden
        if not needed and rng.random() < NO_TOOLS_SHARE:
            extra = set()
        if category == "repeat":
            extra = set()  # copy drills stay short
        registry = ToolRegistry()
        for spec in self.builtins.specs():
            registry.adopt(spec)
        declared = [e.client_tool for e in exchanges if e.client_tool]
        for schema in declared:
            if registry.get(schema["name"]) is None:
                registry.declare(schema)
        options = ChatOptions(
            system_prompt=pick(rng, SYSTEM_PROMPTS) if rng.random() < 0.25 else "",
            thinking=thinking,
            image_budget=pick(rng, (70, 140, 280, 280)),
            enabled_tools=[t for t in BUILTIN_TOOLS if t in needed | extra] + [s["name"] for s in declared],
        )
        return Episode(exchanges, options, registry, served=rng.random() < SERVED_SHARE)


def check_unseen(episode: Episode, steps: list[Step]) -> None:
    """No held-out city or zone in what the user says or the model writes."""
    texts = [e.user.text for e in episode.exchanges] + [s.output for s in steps]
    bad = [t for t in texts if mentions_held_out(t) or mentions_held_out_zone(t)]
    assert not bad, f"held-out names leaked into the training data: {bad[:2]}"


CHUNK = 200  # episodes drawn from one generator: chunks can be built in parallel, same result


def episode_plan(seed: int, mix: dict[str, int]) -> list[list[str]]:
    """The categories of all episodes in a seeded random order, cut into chunks."""
    categories = [c for c, n in mix.items() for _ in range(n)]
    random.Random(seed).shuffle(categories)
    return [categories[i:i + CHUNK] for i in range(0, len(categories), CHUNK)]


def build_episodes(processor, seed: int, index: int, categories: list[str]) -> Iterator[tuple[Episode, list[Step]]]:
    """The episodes of chunk `index`, from its own generator (seeded by `seed` and `index`)."""
    rng = random.Random(f"{seed}-{index}")
    maker = EpisodeMaker(rng)
    for category in categories:
        episode = maker.episode(category)
        with frozen_clock(random_instant(rng)):
            steps = play(episode, processor)
        check_unseen(episode, steps)
        yield episode, steps


_WORKER_PROCESSOR = None


def _load_worker_processor(bundle: str, loose_share: float) -> None:
    from transformers import AutoProcessor

    global _WORKER_PROCESSOR
    _WORKER_PROCESSOR = AutoProcessor.from_pretrained(bundle)
    phrasing.LOOSE_SHARE = loose_share


def _build_chunk(job: tuple[int, int, list[str]]) -> bytes:
    """A chunk's examples, serialised: tensors sent between processes as they are each keep a
    file descriptor open in the receiver, and a full dataset holds more than the fd limit."""
    import io

    import torch

    seed, index, categories = job
    examples = [tokenize(episode, steps, _WORKER_PROCESSOR)
                for episode, steps in build_episodes(_WORKER_PROCESSOR, seed, index, categories)]
    buffer = io.BytesIO()
    torch.save(examples, buffer)
    return buffer.getvalue()


def build_dataset(bundle: Path, seed: int = 0, mix: dict[str, int] | None = None, workers: int = 2,
                  progress: Callable[[int, int], None] | None = None,
                  loose_share: float = phrasing.LOOSE_SHARE) -> list[Example]:
    """Every example of the mix, in the plan's order, built by `workers` processes (each
    loads the bundle's processor); `loose_share` of the training requests loosened
    (`phrasing.loosen`)."""
    import io
    import multiprocessing

    import torch

    plan = episode_plan(seed, mix or DEFAULT_MIX)
    jobs = [(seed, index, categories) for index, categories in enumerate(plan)]
    total, examples = sum(len(c) for c in plan), []
    with multiprocessing.get_context("spawn").Pool(workers, _load_worker_processor, (str(bundle), loose_share)) as pool:
        for chunk in pool.imap(_build_chunk, jobs):
            examples += torch.load(io.BytesIO(chunk), weights_only=False)
            if progress:
                progress(len(examples), total)
    return examples


def category_counts(examples: list[Example]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for example in examples:
        counts[example.category] = counts.get(example.category, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> None:
    from transformers import AutoProcessor

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=6, help="print this many rendered episodes")
    args = parser.parse_args()
    processor = AutoProcessor.from_pretrained(ROOT / "assets" / "tiny-gemma4")
    first_chunk = episode_plan(args.seed, DEFAULT_MIX)[0]
    for _, (episode, steps) in zip(range(args.show), build_episodes(processor, args.seed, 0, first_chunk)):
        example = tokenize(episode, steps, processor)
        text = processor.tokenizer.decode(example.input_ids[example.target].tolist(), skip_special_tokens=False)
        print(f"=== {episode.category} ({len(example)} tokens, {int(example.target.sum())} trained)")
        print(steps[-1].prompt[-600:] + "⟦" + steps[-1].output + "⟧")
        print("--- trained:", text[:600])


if __name__ == "__main__":
    main()
