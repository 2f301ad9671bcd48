"""A small, deterministic English corpus for training the bundled tokenizer.

The bundled model talks about the things the app demonstrates (weather, arithmetic, units,
time zones, media it received, short plans while thinking), so the tokenizer learns merges
for that vocabulary. Everything else falls back to bytes, so any text still round-trips.
"""

import random

SUBJECTS = [
    "the weather", "the temperature", "the answer", "this image", "the audio clip", "the video",
    "the first frame", "the tool", "the result", "the calculator", "the conversion", "the time",
    "the user", "the assistant", "the model", "the question", "the request", "the city",
    "the forecast", "the wind", "the humidity", "the sky", "the plan", "the schema", "the function",
]
VERBS = [
    "is", "was", "looks", "seems", "shows", "returns", "gives", "needs", "uses", "calls",
    "asks for", "contains", "describes", "converts", "computes", "explains", "reports", "checks",
]
OBJECTS = [
    "sunny and warm", "cloudy with light rain", "a short answer", "two images", "one image",
    "an audio clip", "a video", "the current weather", "a tool call", "the local time",
    "degrees celsius", "degrees fahrenheit", "kilometers per hour", "miles", "kilograms", "pounds",
    "the final answer", "a number", "a list of values", "an object with properties", "a string",
    "the time zone", "a percentage", "the sum", "the product", "the square root", "a fraction",
]
CONNECTORS = ["so", "because", "and", "but", "then", "therefore", "first", "next", "finally", "also"]
PLAN_STEPS = [
    "The user asks about", "I need to", "Let me check", "I should call", "The tool returned",
    "Plan:", "Step one:", "Answer with", "Use the values from", "Copy the city name from",
    "Read the numbers in", "Count the images in", "Describe what I received in",
]
QUESTIONS = [
    "What is the weather in {city}?", "How warm is it in {city} today?",
    "Is it raining in {city} right now?", "What time is it in {zone}?",
    "Convert {n} {unit_a} to {unit_b}.", "What is {n}% of {m}?", "Compute {n} * {m} + {k}.",
    "What is {n} divided by {m}?", "How many {unit_b} are in {n} {unit_a}?",
    "What do you see in this image?", "What is in these pictures?", "Transcribe this audio.",
    "What happens in this video?", "Describe the clip.", "Hello! Who are you?",
    "Can you help me plan a trip to {city}?", "Tell me a short fact about {city}.",
    "Summarize the conversation so far.", "Thanks, that helps.",
]
ANSWERS = [
    "The weather in {city} is {weather} with {t} degrees.",
    "It is {t} degrees and {weather} in {city}.",
    "The local time in {zone} is {hh}:{mm}.",
    "{n} {unit_a} is about {r} {unit_b}.", "{n}% of {m} is {r}.", "The result is {r}.",
    "I received one image.", "I received two images.", "I received three images.",
    "I received an audio clip.", "I received a video.", "I received an image and an audio clip.",
    "I am a small demo model trained on synthetic data.", "Hello! I can chat, think and call tools.",
    "Sure. Here is a short answer.", "You are welcome.",
]
CITIES = [
    "Tokyo", "Paris", "London", "Seoul", "Lagos", "Lima", "Oslo", "Cairo", "Delhi", "Sydney",
    "Berlin", "Madrid", "Nairobi", "Toronto", "Quito", "Hanoi", "Dakar", "Vienna", "Rome", "Austin",
]
ZONES = [
    "Europe/Paris", "Asia/Tokyo", "America/New_York", "Africa/Lagos", "Australia/Sydney", "UTC",
    "America/Los_Angeles", "Asia/Kolkata", "Europe/London", "America/Sao_Paulo",
]
UNITS = [
    ("kilometers", "miles"), ("miles", "kilometers"), ("celsius", "fahrenheit"), ("fahrenheit", "celsius"),
    ("kilograms", "pounds"), ("pounds", "kilograms"), ("meters", "feet"), ("feet", "meters"),
    ("liters", "gallons"), ("hours", "minutes"),
]
WEATHER = ["sunny", "cloudy", "rainy", "windy", "foggy", "snowy", "clear", "stormy"]
SCHEMA_WORDS = [
    "description", "parameters", "properties", "required", "type", "enum", "items", "nullable",
    "response", "declaration", "call", "value", "error", "location", "unit", "expression", "timezone",
    "get_current_weather", "calculator", "convert_units", "current_time", "STRING", "NUMBER", "INTEGER",
    "BOOLEAN", "ARRAY", "OBJECT", "true", "false", "null",
]


def _number(rng: random.Random) -> str:
    return str(rng.choice([rng.randint(0, 100), rng.randint(100, 9999), round(rng.uniform(0, 500), 1)]))


def _sentence(rng: random.Random) -> str:
    kind = rng.randrange(6)
    units = rng.choice(UNITS)
    slots = {
        "city": rng.choice(CITIES), "zone": rng.choice(ZONES), "n": _number(rng), "m": _number(rng),
        "k": _number(rng), "r": _number(rng), "t": rng.randint(-20, 40), "weather": rng.choice(WEATHER),
        "unit_a": units[0], "unit_b": units[1], "hh": f"{rng.randint(0, 23):02d}", "mm": f"{rng.randint(0, 59):02d}",
    }
    if kind == 0:
        return rng.choice(QUESTIONS).format(**slots)
    if kind == 1:
        return rng.choice(ANSWERS).format(**slots)
    if kind == 2:
        return f"{rng.choice(PLAN_STEPS)} {rng.choice(SUBJECTS)}, {rng.choice(CONNECTORS)} {rng.choice(OBJECTS)}."
    if kind == 3:
        return f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
    if kind == 4:
        words = rng.sample(SCHEMA_WORDS, 4)
        return f"{words[0]}:{words[1]},{words[2]}:{words[3]}"
    return (
        f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"{rng.choice(CONNECTORS)} {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
    )


def _names(rng: random.Random) -> str:
    """Made-up names, as the training's arguments are made of, so that syllables such as
    "dou" or "ga" become pieces and a name costs a few tokens rather than one per letter."""
    from scripts.synthetic_data import city_name, person_name

    return " ".join(rng.choice((city_name, person_name))(rng) for _ in range(rng.randint(1, 4)))


def corpus(seed: int = 0, lines: int = 20000, name_lines: int = 8000) -> list[str]:
    """Deterministic lines of text: the same seed always gives the same corpus."""
    rng = random.Random(seed)
    text = [" ".join(_sentence(rng) for _ in range(rng.randint(1, 3))) for _ in range(lines)]
    return text + [_names(rng) for _ in range(name_lines)]
