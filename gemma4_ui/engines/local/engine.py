"""The local engine: transformers `generate` on a worker thread, streamed token by token, in
the server's process or in a generation process of its own (generation_process.py).

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

import functools
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator

from gemma4_ui.core import family
from gemma4_ui.config import ASSISTANT_AUTO, ASSISTANT_OFF
from gemma4_ui.engines.drafting import CountingDrafter, DraftCounts, load_drafter, resolve_drafter
from gemma4_ui.engines.base import Engine, GenerationRequest
from gemma4_ui.core.events import Done, EngineError, ReplyStats
from gemma4_ui.engines.local.process import GenerationProcess, import_path, worker_spec
from gemma4_ui.engines.local.zerogpu import gpu_duration, on_gpu
from gemma4_ui.engines.loading import ResolvedModel, load_model, load_processor, resolve_model
from gemma4_ui.core.parsing import ReplyParser
from gemma4_ui.core.prompt import model_inputs, template_text
from gemma4_ui.engines import probabilities as token_probabilities

log = logging.getLogger(__name__)

# Loaded models by key. A ZeroGPU worker is a fork of the main process and finds them here.
_MODELS: dict[str, object] = {}
_ENGINE_NUMBERS = itertools.count()


class GenerationCancelled(Exception):
    """Raised inside `generate` by a cancelled streamer: generation ends at the next token."""


class TokenStream:
    """A streamer for `generate`: decodes each new token with special tokens kept and hands
    (token_id, text) pairs to the consuming thread.

    Decoding is tokenizers' `DecodeStream` (as transformers' own serving streamer does):
    constant time per token, and a token that ends inside a multi-byte character yields no
    text until the bytes that complete it arrive, so text never carries a broken character
    that a later token would take back. With assisted decoding one `put` carries every token
    a forward pass accepted, which is how accepted draft tokens are counted.
    """

    def __init__(self, tokenizer):
        from tokenizers.decoders import DecodeStream

        self._new_decoder = functools.partial(DecodeStream, [], skip_special_tokens=False)
        self._tokenizer = tokenizer.backend_tokenizer
        self._decoder = self._new_decoder()
        self._held: list[int] = []  # ids the decoder holds back: an unfinished character
        self._queue: queue.Queue = queue.Queue()
        self.cancelled = threading.Event()
        self._prompt_seen = False
        self.accepted = 0  # draft tokens the target kept

    def _step(self, token_id: int) -> str:
        try:
            text = self._decoder.step(self._tokenizer, token_id)
        except Exception:  # noqa: BLE001 - tokenizers raises when a byte run decodes differently once it grows
            # Invalid UTF-8 (random weights emit it): show the held-back bytes and this token
            # as they are, and decode afresh from the next one.
            self._held.append(token_id)
            self._decoder = self._new_decoder()
            return self._flush()
        if text is None:
            self._held.append(token_id)
            return ""
        self._held.clear()
        return text

    def _flush(self) -> str:
        text = self._tokenizer.decode(self._held, skip_special_tokens=False) if self._held else ""
        self._held = []
        return text

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
        token_ids = value.reshape(-1).tolist()
        self.accepted += len(token_ids) - 1  # one token per pass is the target's own
        for token_id in token_ids:
            self._queue.put((token_id, self._step(token_id)))

    def end(self) -> None:
        if rest := self._flush():  # bytes that never completed a character, as they are
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
def _generate_on_device(model_key: str, inputs, generation: dict, record_probabilities: bool = False) -> Iterator:
    """Run generate in a thread and yield batches of (token_id, text), then, when a drafter
    runs, one `DraftCounts`, and when asked, the `RecordedSteps` of every token's probability.
    Closing the generator cancels generation (in whichever process it runs) and joins the thread."""
    model, tokenizer, drafter = _MODELS[model_key]
    # Pixels and waveforms in the model's dtype (bfloat16 on a GPU); ids stay integers.
    inputs = inputs.to(model.device, dtype=model.dtype)
    streamer = TokenStream(tokenizer)
    if drafter is not None:
        generation = {**generation, "assistant_model": drafter.model}
    errors: list[BaseException] = []
    counts = DraftCounts()
    criteria = _stopping_criteria(streamer.cancelled)
    if record_probabilities:
        probabilities = token_probabilities.recorder()
        criteria.append(probabilities)
        generation = {**generation, "output_scores": True, "return_dict_in_generate": True}

    def run() -> None:
        if drafter is not None:
            drafter.start()
        try:
            model.generate(**inputs, **generation, streamer=streamer, stopping_criteria=criteria)
        except GenerationCancelled:
            streamer.end()
        except BaseException as err:  # noqa: BLE001 - reported to the consumer below
            errors.append(err)
            streamer.end()
        finally:
            if drafter is not None:
                counts.drafted, counts.accepted = drafter.stop(), streamer.accepted

    worker = threading.Thread(target=run, name="gemma4-generate", daemon=True)
    worker.start()
    try:
        yield from streamer.chunks(timeout=600)
    finally:  # also when the consumer closes us early (Stop): stop generate, never leave it running
        streamer.cancel()
        worker.join()
    if errors:
        raise errors[0]
    if drafter is not None:
        yield counts
    if record_probabilities:
        yield probabilities.result()


def load_weights(resolved: ResolvedModel, device: str, dtype: str, assistant: str, tokenizer=None):
    """Load the model (and its MTP drafter) where generation will run, and register them for
    `_generate_on_device`: (key, model, tokenizer). Fills in the status: device, dtype,
    context length, the drafter's name."""
    model = load_model(resolved, device, dtype)
    drafter = None
    if drafter_source := resolve_drafter(assistant, resolved.status):
        drafter = load_drafter(drafter_source, model, explicit=assistant != ASSISTANT_AUTO)
        if drafter is not None:
            resolved.status.assistant = drafter_source.status.name
    tokenizer = tokenizer if tokenizer is not None else load_processor(resolved).tokenizer
    return register(resolved, model, tokenizer, drafter), model, tokenizer


def register(resolved: ResolvedModel, model, tokenizer, drafter=None) -> str:
    # One entry per engine: two engines may serve the same checkpoint (with and without a drafter).
    key = f"{resolved.path}@{resolved.status.device}#{next(_ENGINE_NUMBERS)}"
    _MODELS[key] = (model, tokenizer, CountingDrafter(drafter) if drafter is not None else None)
    return key


def stop_token_ids(model) -> list[int]:
    return _as_list(model.generation_config.eos_token_id)


class LocalEngine(Engine):
    """transformers' own model, loaded here. With `separate_process` generation runs in a
    child process that holds the model (generation_process.py: the model's loop then never
    waits for the server's Python work); `prepare` is "module:function", called with
    (model, tokenizer) where the model is loaded (benchmarks change generate from outside)."""

    def __init__(self, model: str | None, device: str = "auto", dtype: str = "auto",
                 assistant: str = ASSISTANT_OFF, separate_process: bool = False, prepare: str | None = None):
        self.resolved: ResolvedModel = resolve_model(model)
        self.status = self.resolved.status
        self._device, self._dtype = device, dtype
        self._assistant = assistant
        self._separate_process, self._prepare = separate_process, prepare
        self._process: GenerationProcess | None = None
        self.processor = None
        self._key = ""

    @classmethod
    def from_settings(cls, settings) -> "LocalEngine":
        return cls(settings.model, settings.device, settings.dtype, settings.assistant,
                   separate_process=settings.generation_process)

    def load(self) -> "LocalEngine":
        processor = load_processor(self.resolved)
        if self._separate_process:
            self._process = GenerationProcess(worker_spec(self.resolved, self._device, self._dtype, self._assistant,
                                                          self._prepare))
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
        self.modalities = family.modalities(config)
        self._stop_ids = stop_ids
        # <|tool_response>: the model hands over to a tool.
        self._tool_stop = getattr(processor.tokenizer, "str_token_id", None)
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
        return _MODELS[self._key][0]

    @property
    def drafter(self):
        """The MTP drafter passed to generate, or None."""
        counting = _MODELS[self._key][2] if self._key else None
        return counting.model if counting is not None else None

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
        generated: list[int] = []
        recorded = None
        if self._process is not None:
            batches = self._process.generate(inputs, _sampling(request), request.token_probabilities)
        else:
            batches = _generate_on_device(self._key, inputs, _sampling(request), request.token_probabilities)
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
        if recorded is not None:
            done.token_probabilities = token_probabilities.from_generate(self.processor.tokenizer, generated, recorded)
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
