"""The local engine: transformers `generate` on a worker thread, streamed token by token.

Inputs are prepared on the CPU; only `_generate_on_device` touches the accelerator. On a
ZeroGPU Space it is wrapped with `@spaces.GPU` (a no-op elsewhere), so it must take
picklable arguments and find the model in a module-level table.

One cancel path, in this process or in ZeroGPU's: the consumer checks the user's cancel
flag between batches and closes the generator; closing it cancels the streamer and the
stopping criterion, which live with `generate` wherever it runs. (`spaces` runs the
generator in a forked worker and forwards a close as its `stop_event`, which the worker
turns into `close()` on the generator there; a flag set in this process would never reach
the fork.)
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator

from .engine import Engine, GenerationRequest
from .events import Done, EngineError, ReplyStats
from .gpu import gpu_duration, on_gpu
from .loading import ResolvedModel, load_model, load_processor, resolve_model
from .parsing import ReplyParser
from .prompt import model_inputs, template_text

log = logging.getLogger(__name__)

# Loaded models by key. A ZeroGPU worker is a fork of the main process and finds them here.
_MODELS: dict[str, object] = {}


class GenerationCancelled(Exception):
    """Raised inside `generate` by a cancelled streamer: generation ends at the next token."""


class TokenStream:
    """A streamer for `generate`: decodes each new token with special tokens kept and hands
    (token_id, text) pairs to the consuming thread.

    Incremental decoding over a small window of recent tokens (constant time per token): a
    token that ends inside a multi-byte character waits for the bytes that complete it, so
    text never carries a broken character that a later token would have to take back.
    """

    MAX_WINDOW = 8  # tokens; past this an unfinished character is emitted as it is

    def __init__(self, tokenizer):
        self._backend = tokenizer.backend_tokenizer
        self._queue: queue.Queue = queue.Queue()
        self.cancelled = threading.Event()
        self._prompt_seen = False
        self._ids: list[int] = []
        self._prefix = 0  # window start
        self._read = 0  # end of what has been emitted

    def _decode(self, ids: list[int]) -> str:
        return self._backend.decode(ids, skip_special_tokens=False)

    def _step(self, token_id: int) -> str:
        self._ids.append(token_id)
        emitted = self._decode(self._ids[self._prefix:self._read])
        text = self._decode(self._ids[self._prefix:])
        waiting = text.endswith("\ufffd") and len(self._ids) - self._prefix < self.MAX_WINDOW
        if len(text) <= len(emitted) or waiting:
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return text[len(emitted):]

    def cancel(self) -> None:
        """From any thread: `generate` stops at its next token (as transformers' serving streamer)."""
        self.cancelled.set()

    # -- called by generate ---------------------------------------------------------------
    def put(self, value) -> None:
        if self.cancelled.is_set():
            raise GenerationCancelled()
        if not self._prompt_seen:  # generate first puts the prompt
            self._prompt_seen = True
            return
        for token_id in value.reshape(-1).tolist():
            self._queue.put((token_id, self._step(token_id)))

    def end(self) -> None:
        rest = self._decode(self._ids[self._prefix:])[len(self._decode(self._ids[self._prefix:self._read])):]
        if rest:
            self._queue.put((None, rest))
        self._queue.put(None)

    # -- called by the consumer -----------------------------------------------------------
    def chunks(self, timeout: float) -> Iterator[list[tuple[int | None, str]]]:
        """Everything available at once, so a slow consumer catches up in one step."""
        while True:
            item = self._queue.get(timeout=timeout)
            batch = []
            while item is not None:
                batch.append(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                yield batch
            if item is None:
                return


def _stopping_criteria(cancelled: threading.Event):
    from transformers import StoppingCriteria, StoppingCriteriaList

    class Cancelled(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return cancelled.is_set()

    return StoppingCriteriaList([Cancelled()])


@on_gpu(duration=gpu_duration)
def _generate_on_device(model_key: str, inputs, generation: dict) -> Iterator:
    """Run generate in a thread and yield batches of (token_id, text). Closing the generator
    cancels generation (in whichever process it runs) and joins the thread."""
    model, tokenizer = _MODELS[model_key]
    inputs = inputs.to(model.device)
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
    streamer = TokenStream(tokenizer)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            model.generate(**inputs, **generation, streamer=streamer,
                           stopping_criteria=_stopping_criteria(streamer.cancelled))
        except GenerationCancelled:
            streamer.end()
        except BaseException as err:  # noqa: BLE001 - reported to the consumer below
            errors.append(err)
            streamer.end()

    worker = threading.Thread(target=run, name="gemma4-generate", daemon=True)
    worker.start()
    try:
        yield from streamer.chunks(timeout=600)
    finally:  # also when the consumer closes us early (Stop): stop generate, never leave it running
        streamer.cancel()
        worker.join()
    if errors:
        raise errors[0]


class LocalEngine(Engine):
    def __init__(self, model: str | None, device: str = "auto", dtype: str = "auto"):
        self.resolved: ResolvedModel = resolve_model(model)
        self.status = self.resolved.status
        self._device, self._dtype = device, dtype
        self.processor = None
        self._key = ""

    def load(self) -> "LocalEngine":
        processor = load_processor(self.resolved)
        return self.adopt(load_model(self.resolved, self._device, self._dtype), processor)

    def adopt(self, model, processor) -> "LocalEngine":
        """Serve `model` with `processor`. `load` reads both from disk; benchmarks hand over
        a model built in memory (bench/gpu_bench.py: random weights in the real E2B shape)."""
        self.processor = processor
        self._key = f"{self.resolved.path}@{self.status.device}"
        _MODELS[self._key] = (model, self.processor.tokenizer)
        self._stop_ids = _as_list(model.generation_config.eos_token_id)
        self._tool_stop = self.processor.tokenizer.convert_tokens_to_ids("<|tool_response>")
        log.info("ready: %s", self.status.describe())
        return self

    @property
    def loaded(self) -> bool:
        return bool(self._key)

    @property
    def model(self):
        return _MODELS[self._key][0]

    def stream(self, request: GenerationRequest, cancel: threading.Event) -> Iterator:
        started = time.perf_counter()
        # 1. Layers 2 and 3, on the CPU.
        prompt = template_text(self.processor, request.spec)
        inputs = model_inputs(self.processor, request.spec)
        prompt_tokens = int(inputs["input_ids"].shape[-1])
        if self.context_length and prompt_tokens + request.max_new_tokens > self.context_length:
            yield EngineError(
                f"The prompt is {prompt_tokens} tokens; with {request.max_new_tokens} new tokens it would exceed "
                f"the model's context of {self.context_length}. Remove media or start a new conversation."
            )
            return
        # 2. Generate, parsing as tokens arrive.
        parser = ReplyParser(self.processor.tokenizer, prompt)
        stats = ReplyStats(prompt_tokens=prompt_tokens)
        last_token = None
        batches = _generate_on_device(self._key, inputs, _sampling(request))
        try:
            for batch in batches:
                if cancel.is_set():
                    break
                if stats.time_to_first_token is None:
                    stats.time_to_first_token = time.perf_counter() - started
                tokens = [token for token, _ in batch if token is not None]
                stats.generated_tokens += len(tokens)
                last_token = tokens[-1] if tokens else last_token
                yield from parser.feed("".join(text for _, text in batch))
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
        elif last_token == self._tool_stop:
            stats.stop_reason = "tool_call"
        elif last_token in self._stop_ids:
            stats.stop_reason = "stop"
        else:
            stats.stop_reason = "length"
        events, done = parser.finish(stats)
        yield from events
        yield done


def _sampling(request: GenerationRequest) -> dict:
    if request.temperature <= 0:
        return {"max_new_tokens": request.max_new_tokens, "do_sample": False, "top_p": None, "top_k": None,
                "temperature": None}
    return {
        "max_new_tokens": request.max_new_tokens,
        "do_sample": True,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
    }


def _as_list(value) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


__all__ = ["LocalEngine", "TokenStream", "Done"]
