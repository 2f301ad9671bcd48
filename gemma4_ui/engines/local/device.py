"""The local engine's side on the device: the loaded models, the streamer and `generate` on a
worker thread. It runs in the server's process, in the generation process (process.py) or in
a ZeroGPU worker (zerogpu.py); the engine (engine.py) only prepares inputs and reads batches.

Only `generate_on_device` touches the accelerator. On a ZeroGPU Space it is wrapped with
`@spaces.GPU` (a no-op elsewhere), so it must take picklable arguments and find the model in
a module-level table.

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
import queue
import threading
from collections.abc import Iterator

from gemma4_ui.config import ASSISTANT_AUTO
from gemma4_ui.engines import probabilities as token_probabilities
from gemma4_ui.engines.drafting import CountingDrafter, DraftCounts, load_drafter, resolve_drafter
from gemma4_ui.engines.loading import ResolvedModel, load_model, load_processor
from gemma4_ui.engines.local.memory import prefill_chunk
from gemma4_ui.engines.local.zerogpu import gpu_duration, on_gpu

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
def generate_on_device(model_key: str, inputs, generation: dict, record_probabilities: bool = False) -> Iterator:
    """Run generate in a thread and yield batches of (token_id, text), then, when a drafter
    runs, one `DraftCounts`, and when asked, the `RecordedSteps` of every token's probability.
    Closing the generator cancels generation (in whichever process it runs) and joins the thread."""
    model, tokenizer, drafter = _MODELS[model_key]
    generation = dict(generation)
    seed = generation.pop("seed", None)
    # Pixels and waveforms in the model's dtype (bfloat16 on a GPU); ids stay integers.
    inputs = inputs.to(model.device, dtype=model.dtype)
    streamer = TokenStream(tokenizer)
    if drafter is not None:
        generation = {**generation, "assistant_model": drafter.model}
    # A long prompt passes in chunks: its attention's memory grows with the prompt, not its square (memory.py).
    chunk = prefill_chunk(int(inputs["input_ids"].shape[-1]), set(inputs.keys()), drafter is not None)
    if chunk is not None and "prefill_chunk_size" not in generation:
        generation = {**generation, "prefill_chunk_size": chunk}
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
            if seed is not None:  # generate samples from torch's global generator
                import torch

                torch.manual_seed(seed)
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
    `generate_on_device`: (key, model, tokenizer). Fills in the status: device, dtype,
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


def _as_list(value) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def registered(model_key: str):
    """(model, tokenizer, drafter) registered under `model_key`; the drafter is a `CountingDrafter` or None."""
    return _MODELS[model_key]
