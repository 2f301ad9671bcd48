"""The local engine: transformers `generate` on a worker thread, streamed token by token, in
the server's process or in a generation process of its own (process.py).

Inputs are prepared and replies parsed here, on the CPU; `device.py` holds the models and
runs `generate` (the one part that touches the accelerator, also on ZeroGPU).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator

from gemma4_ui.config import ASSISTANT_OFF, CPU_MAX_PROMPT_TOKENS
from gemma4_ui.core import model_family
from gemma4_ui.core.events import EngineError, ReplyStats
from gemma4_ui.core.parsing import ReplyParser
from gemma4_ui.core.prompt import model_inputs, template_text
from gemma4_ui.core.repetition import RepetitionGuard
from gemma4_ui.engines import probabilities as token_probabilities
from gemma4_ui.engines.base import Engine, GenerationRequest, import_path
from gemma4_ui.engines.drafting import DraftCounts
from gemma4_ui.engines.loading import ResolvedModel, load_processor, resolve_model
from gemma4_ui.engines.local import memory
from gemma4_ui.engines.local.device import generate_on_device, load_weights, register, registered, stop_token_ids
from gemma4_ui.engines.local.process import (
    HEARTBEAT_TIMEOUT_SECONDS,
    STALL_TIMEOUT_SECONDS,
    GenerationProcess,
    GenerationProcessError,
    worker_spec,
)

log = logging.getLogger(__name__)


class LocalEngine(Engine):
    """transformers' own model, loaded here. With `separate_process` generation runs in a
    child process that holds the model (process.py: the model's loop then never
    waits for the server's Python work); `prepare` is "module:function", called with
    (model, tokenizer) where the model is loaded (benchmarks change generate from outside)."""

    def __init__(self, model: str | None, device: str = "auto", dtype: str = "auto",
                 assistant: str = ASSISTANT_OFF, separate_process: bool = False, prepare: str | None = None,
                 heartbeat_timeout: float = HEARTBEAT_TIMEOUT_SECONDS, stall_timeout: float = STALL_TIMEOUT_SECONDS,
                 memory_available: int | None = None, max_prompt_tokens: int | None = None):
        self.resolved: ResolvedModel = resolve_model(model)
        self.status = self.resolved.status
        self._device, self._dtype = device, dtype
        self._assistant = assistant
        self._separate_process, self._prepare = separate_process, prepare
        self._timeouts = heartbeat_timeout, stall_timeout  # the generation process's (process.py)
        # Bytes free for a prompt, as the memory check takes them (tests); None: the system's, on the CPU.
        self._memory_available = memory_available
        # The longest prompt one request may send (--max-prompt-tokens); None: by the device
        # (`prompt_limit`), 0: the model's context.
        self.max_prompt_tokens = max_prompt_tokens
        self._config = None
        self._process: GenerationProcess | None = None
        self.processor = None
        self._key = ""

    @classmethod
    def from_settings(cls, settings) -> "LocalEngine":
        return cls(settings.model, settings.device, settings.dtype, settings.assistant,
                   separate_process=settings.generation_process, max_prompt_tokens=settings.max_prompt_tokens)

    def load(self) -> "LocalEngine":
        processor = load_processor(self.resolved)
        if self._separate_process:
            self._process = GenerationProcess(worker_spec(self.resolved, self._device, self._dtype, self._assistant,
                                                          self._prepare), *self._timeouts)
            info = self._process.start()
            self.resolved.status = self.status = info.status
            return self._ready(processor, info.config, info.eos_token_ids)
        self._key, model, _ = load_weights(self.resolved, self._device, self._dtype, self._assistant,
                                           processor.tokenizer)
        if self._prepare:
            import_path(self._prepare)(model, processor.tokenizer)
        return self._ready(processor, model.config, stop_token_ids(model))

    def adopt(self, model, processor, drafter=None) -> "LocalEngine":
        """Serve `model` with `processor` (and an MTP `drafter`), in this process. `load` reads
        them from disk; benchmarks hand over models built in memory (bench/gpu_bench.py:
        random weights in the real E2B shape)."""
        self._key = register(self.resolved, model, processor.tokenizer, drafter)
        return self._ready(processor, model.config, stop_token_ids(model))

    def _ready(self, processor, config, stop_ids: list[int]) -> "LocalEngine":
        self.processor = processor
        self._config = config
        self.modalities = model_family.modalities(config)
        self._stop_ids = stop_ids
        # <|tool_response>: the model hands over to a tool.
        self._tool_stop = getattr(processor.tokenizer, "str_token_id", None)
        # No token stands for more characters than its own text holds, so a prompt of this
        # many characters per token of the context cannot fit, whatever its tokens.
        self._longest_token = max(map(len, processor.tokenizer.get_vocab()), default=0)
        log.info("ready: %s", self.status.describe())
        return self

    def close(self) -> None:
        """End the generation process, if one runs."""
        if self._process is not None:
            self._process.stop()

    @property
    def generation_pid(self) -> int | None:
        """The process generation runs in (this one's when not separate)."""
        return self._process.pid if self._process is not None else os.getpid()

    @property
    def loaded(self) -> bool:
        return bool(self._key) or self._process is not None

    @property
    def model(self):
        """The model, when it runs in this process."""
        if self._process is not None:
            raise AttributeError("the model runs in the generation process (separate_process=True)")
        return registered(self._key)[0]

    @property
    def drafter(self):
        """The MTP drafter passed to generate, or None."""
        counting = registered(self._key)[2] if self._key else None
        return counting.model if counting is not None else None

    def _too_big(self, prompt_tokens: int, new_tokens: int, inputs) -> str | None:
        """Why this machine cannot hold this prompt now (memory.py), or None. Checked on the CPU,
        where the host's memory is what generation uses."""
        available = self._memory_available
        if available is None and str(self.status.device).startswith("cpu"):
            available = memory.available_memory()
        if available is None or self._config is None:
            return None
        return memory.refusal(self._config, prompt_tokens, new_tokens, self.status.dtype, set(inputs.keys()),
                              bool(self.status.assistant),
                              available, self.context_length or prompt_tokens + new_tokens)

    @property
    def prompt_limit(self) -> int | None:
        """The most prompt tokens one request may send, below the context; None: the context
        alone limits it. One request holds the generation slot for its whole prompt pass,
        and on the CPU a prompt near the context takes minutes while every other user waits:
        there the default is CPU_MAX_PROMPT_TOKENS. On a GPU the pass is fast enough, and the
        default is the context."""
        limit = self.max_prompt_tokens
        if limit is None:
            limit = CPU_MAX_PROMPT_TOKENS if str(self.status.device).startswith("cpu") else 0
        if not limit or (self.context_length and limit >= self.context_length):
            return None
        return limit

    def _over_limit(self, prompt_tokens: int, spec, at_least: bool = False) -> str | None:
        """Why a prompt of `prompt_tokens` is refused by the per-request limit, or None."""
        limit = self.prompt_limit
        if limit is None or prompt_tokens <= limit:
            return None
        # The prompt holds the whole conversation: grown over many turns, only a new one helps.
        earlier = any(message.get("role") == "assistant" for message in spec.messages)
        advice = ("The prompt holds the whole conversation so far: start a new conversation, or shorten the message."
                  if earlier else "Shorten the message or remove media.")
        return (f"The prompt is {'at least ' if at_least else ''}{prompt_tokens:,} tokens, over this app's limit of "
                f"{limit:,} prompt tokens per request (--max-prompt-tokens, or GEMMA4_MAX_PROMPT_TOKENS), which keeps "
                f"one request from holding the model for long. {advice}")

    def _surely_too_long(self, prompt: str, new_tokens: int, spec) -> str | None:
        """Why a prompt cannot fit the context or the prompt limit, known from its length alone,
        or None (then the exact count decides). Every token is at most `_longest_token`
        characters of the prompt's text, and media only add tokens."""
        longest = getattr(self, "_longest_token", 0)
        if not longest:
            return None
        at_least = -(-len(prompt) // longest)
        if (refused := self._over_limit(at_least, spec, at_least=True)) is not None:
            return refused
        if not self.context_length or at_least + new_tokens <= self.context_length:
            return None
        return (f"The prompt is at least {at_least} tokens ({len(prompt)} characters); with {new_tokens} new tokens it "
                f"would exceed the model's context of {self.context_length}. Shorten the message, remove media or "
                "start a new conversation.")

    def stream(self, request: GenerationRequest, cancel: threading.Event) -> Iterator:
        started = time.perf_counter()
        # 1. Layers 2 and 3, on the CPU.
        prompt = template_text(self.processor, request.spec)
        if (refused := self._surely_too_long(prompt, request.max_new_tokens, request.spec)) is not None:
            yield EngineError(refused)  # before tokenizing it: megabytes of text take seconds
            return
        inputs = model_inputs(self.processor, request.spec)
        prompt_tokens = int(inputs["input_ids"].shape[-1])
        if (refused := self._over_limit(prompt_tokens, request.spec)) is not None:
            yield EngineError(refused)  # before its prompt pass holds the generation slot
            return
        if self.context_length and prompt_tokens + request.max_new_tokens > self.context_length:
            yield EngineError(
                f"The prompt is {prompt_tokens} tokens; with {request.max_new_tokens} new tokens it would exceed "
                f"the model's context of {self.context_length}. Remove media or start a new conversation."
            )
            return
        if (refused := self._too_big(prompt_tokens, request.max_new_tokens, inputs)) is not None:
            yield EngineError(refused)
            return
        # 2. Generate, parsing as tokens arrive.
        parser = ReplyParser(self.processor.tokenizer, prompt)
        guard = RepetitionGuard(request.repetition_guard)
        stats = ReplyStats(prompt_tokens=prompt_tokens)
        last_token = None
        generated: list[int] = []
        recorded = None
        if self._process is not None:
            batches = self._process.generate(inputs, _sampling(request), request.token_probabilities, cancel)
        else:
            batches = generate_on_device(self._key, inputs, _sampling(request), request.token_probabilities)
        try:
            for batch in batches:
                if cancel.is_set():
                    break
                if isinstance(batch, DraftCounts):
                    stats.drafted_tokens, stats.accepted_tokens = batch.drafted, batch.accepted
                    continue
                if isinstance(batch, token_probabilities.RecordedSteps):
                    recorded = batch
                    continue
                if stats.time_to_first_token is None:
                    stats.time_to_first_token = time.perf_counter() - started
                tokens = [token for token, _ in batch if token is not None]
                stats.generated_tokens += len(tokens)
                last_token = tokens[-1] if tokens else last_token
                if request.token_probabilities:
                    generated += tokens
                text = "".join(text for _, text in batch)
                yield from parser.feed(text)
                if guard.feed(text):
                    break
        except GenerationProcessError as err:  # said in words already (process.py)
            yield EngineError(str(err))
            return
        except Exception as err:  # noqa: BLE001 - e.g. out of memory: the chat reports it and goes on
            log.exception("generation failed")
            yield EngineError(f"Generation failed: {type(err).__name__}: {err}")
            return
        finally:
            batches.close()  # stops generate and joins it, also when our own consumer left early
        # 3. Why it stopped.
        stats.duration = time.perf_counter() - started
        if cancel.is_set():
            stats.stop_reason = "cancelled"
        elif guard.period is not None:
            stats.stop_reason = "repetition"
        elif last_token == self._tool_stop:
            stats.stop_reason = "tool_call"
        elif last_token in self._stop_ids:
            stats.stop_reason = "stop"
        else:
            stats.stop_reason = "length"
        events, done = parser.finish(stats)
        if recorded is not None:
            done.token_probabilities = token_probabilities.from_generate(self.processor.tokenizer, generated, recorded)
        yield from events
        yield done


def _sampling(request: GenerationRequest) -> dict:
    if request.temperature <= 0:
        return {"max_new_tokens": request.max_new_tokens, "do_sample": False, "top_p": None, "top_k": None,
                "temperature": None}
    sampling = {
        "max_new_tokens": request.max_new_tokens,
        "do_sample": True,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
    }
    if request.seed is not None:
        sampling["seed"] = request.seed  # not generate's: generate_on_device seeds the generator with it
    return sampling
