"""What differs between the members of the Gemma 4 family, in one place.

E2B and E4B hear and see through encoders (a vision tower, a conformer over mel frames);
26B-A4B and 31B see but do not hear; 12B "Unified" has no encoders at all: pixels go through
a linear patch embedding and raw 16 kHz audio through 40 ms waveform frames (one soft token
each, so 30 s is 750 tokens), with its own processor (`Gemma4UnifiedProcessor`).
"""

from __future__ import annotations

# The Unified model hears audio less well once the clip sits past about this absolute token
# position (its model card: ~450–500), so its audio goes first in a message and the inspector
# warns about a clip that starts later (a later turn, a long system prompt, many images).
UNIFIED_AUDIO_POSITION_LIMIT = 450


def modalities(config) -> frozenset[str]:
    """What the checkpoint takes in: images and video through its vision part, audio through
    its audio part; a model without one (26B-A4B and 31B have no audio) refuses that input."""
    kinds = {"text"}
    if getattr(config, "vision_config", None) is not None:
        kinds |= {"image", "video"}
    if getattr(config, "audio_config", None) is not None:
        kinds.add("audio")
    return frozenset(kinds)


def is_unified(processor) -> bool:
    return type(processor).__name__.startswith("Gemma4Unified")


def audio_first(processor) -> bool:
    """Whether a message's audio goes before its images and text (the Unified model's
    placement) rather than after the text (E2B/E4B's guidance)."""
    return is_unified(processor)


def late_audio_warning(processor, start: int) -> str | None:
    if is_unified(processor) and start > UNIFIED_AUDIO_POSITION_LIMIT:
        return (f"starts at token {start:,}: Gemma 4 Unified hears audio past ~{UNIFIED_AUDIO_POSITION_LIMIT} "
                "tokens less well; send it in the first message, with a short system prompt")
    return None
