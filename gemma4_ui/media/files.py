"""Media files that live exactly as long as something shows them.

Gradio deletes its uploads on its own schedule, and a conversation can outlive it (and an
imported one has no upload at all). So every medium a conversation holds owns a file of its
own, in a folder of its own (two media may share a name): a hard link to the upload (no
copy, when the filesystem allows) or the bytes of an imported file. The folder is deleted
when the last conversation or draft holding the medium lets it go.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from dataclasses import replace
from pathlib import Path

from gemma4_ui.config import MediaLimits
from gemma4_ui.media.decoding import MediaItem, load_media

_PREFIX = "gemma4_media_"


def _safe_name(name: str) -> str:
    """A file name that cannot leave its folder or confuse a shell; the extension is kept."""
    return re.sub(r"[^\w.\-]", "_", os.path.basename(name or ""))[-80:].lstrip(".") or "file"


def _owned(item: MediaItem, folder: str, name: str) -> MediaItem:
    item = replace(item, name=name)
    weakref.finalize(item, shutil.rmtree, folder, ignore_errors=True)
    return item


def load_upload(path: str, limits: MediaLimits) -> MediaItem:
    """Decode an upload from a file of its own, so that it outlives Gradio's copy."""
    folder = tempfile.mkdtemp(prefix=_PREFIX)
    own = os.path.join(folder, _safe_name(path))
    try:
        try:
            os.link(path, own)
        except OSError:  # another filesystem, or links not allowed
            shutil.copyfile(path, own)
        item = load_media(own, limits)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _owned(item, folder, Path(path).name)


def load_bytes(payload: bytes, name: str, limits: MediaLimits) -> MediaItem:
    """Decode media carried in a file (an imported conversation) under its original name."""
    folder = tempfile.mkdtemp(prefix=_PREFIX)
    own = os.path.join(folder, _safe_name(name))
    try:
        Path(own).write_bytes(payload)
        item = load_media(own, limits)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _owned(item, folder, name or "file")
