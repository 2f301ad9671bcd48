"""python -m bench [--quick] [--runs N] [--only NAME ...]: run the benchmarks, print one table.

Exit status 0 when every figure with a target passes, 1 otherwise (2: a benchmark errored).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from . import (  # noqa: E402
    browser,
    hostile_load,
    inspector_refresh,
    long_chat,
    media_prep,
    memory,
    relay,
    streaming,
    token_probabilities,
)
from .context import Context  # noqa: E402
from .harness import Section, table  # noqa: E402

BENCHMARKS = {
    "streaming": streaming.streaming_overhead,
    "ttft": streaming.time_to_first_token,
    "media": media_prep.media_preparation,
    "inspector": inspector_refresh.inspector_refresh,
    "memory": memory.memory_growth,
    "browser": browser.browser_streaming,
    "probabilities": token_probabilities.token_probability_cost,
    "long-chat": long_chat.long_chat_streaming,
    "relay": relay.relay_cpu,
    "hostile-load": hostile_load.hostile_load,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small inputs and 2 runs: checks the harness, not the targets")
    parser.add_argument("--runs", type=int, help="runs per figure (default 5, or 2 with --quick)")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME",
                        help=f"run only these: {', '.join(BENCHMARKS)}")
    parser.add_argument("--workdir", type=Path, help="where generated media and server logs go (default: a temp dir)")
    return parser.parse_args(argv)


def run(names: list[str], ctx: Context) -> list[Section]:
    sections = []
    for name in names:
        started = time.perf_counter()
        print(f"[bench] {name}…", file=sys.stderr, flush=True)
        try:
            sections.append(BENCHMARKS[name](ctx))
        except Exception as err:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            sections.append(Section(name, error=f"{type(err).__name__}: {err}"))
        print(f"[bench] {name} took {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return sections


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    runs = args.runs or (2 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="gemma4-bench-") as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        ctx = Context(runs=runs, quick=args.quick, workdir=workdir)
        try:
            sections = run(args.only or list(BENCHMARKS), ctx)
        finally:
            ctx.close()
    print(table(sections))
    if any(section.error for section in sections):
        return 2
    return 1 if any(f.verdict == "FAIL" for s in sections for f in s.figures) else 0


if __name__ == "__main__":
    sys.exit(main())
