"""Settings: command-line flags, each with an environment variable (a Space's settings page
sets variables, a laptop passes flags). Flags win over variables; variables over defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_MODEL = ROOT / "assets" / "tiny-gemma4"
EXAMPLES_DIR = ROOT / "assets" / "examples"
DEFAULT_MODEL = "google/gemma-4-E2B-it"
IMAGE_BUDGETS = (70, 140, 280, 560, 1120)
# scripts/train_tiny_gemma4.py writes training.json next to the weights it trains.
BUNDLED_TRAINED = (BUNDLED_MODEL / "training.json").exists()
# --assistant values that are not a model: the default, and off.
ASSISTANT_AUTO, ASSISTANT_OFF = "auto", "none"
# --backend names; engines.base.ENGINES maps each to its class.
BACKENDS = ("local", "openai")
# The default --max-prompt-tokens on the CPU: the bundled model's prompt pass of this many
# tokens stays well under a minute on a small CPU machine (README.md, "### Limits").
CPU_MAX_PROMPT_TOKENS = 8192


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def _env_typed(parser: argparse.ArgumentParser, name: str, flag: str, kind: type, default):
    """The variable's value as `kind`; a value that is not one stops the app with argparse's
    usage and a message naming the variable (a Space's settings page has no traceback view)."""
    value = _env(name)
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError:
        parser.error(f"environment variable {name}={value!r} is not a valid {_KIND_NAMES.get(kind, kind.__name__)} "
                     f"(it sets {flag})")


_KIND_NAMES = {int: "whole number", float: "number", str: "text"}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _env_bool(parser: argparse.ArgumentParser, name: str, default: bool) -> bool:
    value = _env(name)
    if value is None:
        return default
    if value.strip().lower() not in _TRUE + _FALSE:
        parser.error(f"environment variable {name}={value!r} must be one of {', '.join(_TRUE + _FALSE)}")
    return value.strip().lower() in _TRUE


@dataclass(frozen=True)
class MediaLimits:
    max_file_mb: float = 50.0
    max_files_per_message: int = 8
    max_audio_seconds: float = 30.0  # Gemma 4 audio cap: 750 tokens x 40 ms
    audio_over_limit: str = "truncate"  # "truncate" (keep the first max_audio_seconds) or "refuse"
    max_video_seconds: float = 120.0
    max_video_frames: int = 32  # sampled evenly over the whole video
    max_image_pixels: int = 50_000_000  # decompression-bomb guard
    # What decoded media may hold in memory: a small compressed file can decode to hundreds
    # of times its size, a short 8K clip to gigabytes.
    max_video_frame_pixels: int = 3840 * 2160  # 4K UHD
    # A live recording states no frame count: at most this many are read to count them
    # (120 s at 60 fps), whatever frame rate it claims.
    max_stream_frames: int = 7_200
    max_files_per_conversation: int = 32
    max_conversation_media_mb: float = 1024.0  # decoded size of all of a conversation's media

    def __post_init__(self) -> None:
        assert self.audio_over_limit in ("truncate", "refuse"), "audio_over_limit is 'truncate' or 'refuse'"


@dataclass
class Settings:
    model: str | None = None  # None: DEFAULT_MODEL locally, the server's model remotely
    backend: str = "local"  # a name in BACKENDS
    base_url: str | None = None
    api_key: str | None = None
    # A second model Compare's side B can answer with: a Hub id, a local path, "tiny", or the
    # URL of an OpenAI-compatible server.
    compare_model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    assistant: str = ASSISTANT_AUTO  # an MTP drafter: Hub id, local path, "auto" or "none"
    host: str | None = None  # None: Gradio's default (127.0.0.1, or GRADIO_SERVER_NAME on a Space)
    port: int | None = None  # None: 7860, or GRADIO_SERVER_PORT
    share: bool = False
    system_prompt: str = ""
    thinking: bool = False
    max_new_tokens: int = 1024
    max_new_tokens_cap: int = 8192
    temperature: float = 1.0  # 0 means greedy decoding
    top_p: float = 0.95
    top_k: int = 64
    image_budget: int = 280  # soft tokens per image, one of IMAGE_BUDGETS
    tool_timeout: float = 10.0
    max_tool_rounds: int = 5
    # The tools a session starts with on; None: none (the bundled demo model: its built-in ones).
    enabled_tools: list[str] | None = None
    # A reply whose end is one piece of text written this many times over is stopped; 0: never.
    repetition_guard: int = 4
    # The sampling seed of each reply (a reply sampled again with it is the same, one reply
    # generating at a time); -1: a fresh one each time.
    seed: int = -1
    gpu_concurrency: int = 1
    # The longest prompt (the whole conversation, in tokens) one request may send the local
    # model, refused before its prompt pass; None: by the device (engines/local/engine.py,
    # `prompt_limit`), 0: the model's context.
    max_prompt_tokens: int | None = None
    request_timeout: float = 120.0
    # Generate in a child process that holds the model (local backend): the model's loop then
    # never waits for the server's Python work (not on ZeroGPU, whose `spaces` forks its own).
    # Measured side by side (bench/README.md, "Whole request"), the bundled model streams
    # through the app at 0.98 of its own speed from a process of its own, and at 0.95
    # (0.85-1.03 over 10 runs) from the server's.
    generation_process: bool = True
    limits: MediaLimits = field(default_factory=MediaLimits)


# (flag, env var, Settings field, type, help)
_OPTIONS = [
    ("--model", "GEMMA4_MODEL", "model", str,
     f"Hub id, local path, or 'tiny' for the bundled demo model (default {DEFAULT_MODEL}; with no Hub access "
     "and no local copy the app falls back to the bundled model and says so)"),
    ("--backend", "GEMMA4_BACKEND", "backend", str,
     "'local' runs the model in this process; 'openai' talks to a server (vLLM, SGLang, transformers serve)"),
    ("--assistant", "GEMMA4_ASSISTANT", "assistant", str,
     "MTP drafter for speculative decoding (local backend): a Hub id such as google/gemma-4-E2B-it-assistant, "
     "a local path, 'none', or 'auto' (the default: the model's own drafter when running a Hub checkpoint on "
     "CUDA and the drafter is cached or reachable; never on the CPU)"),
    ("--base-url", "GEMMA4_BASE_URL", "base_url", str, "OpenAI-compatible server URL, e.g. http://127.0.0.1:8000/v1"),
    ("--api-key", "GEMMA4_API_KEY", "api_key", str, "API key for the server (also read from OPENAI_API_KEY)"),
    ("--compare-model", "GEMMA4_COMPARE_MODEL", "compare_model", str,
     "a second model that Compare's side B can answer with: a Hub id, a local path, 'tiny', or the URL of an "
     "OpenAI-compatible server (http://host:port/v1, the server's own model, with --api-key)"),
    ("--device", "GEMMA4_DEVICE", "device", str, "auto (CUDA with bfloat16 when present), cpu or cuda"),
    ("--dtype", "GEMMA4_DTYPE", "dtype", str, "auto, bfloat16, float16 or float32"),
    ("--host", "GEMMA4_HOST", "host", str, "address to listen on (0.0.0.0 to serve a network)"),
    ("--port", "GEMMA4_PORT", "port", int, "port to listen on"),
    ("--system-prompt", "GEMMA4_SYSTEM_PROMPT", "system_prompt", str, "default system prompt"),
    ("--max-new-tokens", "GEMMA4_MAX_NEW_TOKENS", "max_new_tokens", int, "default reply length limit"),
    ("--max-new-tokens-cap", "GEMMA4_MAX_NEW_TOKENS_CAP", "max_new_tokens_cap", int,
     "the most a user may ask for in the settings"),
    ("--temperature", "GEMMA4_TEMPERATURE", "temperature", float, "default sampling temperature (0 = greedy)"),
    ("--top-p", "GEMMA4_TOP_P", "top_p", float, "default top-p"),
    ("--top-k", "GEMMA4_TOP_K", "top_k", int, "default top-k"),
    ("--image-budget", "GEMMA4_IMAGE_BUDGET", "image_budget", int,
     f"default soft tokens per image, one of {', '.join(map(str, IMAGE_BUDGETS))}"),
    ("--tool-timeout", "GEMMA4_TOOL_TIMEOUT", "tool_timeout", float, "seconds a tool may run"),
    ("--max-tool-rounds", "GEMMA4_MAX_TOOL_ROUNDS", "max_tool_rounds", int, "default limit on tool rounds per reply"),
    ("--tools", "GEMMA4_TOOLS", "enabled_tools", lambda text: [n.strip() for n in text.split(",") if n.strip()],
     "tools on when a session starts, comma-separated names (default: none; the bundled demo model: its built-in "
     "tools)"),
    ("--repetition-guard", "GEMMA4_REPETITION_GUARD", "repetition_guard", int,
     "stop a reply once its end repeats one piece of text this many times (0 = never)"),
    ("--seed", "GEMMA4_SEED", "seed", int, "sampling seed of each reply (-1 = a fresh one each time)"),
    ("--gpu-concurrency", "GEMMA4_GPU_CONCURRENCY", "gpu_concurrency", int,
     "generations running at once; others wait in the queue"),
    ("--max-prompt-tokens", "GEMMA4_MAX_PROMPT_TOKENS", "max_prompt_tokens", int,
     "local backend: the longest prompt one request may send, in tokens (the whole conversation), refused up front "
     "so that no request holds the model for long (0 = the model's context; default: "
     f"{CPU_MAX_PROMPT_TOKENS} on the CPU, the context on a GPU)"),
    ("--request-timeout", "GEMMA4_REQUEST_TIMEOUT", "request_timeout", float, "seconds to wait on a remote server"),
]
_LIMIT_OPTIONS = [
    ("--max-file-mb", "GEMMA4_MAX_FILE_MB", "max_file_mb", float, "largest upload accepted, in MB"),
    ("--max-files", "GEMMA4_MAX_FILES", "max_files_per_message", int, "files per message"),
    ("--max-audio-seconds", "GEMMA4_MAX_AUDIO_SECONDS", "max_audio_seconds", float,
     "longest audio accepted (Gemma 4 hears at most 30 s)"),
    ("--max-video-seconds", "GEMMA4_MAX_VIDEO_SECONDS", "max_video_seconds", float, "longest video accepted"),
    ("--max-video-frames", "GEMMA4_MAX_VIDEO_FRAMES", "max_video_frames", int, "frames sampled from a video"),
]


# Values that parse but cannot work: (field, lowest, highest), None for no bound.
_RANGES = [("port", 1, 65535), ("max_new_tokens", 1, None), ("max_new_tokens_cap", 1, None), ("tool_timeout", 0.1, None),
           ("max_tool_rounds", 1, None), ("repetition_guard", 0, None), ("seed", -1, None), ("gpu_concurrency", 1, None),
           ("max_prompt_tokens", 0, None), ("request_timeout", 0.1, None),
           ("max_file_mb", 0.001, None), ("max_files_per_message", 1, None), ("max_audio_seconds", 0.1, None),
           ("max_video_seconds", 0.1, None), ("max_video_frames", 1, None)]


def _check_ranges(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    flags = {name: (flag, env) for flag, env, name, _, _ in _OPTIONS + _LIMIT_OPTIONS}
    for name, low, high in _RANGES:
        value = getattr(args, name)
        if value is None or (value >= low and (high is None or value <= high)):
            continue
        flag, env = flags[name]
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        parser.error(f"{flag} [{env}] must be {bound}, not {value}")


def parse_settings(argv: list[str] | None = None) -> Settings:
    defaults = Settings()
    parser = argparse.ArgumentParser(
        prog="python app.py",
        description="Chat with, demo and understand Gemma 4. Every option can also be set by the "
        "environment variable shown in brackets.",
    )
    choices = {"backend": sorted(BACKENDS)}
    for flag, env, name, kind, help_text in _OPTIONS:
        parser.add_argument(flag, dest=name, type=kind, default=_env_typed(parser, env, flag, kind, getattr(defaults, name)),
                            choices=choices.get(name), help=f"{help_text} [{env}]")
    for flag, env, name, kind, help_text in _LIMIT_OPTIONS:
        parser.add_argument(flag, dest=name, type=kind,
                            default=_env_typed(parser, env, flag, kind, getattr(defaults.limits, name)),
                            help=f"{help_text} [{env}]")
    parser.add_argument("--share", action="store_true", default=_env_bool(parser, "GEMMA4_SHARE", False),
                        help="create a public gradio.live link [GEMMA4_SHARE]")
    thinking = parser.add_mutually_exclusive_group()
    thinking.add_argument("--thinking", dest="thinking", action="store_true", default=_env_bool(parser, "GEMMA4_THINKING", False),
                          help="thinking on by default [GEMMA4_THINKING]")
    thinking.add_argument("--no-thinking", dest="thinking", action="store_false")
    process = parser.add_mutually_exclusive_group()
    process.add_argument("--generation-process", dest="generation_process", action="store_true",
                         default=_env_bool(parser, "GEMMA4_GENERATION_PROCESS", defaults.generation_process),
                         help="local backend: generate in a child process that holds the model, so that the "
                         "web server's work never slows the model down (the default; not on ZeroGPU, which "
                         "runs each generation in a process of its own) [GEMMA4_GENERATION_PROCESS]")
    process.add_argument("--no-generation-process", dest="generation_process", action="store_false",
                         help="generate in a thread of the server's process (one process, less memory)")
    args = parser.parse_args(argv)

    _check_ranges(parser, args)
    limit_names = {name for _, _, name, _, _ in _LIMIT_OPTIONS}
    values = {k: v for k, v in vars(args).items() if k not in limit_names}
    limits = MediaLimits(**{k: v for k, v in vars(args).items() if k in limit_names})
    settings = Settings(**values, limits=limits)
    settings.api_key = settings.api_key or _env("OPENAI_API_KEY")
    settings.base_url = settings.base_url or _env("OPENAI_BASE_URL")
    if settings.backend not in BACKENDS:  # argparse checks flags, not the variable's value
        parser.error(f"GEMMA4_BACKEND must be one of {', '.join(sorted(BACKENDS))}, not {settings.backend!r}")
    if settings.backend == "openai" and not settings.base_url:
        parser.error("--backend openai needs --base-url (or GEMMA4_BASE_URL)")
    if settings.backend != "local" and settings.assistant not in (ASSISTANT_AUTO, ASSISTANT_OFF):
        parser.error("--assistant drafts for the local backend; a server configures its own speculative decoding")
    if settings.backend != "local" and settings.max_prompt_tokens:
        parser.error("--max-prompt-tokens limits the local backend's prompts; a server sets its own (vLLM's "
                     "--max-model-len, for one)")
    if settings.device not in ("auto", "cpu", "cuda") and not settings.device.startswith("cuda:"):
        parser.error("--device must be auto, cpu or cuda")
    if settings.image_budget not in IMAGE_BUDGETS:
        parser.error(f"--image-budget must be one of {', '.join(map(str, IMAGE_BUDGETS))}")
    settings.max_new_tokens = min(settings.max_new_tokens, settings.max_new_tokens_cap)
    if _env("SPACES_ZERO_GPU"):  # `spaces` runs each generation in a forked process already
        settings.generation_process = False
    return settings


def second_model_settings(settings: Settings) -> Settings | None:
    """The settings of --compare-model's engine (None without one): the same generation
    settings, on a local checkpoint or an OpenAI-compatible server (a URL)."""
    spec = (settings.compare_model or "").strip()
    if not spec:
        return None
    if spec.startswith(("http://", "https://")):
        return replace(settings, backend="openai", base_url=spec, model=None, assistant=ASSISTANT_AUTO,
                       compare_model=None)
    return replace(settings, backend="local", model=spec, base_url=None, assistant=ASSISTANT_AUTO, compare_model=None)
