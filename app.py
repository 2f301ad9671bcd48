"""Gemma 4 UI: chat with, demo and understand Google's Gemma 4 models.

    python app.py [--model ID|PATH|tiny] [--assistant ID|PATH] [--device auto|cpu|cuda] [--dtype ...] [--port 7860]

`python app.py --help` lists every option and its environment variable. On a Hugging Face
Space this file runs with no arguments; the Space's variables configure it.
"""

from __future__ import annotations

import logging
import sys

try:  # On ZeroGPU Spaces `spaces` must be imported before anything initialises CUDA.
    import spaces  # noqa: F401
except ImportError:
    pass


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from gemma4_ui.config import parse_settings, second_model_settings
    from gemma4_ui.engines.base import ModelLoadError, build_engine

    settings = parse_settings(argv)
    second_settings = second_model_settings(settings)
    try:
        engine = build_engine(settings).load()
        second = build_engine(second_settings).load() if second_settings else None
    except ModelLoadError as err:
        logging.error("%s", err)
        return 1

    from gemma4_ui.web.app import build_ui, enable_queue, page_options
    from gemma4_ui.web.workarounds import log_workarounds

    log_workarounds()
    from gemma4_ui.web.handlers.shared import SharedChatHandlers

    demo = enable_queue(build_ui(SharedChatHandlers(engine, settings, second=second)), settings.gpu_concurrency)
    # Quiet: Gradio's own banner tells to "set `share=True` in `launch()`"; this app's way is --share.
    demo.launch(
        server_name=settings.host,
        server_port=settings.port,
        share=settings.share,
        max_file_size=int(settings.limits.max_file_mb * 1024 * 1024),
        **page_options(),
        footer_links=["api", "gradio"],
        quiet=True,
        prevent_thread_lock=True,
    )
    if demo.share_url:
        logging.info("running at %s, and publicly at %s", demo.local_url, demo.share_url)
    else:
        logging.info("running at %s (--share for a public link)", demo.local_url)
    demo.block_thread()
    return 0


if __name__ == "__main__":
    sys.exit(main())
