"""Generation in a process of its own, so that the model's loop never waits for the web server.

`generate` is a Python loop. For a small model on the CPU, and for any model on a GPU (where
the CPU launches every kernel), it holds the interpreter lock most of the time. In the
server's process it shares that lock with Gradio's event loop, the reply parser and every
streamed update, and waits for them: the bundled model ran measurably slower inside the app
than on its own (py-spy showed the server's threads holding the lock; `make bench` measures
the difference).

The worker is a spawned child, not a fork: forking a process whose OpenMP pool or CUDA is
initialised is unsafe. It loads the model itself and runs the engine's own generation
(`device.generate_on_device`) in a thread per request, as the engine does in the
server's process. Requests and batches cross in multiprocessing queues; tensors go through
shared memory (torch.multiprocessing's reductions). Stop works as in-process: the consumer's close sends a
cancel, and waits until the child's generate has ended.

If the child dies (killed, out of memory), the streams in flight end with an error that
says so, and the next request starts a new child.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from gemma4_ui.engines.base import ModelLoadError, import_path
from gemma4_ui.engines.local import device

log = logging.getLogger(__name__)

# How long a closed stream waits for the child to confirm that its generate has stopped.
CANCEL_WAIT_SECONDS = 30.0
# How often the reader looks whether the child is still alive while no message comes.
ALIVE_CHECK_SECONDS = 1.0


class GenerationProcessError(RuntimeError):
    """The generation process could not start, or ended while generating."""


@dataclass
class WorkerSpec:
    """What the child needs to load the model as the engine would have (picklable)."""

    resolved: object  # loading.ResolvedModel
    device: str
    dtype: str
    assistant: str
    threads: int  # torch intra-op threads, as the parent has them
    # "module:function" called with (model, tokenizer) once loaded, in the child: for
    # benchmarks and tests that change how generate runs from outside the app's code.
    prepare: str | None = None


@dataclass
class WorkerInfo:
    """What the parent needs to know of the model it no longer holds."""

    status: object  # engine.ModelStatus, with device, dtype, context length and drafter filled in
    config: object  # the model's config (its modalities)
    eos_token_ids: list[int]


def _picklable(err: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - e.g. an exception holding a tensor or a lock
        return GenerationProcessError(f"{type(err).__name__}: {err}")


def _ended(process) -> GenerationProcessError:
    return GenerationProcessError(f"The generation process ended (exit code {process.exitcode}); "
                                  "the next message starts a new one.")


# -- the child ---------------------------------------------------------------------------------


def _serve(spec: WorkerSpec, requests, replies) -> None:
    """The child's main: load, say ready, then serve requests until told to exit (or the
    parent is gone)."""
    import torch

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s generation process: %(message)s")
    torch.set_num_threads(spec.threads)
    parent = os.getppid()
    try:
        key, model, tokenizer = device.load_weights(spec.resolved, spec.device, spec.dtype, spec.assistant)
        if spec.prepare:
            import_path(spec.prepare)(model, tokenizer)
    except ModelLoadError as err:
        replies.put(("load_error", str(err)))
        return
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        replies.put(("load_error", f"Could not load {spec.resolved.status.requested}: {type(err).__name__}: {err}"))
        return
    replies.put(("ready", WorkerInfo(spec.resolved.status, model.config,
                                     device.stop_token_ids(model))))
    cancels: dict[int, threading.Event] = {}

    def run(rid: int, inputs, generation: dict, record: bool, cancel: threading.Event) -> None:
        batches = device.generate_on_device(key, inputs, generation, record)
        error = None
        try:
            for batch in batches:
                if cancel.is_set():
                    break
                replies.put((rid, "batch", batch))
        except BaseException as err:  # noqa: BLE001 - the parent's stream raises it
            error = err
        finally:
            batches.close()  # stops generate and joins it, before the parent hears the end
            cancels.pop(rid, None)
        replies.put((rid, "error", _picklable(error)) if error is not None else (rid, "end", None))

    while True:
        try:
            message = requests.get(timeout=ALIVE_CHECK_SECONDS)
        except queue.Empty:
            if os.getppid() != parent:  # the server was killed: nobody will read what we make
                return
            continue
        if message[0] == "exit":
            return
        if message[0] == "cancel":
            if (event := cancels.get(message[1])) is not None:
                event.set()
            continue
        _, rid, inputs, generation, record = message
        cancels[rid] = threading.Event()
        threading.Thread(target=run, args=(rid, inputs, generation, record, cancels[rid]),
                         name=f"generate-{rid}", daemon=True).start()


# -- the parent --------------------------------------------------------------------------------


class GenerationProcess:
    """The child that holds the model, seen from the server: `start()` once, then
    `generate(...)` from any thread, as many at once as the queue lets through."""

    def __init__(self, spec: WorkerSpec):
        self._spec = spec
        self._lock = threading.Lock()  # starts and restarts
        self._process = None
        self._requests = None
        self._streams: dict[int, queue.Queue] = {}
        self._ids = itertools.count()

    def start(self) -> WorkerInfo:
        """Start the child and wait until its model is loaded. Raises ModelLoadError."""
        import torch.multiprocessing as mp

        context = mp.get_context("spawn")
        requests, replies = context.Queue(), context.Queue()
        process = context.Process(target=_serve, args=(self._spec, requests, replies),
                                  name="gemma4-generation", daemon=True)
        process.start()
        while True:  # loading a large checkpoint takes minutes: wait as long as the child lives
            try:
                kind, payload = replies.get(timeout=ALIVE_CHECK_SECONDS)
                break
            except queue.Empty:
                if not process.is_alive():
                    raise ModelLoadError(f"The generation process ended while loading the model "
                                         f"(exit code {process.exitcode}).") from None
        if kind == "load_error":
            process.join()
            raise ModelLoadError(payload)
        self._process, self._requests = process, requests
        threading.Thread(target=self._read, args=(process, replies), name="generation-replies", daemon=True).start()
        log.info("generating in process %d", process.pid)
        return payload

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _read(self, process, replies) -> None:
        """Route the child's messages to their streams; when it dies, end them all."""
        while True:
            try:
                rid, kind, payload = replies.get(timeout=ALIVE_CHECK_SECONDS)
            except queue.Empty:
                if process.is_alive():
                    continue
                break
            except (EOFError, OSError):
                break
            if (stream := self._streams.get(rid)) is not None:  # none: a stream closed early
                stream.put((kind, payload))
        with self._lock:
            if self._process is not process:  # stopped on purpose (stop())
                return
            self._process = None  # the next request starts a new one
        died = _ended(process)
        log.error("%s", died)
        for stream in list(self._streams.values()):
            stream.put(("error", died))

    def _running(self):
        with self._lock:
            # None: the reader saw the child die; not alive: it died and the reader has not looked yet.
            if self._process is None or not self._process.is_alive():
                log.warning("starting a new generation process")
                self.start()
            return self._process, self._requests

    def generate(self, inputs, generation: dict, record_probabilities: bool = False) -> Iterator:
        """What `device.generate_on_device` yields, computed in the child. Closing the
        generator cancels generation there and waits until it has stopped."""
        process, requests = self._running()
        rid = next(self._ids)
        stream: queue.Queue = queue.Queue()
        self._streams[rid] = stream
        ended = False
        try:
            requests.put(("generate", rid, inputs, generation, record_probabilities))
            while True:
                try:
                    kind, payload = stream.get(timeout=ALIVE_CHECK_SECONDS)
                except queue.Empty:
                    if process.is_alive():
                        continue
                    kind, payload = "error", _ended(process)  # before the reader saw it
                if kind == "batch":
                    yield payload
                    continue
                ended = True
                if kind == "error":
                    raise payload
                return
        finally:
            if not ended:
                self._cancel(requests, rid, stream)
            self._streams.pop(rid, None)

    def _cancel(self, requests, rid: int, stream: queue.Queue) -> None:
        """Tell the child to stop generation `rid`, and wait until it has (its end, or the
        reader's word that the child is gone)."""
        requests.put(("cancel", rid))
        try:
            while stream.get(timeout=CANCEL_WAIT_SECONDS)[0] == "batch":
                pass
        except queue.Empty:
            log.warning("generation %d did not confirm its cancel within %.0f s", rid, CANCEL_WAIT_SECONDS)

    def stop(self) -> None:
        """End the child (tests, and a server shutting down)."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.is_alive():
            self._requests.put(("exit",))
            process.join(timeout=10)
            if process.is_alive():
                process.kill()


def worker_spec(resolved, device: str, dtype: str, assistant: str, prepare: str | None = None) -> WorkerSpec:
    import torch

    return WorkerSpec(resolved, device, dtype, assistant, torch.get_num_threads(), prepare)
