"""A long view as a list of pieces, each exactly one HTML element, so that the page can patch it
from its first changed piece on (web/tail_patched_html.py). The inspector's views are built as
pieces; the web layer sends and patches them."""

from __future__ import annotations

# An empty HTML comment: escaped text cannot contain it ("<" is escaped), and the joined
# value still reads as the whole view.
SEPARATOR = "<!---->"


def joined(pieces: list[str]) -> str:
    return SEPARATOR.join(pieces)
