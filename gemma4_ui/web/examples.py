"""The examples: one per capability, with the media shipped in assets/examples/, in the
gallery beside the chat and inside the empty chat; and an example of a declared tool."""

from __future__ import annotations

import json

from gemma4_ui.config import EXAMPLES_DIR


def examples(default_tools: list[str]) -> tuple[list[list], list[str]]:
    """One example per capability, with the media shipped in assets/examples/: rows of
    (composer, thinking, enabled tools), and their labels. An example turns on the tools it
    needs beside the session's default ones (the demo model starts with its tools on)."""
    def files(*names: str) -> list[str]:
        return [str(EXAMPLES_DIR / n) for n in names]

    rows = [
        ("🖼️ Image question", {"text": "What do you see in this image?", "files": files("shapes.png")}, False, []),
        ("🖼️🖼️ Two images", {"text": "How many images did I send?", "files": files("shapes.png", "street.jpg")},
         False, []),
        ("🔊 Audio transcription", {"text": "Transcribe this audio.", "files": files("speech.wav")}, False, []),
        ("🎞️ Video question", {"text": "What happens in this video?", "files": files("bouncing_ball.mp4")},
         False, []),
        ("💭 Thinking", {"text": "Plan a day trip to Lisbon in three steps.", "files": []}, True, []),
        ("🛠️ Tool call", {"text": "What's the weather in Ouagadougou?", "files": []}, True,
         ["get_current_weather"]),
        ("🧮 Calculator", {"text": "What's 17.5% of 2,340?", "files": []}, False, ["calculator"]),
    ]
    rows = [(label, message, thinking, [*default_tools, *(t for t in tools if t not in default_tools)])
            for label, message, thinking, tools in rows]
    return [list(row[1:]) for row in rows], [row[0] for row in rows]


def chat_examples(default_tools: list[str]) -> list[dict]:
    """The same examples inside the empty chat, where a phone's first screen shows them:
    one tap fills the composer (and the example's settings) as the gallery does."""
    rows, labels = examples(default_tools)
    return [{"text": message["text"], "display_text": label} for (message, _, _), label in zip(rows, labels)]


# What a declared tool looks like: the model calls it, the user types its result.
EXAMPLE_SCHEMA = json.dumps({
    "name": "lookup_order",
    "description": "Finds an order by its number and tells its status.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "integer", "description": "The order number"}},
                   "required": ["order_id"]},
}, indent=2)
