"""What a prompt costs in memory, before it is sent: the prompt pass in chunks, and a prompt
this machine cannot hold refused up front, in words.

On the CPU, transformers' SDPA attention gets an explicit mask (the sliding-window layers
need one): the prompt pass built masks of prompt × prompt elements, so its memory grew with
the square of the prompt, and a prompt well inside the context had the generation process
killed by the system. In chunks of PREFILL_CHUNK_TOKENS (transformers' own
`prefill_chunk_size`) the masks are chunk × prompt, linear in the prompt; the cache holds
what the chunks before computed. Raw media (pixels, waveforms) cannot be split across chunks
in transformers, so a prompt with media passes whole, and the estimate counts it so.
"""

from __future__ import annotations

# Tokens per chunk of the prompt pass: as fast as the whole pass on the CPU, with masks of
# chunk × prompt elements.
PREFILL_CHUNK_TOKENS = 4096
# Bytes per element of a chunk's attention working set (boolean mask, its float copy and
# the kernel's blocks), with a margin.
ATTENTION_BYTES_PER_ELEMENT = 12
# What the process needs beyond the estimate (allocator slack, the streamer, the parser).
HEADROOM_BYTES = 512 * 1024 * 1024
_MEDIA_INPUTS = ("pixel_values", "pixel_values_videos", "input_features", "input_values", "pixel_mask",
                 "input_features_mask")
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def prefill_chunk(prompt_tokens: int, input_names, drafting: bool) -> int | None:
    """The chunk size for the prompt pass, or None for one pass (short prompts; media, which
    transformers cannot split; an MTP drafter, whose assisted generate is left as it is)."""
    if prompt_tokens <= PREFILL_CHUNK_TOKENS or drafting or any(name in input_names for name in _MEDIA_INPUTS):
        return None
    return PREFILL_CHUNK_TOKENS


def prompt_memory_bytes(config, prompt_tokens: int, new_tokens: int, dtype: str, chunk: int | None) -> int:
    """About how much memory generating from a prompt of `prompt_tokens` needs beyond the
    weights, from the model's config: the cache of every layer that keeps one (a sliding
    layer keeps its window), the attention's working set of one chunk of the pass against
    the whole prompt, and one chunk's activations."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    width = _DTYPE_BYTES.get(str(dtype).removeprefix("torch."), 4)
    total = prompt_tokens + new_tokens
    step = min(chunk or prompt_tokens, prompt_tokens) or 1
    layers = text.num_hidden_layers
    types = getattr(text, "layer_types", None) or ["full_attention"] * layers
    sharing = getattr(text, "kv_sharing_modes", None) or [None] * layers
    window = getattr(text, "sliding_window", None) or total
    shapes = [_kv_shape(text, index) for index in range(layers)]
    cache = 0
    for index, (heads, head_dim) in enumerate(shapes):
        if sharing[index] == "reuse":
            continue
        kept = total if types[index] != "sliding_attention" or sharing[index] == "store" else min(total, window + step)
        cache += 2 * kept * heads * head_dim * width
    attention = step * prompt_tokens * ATTENTION_BYTES_PER_ELEMENT
    widest = max(head_dim for _, head_dim in shapes)
    activations = step * (6 * text.hidden_size + 3 * text.intermediate_size + text.num_attention_heads * widest) * 4
    return cache + attention + activations + HEADROOM_BYTES


def _kv_shape(text, index: int) -> tuple[int, int]:
    """(key-value heads, head dim) of one layer: Gemma 4's full-attention layers have their own."""
    per_layer = getattr(text, "per_layer_config", None)
    if per_layer is not None:
        layer = per_layer[index]
        return layer.num_key_value_heads, layer.head_dim
    return text.num_key_value_heads, text.head_dim


def largest_prompt(config, new_tokens: int, dtype: str, media: bool, available: int, context: int) -> int:
    """The longest prompt that fits in `available` bytes (at most the context)."""
    low, high = 0, max(context, 1)
    while low < high:
        middle = (low + high + 1) // 2
        chunk = None if media else PREFILL_CHUNK_TOKENS
        if prompt_memory_bytes(config, middle, new_tokens, dtype, chunk) <= available:
            low = middle
        else:
            high = middle - 1
    return low


def available_memory() -> int | None:
    """Memory the system can give without swapping (MemAvailable), or None where it cannot
    be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def refusal(config, prompt_tokens: int, new_tokens: int, dtype: str, input_names, drafting: bool,
            available: int | None, context: int) -> str | None:
    """The reason, in words, why this machine cannot generate from this prompt now; None if it can."""
    if available is None:
        return None
    chunk = prefill_chunk(prompt_tokens, input_names, drafting)
    needed = prompt_memory_bytes(config, prompt_tokens, new_tokens, dtype, chunk)
    if needed <= available:
        return None
    media = any(name in input_names for name in _MEDIA_INPUTS)
    fits = largest_prompt(config, new_tokens, dtype, media, available, context)
    gib = 1024 ** 3
    return (f"The prompt is {prompt_tokens:,} tokens; generating from it needs about {needed / gib:.1f} GiB of memory, "
            f"and this machine has {available / gib:.1f} GiB free, enough for a prompt of about {fits:,} tokens now. "
            "Shorten the conversation, remove files, or start a new conversation.")
