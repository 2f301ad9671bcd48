"""What a newcomer meets first: messages typed the usual way and in fresh wording, sent through
the app's own handlers at the demo model's defaults (the built-in tools on), greedy, and scored.

    python scripts/first_contact.py out/stage19                 # a model folder (a stage's --out)
    python scripts/first_contact.py out/stage19-checkpoint.pt   # a training checkpoint, mid-run

`--eval` of the training script measures the generator's held-out phrasing families; this measures
the other side of the trade that stages 15 to 18 ran into (checkpoints/README.md): the questions
people type first. It takes a few minutes, so a stage can be judged on both from its first
checkpoints rather than at its end. A message counts as right when the reply ends by itself, with
no notice, and either calls the one tool it needs with the argument exactly as written (for units,
both units) or, where no tool is needed, calls none.

The `fresh` set was written before any stage was measured on it; its names and wording are in
no frame of the data generator. Once a stage is tuned against it, it is no longer fresh: keep it
as it is and write a new one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

W, C, U, T = "get_current_weather", "calculator", "convert_units", "current_time"

# (message, the tool it needs or None, the argument as written: a string, or units' (from, to)).
USUAL = [
    ("What's the weather in Paris?", W, "Paris"), ("What is the weather in Tokyo?", W, "Tokyo"),
    ("Weather in Berlin", W, "Berlin"), ("What's 2+2?", C, "2+2"), ("What is 2 + 2?", C, "2 + 2"),
    ("What is 7 times 8?", C, "7 times 8"), ("Calculate 15 * 4", C, "15 * 4"),
    ("What is 100 divided by 4?", C, "100 divided by 4"), ("Convert 5 km to miles", U, ("km", "miles")),
    ("How many pounds is 10 kg?", U, ("kg", "pounds")), ("What time is it in London?", T, "London"),
    ("What's the time in Asia/Tokyo?", T, "Asia/Tokyo"), ("Hello", None, None), ("Hi!", None, None),
    ("Thanks!", None, None), ("Who are you?", None, None), ("What can you do?", None, None),
    ("Tell me a joke", None, None), ("What is 3 squared?", C, "3 squared"), ("What's 10% of 50?", C, "10% of 50"),
]
FRESH = [
    ("Morning. Any rain expected in Bratislava?", W, "Bratislava"),
    ("how's the weather looking in Saint-Étienne", W, "Saint-Étienne"),
    ("Need the weather for Punta Arenas, thanks a lot", W, "Punta Arenas"),
    ("Is it freezing in Novosibirsk?", W, "Novosibirsk"),
    ("what's it doing outside in Glasgow at the minute?", W, "Glasgow"),
    ("Quick one - weather in Hobart?", W, "Hobart"),
    ("Can I go for a run in Medellín or is it pouring?", W, "Medellín"),
    ("Temperature in Ushuaia right this second please", W, "Ushuaia"),
    ("Tell me what the weather's doing in Kota Kinabalu.", W, "Kota Kinabalu"),
    ("Hey! Sunny in Marrakesh today?", W, "Marrakesh"),
    ("what is 48 times 12", C, "48 times 12"), ("Could you do 1,250 divided by 5 for me?", C, "1,250 divided by 5"),
    ("I'd love to know what 17 + 38 is", C, "17 + 38"), ("Work out 15% of 240 please.", C, "15% of 240"),
    ("Quick maths: 9 squared?", C, "9 squared"), ("multiply 23 by 7", C, "multiply 23 by 7"),
    ("What's 1000 minus 357?", C, "1000 minus 357"), ("square root of 144?", C, "square root of 144"),
    ("How many feet are in 3 meters?", U, ("meters", "feet")),
    ("Please turn 5 pounds into kilograms.", U, ("pounds", "kilograms")),
    ("What is 72 fahrenheit in celsius?", U, ("fahrenheit", "celsius")),
    ("convert 2 liters to cups", U, ("liters", "cups")), ("How many minutes is 4 hours?", U, ("hours", "minutes")),
    ("60 mph in km/h?", U, ("mph", "km/h")),
    ("What time is it in Lisbon?", T, "Lisbon"), ("Got the time in Europe/Warsaw?", T, "Europe/Warsaw"),
    ("What's the local time over in Seoul right now?", T, "Seoul"),
    ("time in America/Chicago please", T, "America/Chicago"), ("Is it night time in Auckland?", T, "Auckland"),
    ("What date is it in Asia/Dubai today?", T, "Asia/Dubai"),
    ("Hiya", None, None), ("Good morning!", None, None), ("Who made you?", None, None),
    ("What are you able to help with?", None, None), ("Cool, thanks.", None, None),
    ("Can you recommend a good book?", None, None), ("Write a limerick about a frog.", None, None),
    ("What is the capital of Peru?", None, None), ("Order me a pizza.", None, None), ("bye!", None, None),
]
SETS = {"usual": USUAL, "fresh": FRESH}


def model_folder(path: Path, scratch: Path) -> Path:
    """A model folder as is; a training checkpoint written out as one (the bundle's files beside it)."""
    if path.is_dir():
        return path
    import torch
    from transformers import AutoProcessor, Gemma4ForConditionalGeneration

    from scripts.build_tiny_gemma4 import DEFAULT_OUT, tiny_config
    from scripts.train_tiny_gemma4 import layer_count, save

    state = torch.load(path, weights_only=False, map_location="cpu")
    processor = AutoProcessor.from_pretrained(DEFAULT_OUT)
    model = Gemma4ForConditionalGeneration(tiny_config(processor.tokenizer, layer_count(state["model"])))
    model.load_state_dict(state["model"])
    save(model, processor, scratch, {"checkpoint": str(path), "step": state["step"]})
    return scratch


def is_right(data: dict, tool: str | None, argument) -> bool:
    calls = data["tool_calls"]
    ended = (data["stats"] or {}).get("stop_reason") == "stop" and not data["notices"] and bool(data["text"].strip())
    if not ended or (tool is None) != (not calls):
        return False
    if tool is None:
        return True
    if [c["name"] for c in calls] != [tool] or calls[0]["status"] != "ok":
        return False
    arguments = calls[0]["arguments"]
    if tool == U:
        return (arguments.get("from_unit"), arguments.get("to_unit")) == argument
    return list(arguments.values())[:1] == [argument]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="a model folder, or a training checkpoint (.pt)")
    parser.add_argument("--set", choices=[*SETS, "all"], default="all")
    args = parser.parse_args()

    from gemma4_ui.config import Settings
    from gemma4_ui.core.conversation import Conversation
    from gemma4_ui.engines.local.engine import LocalEngine
    from gemma4_ui.web.handlers.shared import SharedChatHandlers

    with tempfile.TemporaryDirectory(prefix="first_contact_") as scratch:
        engine = LocalEngine(str(model_folder(args.model, Path(scratch))), device="cpu").load()
        engine.status.source = "bundled"  # the demo model's defaults, whatever folder it came from
        handlers = SharedChatHandlers(engine, Settings(model="tiny"))
        totals = []
        for name in SETS if args.set == "all" else [args.set]:
            right = 0
            for text, tool, argument in SETS[name]:
                user, conversation = handlers.new_session(), Conversation()
                for data, _ in handlers.turns.reply({"text": text, "files": []}, conversation, user,
                                                    handlers.default_options()):
                    pass
                ok = is_right(data, tool, argument)
                right += ok
                calls = [(c["name"], c["arguments"]) for c in data["tool_calls"]]
                print(f"{'ok  ' if ok else 'MISS'} {name}: {text!r} -> {calls} {data['text'][:70]!r} "
                      f"{data['notices'][:1]}", flush=True)
            totals.append(f"{name} {right}/{len(SETS[name])}")
        print("right: " + ", ".join(totals))


if __name__ == "__main__":
    main()
