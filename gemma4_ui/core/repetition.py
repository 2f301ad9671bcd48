"""The repetition guard: stops a reply that keeps writing the same text over and over.

Small models (and large ones, under greedy decoding) can fall into a loop: "callcallcall…",
"many many many…", the same sentence again and again, until the token limit. The guard
watches the raw output as it streams, whatever the engine, and trips when its end is one
piece of text repeated: a period of `p` characters repeated `repeats` times, and at least
`MIN_CHARACTERS` in all, so that a markdown rule or a short run of dots never trips it.

Cheap by construction: it keeps only the last few thousand characters, checks at most once
every `CHECK_EVERY` new characters, and each check is a few hundred string comparisons done
in C (`tail[-n:] == tail[-n - p:-p]`), so it costs nothing next to a token's decode.
"""

from __future__ import annotations

DEFAULT_REPEATS = 4  # a piece written this many times over in a row ends the reply; 0 turns the guard off
MIN_CHARACTERS = 160  # the repeated stretch is at least this long, however short the piece
MAX_PERIOD = 400  # the longest piece looked for (a few sentences)
CHECK_EVERY = 24  # characters between two checks
KEY_CHARACTERS = 12  # the end that must occur again before a period is tried


class RepetitionGuard:
    """Feed it the raw output as it arrives; `feed` returns True once the output loops."""

    def __init__(self, repeats: int = DEFAULT_REPEATS):
        self.repeats = max(0, int(repeats))
        self.tail = ""
        self.unchecked = 0
        self.period: int | None = None  # the repeating piece's length, once tripped

    @property
    def enabled(self) -> bool:
        return self.repeats >= 2

    def feed(self, text: str) -> bool:
        if not self.enabled or self.period is not None:
            return self.period is not None
        self.tail = (self.tail + text)[-(self.repeats + 1) * MAX_PERIOD - MIN_CHARACTERS:]
        self.unchecked += len(text)
        if self.unchecked < CHECK_EVERY:
            return False
        self.unchecked = 0
        self.period = repeating_period(self.tail, self.repeats)
        return self.period is not None


def repeating_period(text: str, repeats: int, min_characters: int = MIN_CHARACTERS) -> int | None:
    """The shortest p such that `text` ends with a stretch of period p, `repeats` pieces and
    `min_characters` long at least; None when there is none. Only the places where the last
    few characters occur again are tried (found by `str.rfind`, in C)."""
    key = text[-KEY_CHARACTERS:]
    if len(text) < min_characters or not key:
        return None
    found = text.rfind(key, 0, len(text) - 1)
    while found != -1:
        period = len(text) - len(key) - found
        if period > MAX_PERIOD:
            return None
        span = max(min_characters, repeats * period) - period
        if span + period > len(text):
            return None
        if text[-span:] == text[-span - period:-period]:
            return period
        found = text.rfind(key, 0, found + len(key) - 1)
    return None


def trimmed(text: str, period: int, keep: int = 2) -> str:
    """`text` with its repeating end cut to `keep` pieces and an ellipsis, so that a loop shows
    as a line, not a wall (the raw output keeps it all)."""
    if period <= 0 or len(text) <= keep * period:
        return text
    start = len(text) - period
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return text[:start + keep * period].rstrip() + "…"


def trimmed_loop(text: str) -> str:
    """`text` with a loop at its end (three pieces or more) cut short; as it was otherwise."""
    period = repeating_period(text.rstrip(), 3, min_characters=KEY_CHARACTERS * 2)
    return trimmed(text.rstrip(), period) if period else text
