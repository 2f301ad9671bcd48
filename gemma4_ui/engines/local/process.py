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
says so, in words, and a new child is started. A child that is alive but stuck (a kernel
that never returns, a process stopped or thrashing) would hold the only generation slot for
good: it sends a beat every HEARTBEAT_SECONDS, from a thread of its own, also while it
generates; the parent kills a child whose beats stop for its heartbeat timeout and starts a
new one, and the streams in flight end with an error that says so. A child stuck in Python
(a loop or a wait that lets the beat thread run) still beats: so each beat also says how far
the model has got (forward passes of it and of its decoder layers) and whether anything is
generating, and a child that generates without getting any further for its stall timeout is
taken for stuck too.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import queue
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gemma4_ui.engines.base import ModelLoadError, import_path
from gemma4_ui.engines.local import device

log = logging.getLogger(__name__)

# How long a closed stream waits for the child to confirm that its generate has stopped.
CANCEL_WAIT_SECONDS = 30.0
# How often the reader looks whether the child is still alive while no message comes.
ALIVE_CHECK_SECONDS = 1.0
# How often the child says it is alive, and how long the parent waits for a word from it
# (a beat or a batch) before it takes the child for stuck: the beat comes from a thread of
# its own, so only a process that cannot run Python at all (a call that holds the
# interpreter lock, a stopped or thrashing process) misses it.
HEARTBEAT_SECONDS = 1.0
HEARTBEAT_TIMEOUT_SECONDS = 30.0
# How long a generating child may go without finishing a single layer before it is taken for
# stuck: long enough for one layer of a long prompt's chunk on a slow CPU.
STALL_TIMEOUT_SECONDS = 300.0

STUCK = "The generation process stopped responding and was restarted; ask again."


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
    """Why the streams of a child that died end, in words."""
    code = process.exitcode
    if code == -signal.SIGKILL:  # what the kernel's out-of-memory killer sends
        return GenerationProcessError(
            "The generation process was killed (exit code -9, SIGKILL), most likely because this machine ran out "
            "of memory: the prompt or its files need more memory than is free. The process was restarted; ask "
            "again with a shorter prompt or fewer files.")
    return GenerationProcessError(f"The generation process ended (exit code {code}); "
                                  "it was restarted; ask again.")


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

    progress = [0]  # forward passes finished, of the model and of each of its decoder layers

    def advanced(*_) -> None:
        progress[0] += 1

    for module in model.modules():
        if module is model or type(module).__name__.endswith("DecoderLayer"):
            module.register_forward_hook(advanced)
    cancels: dict[int, threading.Event] = {}  # the generations in flight

    def beat() -> None:
        while True:
            time.sleep(HEARTBEAT_SECONDS)
            replies.put((None, "beat", (progress[0], bool(cancels))))

    threading.Thread(target=beat, name="heartbeat", daemon=True).start()

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

    def __init__(self, spec: WorkerSpec, heartbeat_timeout: float = HEARTBEAT_TIMEOUT_SECONDS,
                 stall_timeout: float = STALL_TIMEOUT_SECONDS):
        self._spec = spec
        self._heartbeat_timeout = heartbeat_timeout
        self._stall_timeout = stall_timeout
        self._lock = threading.Lock()  # starts and restarts (held while a child loads)
        self._state = threading.Lock()  # the current child, briefly
        self._process = None
        self._requests = None
        self._stopped: set[int] = set()  # pids of the children stop() ended on purpose
        self._stuck: set[int] = set()  # pids of the children killed as stuck (no beats, or no progress)
        self._streams: dict[int, tuple[object, queue.Queue]] = {}  # rid → (its child, its stream)
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
        with self._state:
            self._process, self._requests = process, requests
        threading.Thread(target=self._read, args=(process, replies), name="generation-replies", daemon=True).start()
        log.info("generating in process %d", process.pid)
        return payload

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _read(self, process, replies) -> None:
        """Route the child's messages to their streams; when it dies or stops beating, end
        its streams and start a new child."""
        heard = moved = time.monotonic()
        progress, stuck = None, ""
        while True:
            try:
                rid, kind, payload = replies.get(timeout=ALIVE_CHECK_SECONDS)
            except queue.Empty:
                if not process.is_alive():
                    break
                if time.monotonic() - heard > self._heartbeat_timeout:
                    stuck = f"sent nothing for {self._heartbeat_timeout:.0f} s"
                    break
                continue
            except (EOFError, OSError):
                break
            heard = time.monotonic()
            if kind == "beat":
                done, generating = payload
                if not generating or done != progress:
                    progress, moved = done, heard
                elif heard - moved > self._stall_timeout:
                    stuck = f"generated without progress for {self._stall_timeout:.0f} s"
                    break
                continue
            if (entry := self._streams.get(rid)) is not None:  # none: a stream closed early
                entry[1].put((kind, payload))
        if stuck:
            self._stuck.add(process.pid)
            process.kill()
            process.join(timeout=10)
        with self._state:
            if process.pid in self._stopped:  # stopped on purpose (stop())
                return
            if self._process is process:
                self._process = None
        died = self._why(process)
        if stuck:
            log.error("the generation process %d %s: killed", process.pid, stuck)
        else:
            log.error("%s", died)
        for child, stream in list(self._streams.values()):
            if child is process:
                stream.put(("error", died))
        threading.Thread(target=self._restart, name="generation-restart", daemon=True).start()

    def _why(self, process) -> GenerationProcessError:
        return GenerationProcessError(STUCK) if process.pid in self._stuck else _ended(process)

    def _restart(self) -> None:
        try:
            self._running()
        except Exception:  # noqa: BLE001 - the next request tries again, and reports it
            log.exception("could not restart the generation process")

    def _running(self, cancel: threading.Event | None = None):
        """The live child (started if there is none), or None once `cancel` is set while a
        child is being started: a Stop does not wait for a model to load."""
        while not self._lock.acquire(timeout=0.1):
            if cancel is not None and cancel.is_set():
                return None
        try:
            # None: the reader saw the child die; not alive: it died and the reader has not looked yet.
            if self._process is None or not self._process.is_alive():
                log.warning("starting a new generation process")
                self.start()
            return self._process, self._requests
        finally:
            self._lock.release()

    def generate(self, inputs, generation: dict, record_probabilities: bool = False,
                 cancel: threading.Event | None = None) -> Iterator:
        """What `device.generate_on_device` yields, computed in the child. Closing the
        generator cancels generation there and waits until it has stopped; `cancel` set
        while a new child is starting ends it with nothing."""
        running = self._running(cancel)
        if running is None:
            return
        process, requests = running
        rid = next(self._ids)
        stream: queue.Queue = queue.Queue()
        self._streams[rid] = (process, stream)
        ended = False
        try:
            requests.put(("generate", rid, inputs, generation, record_probabilities))
            while True:
                try:
                    kind, payload = stream.get(timeout=ALIVE_CHECK_SECONDS)
                except queue.Empty:
                    if process.is_alive():
                        continue
                    kind, payload = "error", self._why(process)  # before the reader saw it
                if kind == "batch":
                    yield payload
                    continue
                ended = True
                if kind == "error":
                    raise payload
                return
        finally:
            if not ended:
                self._cancel(process, requests, rid, stream)
            self._streams.pop(rid, None)

    def _cancel(self, process, requests, rid: int, stream: queue.Queue) -> None:
        """Tell the child to stop generation `rid`, and wait until it has (its end, or the
        child is gone: dead, or killed for missing its beats)."""
        requests.put(("cancel", rid))
        deadline = time.monotonic() + CANCEL_WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                if stream.get(timeout=min(ALIVE_CHECK_SECONDS, CANCEL_WAIT_SECONDS))[0] != "batch":
                    return
            except queue.Empty:
                if not process.is_alive():
                    return
        log.warning("generation %d did not confirm its cancel within %.0f s", rid, CANCEL_WAIT_SECONDS)

    def stop(self) -> None:
        """End the child (tests, and a server shutting down)."""
        with self._lock, self._state:
            process, self._process = self._process, None
            if process is not None:
                self._stopped.add(process.pid)
        if process is not None and process.is_alive():
            self._requests.put(("exit",))
            process.join(timeout=10)
            if process.is_alive():
                process.kill()


def worker_spec(resolved, device: str, dtype: str, assistant: str, prepare: str | None = None) -> WorkerSpec:
    import torch

    return WorkerSpec(resolved, device, dtype, assistant, torch.get_num_threads(), prepare)
