"""Find and load a Gemma 4 checkpoint: a Hub id, a local folder, or the bundled tiny model.

Only one failure falls back to the bundled model: the Hub cannot be reached and there is no
local copy. Everything else (unknown id, no access, out of memory) is raised as
`ModelLoadError` with a message the user can act on.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from gemma4_ui.config import BUNDLED_MODEL, DEFAULT_MODEL
from gemma4_ui.engines.backports import backport_mtp_kv_sharing
from gemma4_ui.engines.base import ModelLoadError, ModelStatus

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


@dataclass
class ResolvedModel:
    path: str  # what from_pretrained gets
    status: ModelStatus
    local_files_only: bool


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP check, so an offline start does not sit through the Hub client's retries."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def is_cached(model_id: str) -> bool:
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(model_id, local_files_only=True)
        return True
    except (OSError, ValueError):
        return False


def resolve_model(requested: str | None) -> ResolvedModel:
    """Decide where the weights come from, without loading them."""
    requested = requested or DEFAULT_MODEL
    if requested == "tiny":
        return ResolvedModel(str(BUNDLED_MODEL), ModelStatus(requested, "tiny-gemma4", "bundled"), True)
    if Path(requested).expanduser().is_dir():
        path = str(Path(requested).expanduser())
        return ResolvedModel(path, ModelStatus(requested, Path(path).name, "local"), True)
    if Path(requested).expanduser().exists() or requested.startswith((".", "/", "~")):
        raise ModelLoadError(f"{requested} is not a model folder (expected a folder with config.json)")
    if is_cached(requested):
        return ResolvedModel(requested, ModelStatus(requested, requested, "cache"), True)
    if not hub_reachable():
        notice = f"The Hugging Face Hub is unreachable and {requested} is not cached here, so the bundled model runs instead"
        log.warning(notice)
        return ResolvedModel(str(BUNDLED_MODEL), ModelStatus(requested, "tiny-gemma4", "bundled", notice=notice), True)
    return ResolvedModel(requested, ModelStatus(requested, requested, "hub"), False)


def pick_device(device: str, dtype: str) -> tuple[str, "torch.dtype"]:
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("--device cuda was asked for, but PyTorch sees no CUDA GPU")
    if dtype == "auto":
        # bfloat16 on GPUs; float32 on the CPU, where bfloat16 matmuls are slow.
        return device, torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        return device, {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype]
    except KeyError:
        raise ModelLoadError(f"--dtype must be auto, bfloat16, float16 or float32, not {dtype!r}") from None


def load_processor(resolved: ResolvedModel):
    """The checkpoint's own processor, with its own chat template and response template:
    revisions and sizes differ (26B-A4B and 31B write an empty thought when thinking is off).
    The bundle's templates are only the fallback, for a checkpoint that ships none."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(resolved.path, local_files_only=resolved.local_files_only)
    except Exception as err:  # noqa: BLE001 - every cause is reported, with the model named
        raise ModelLoadError(explain_load_error(resolved.status.requested, err)) from err
    if not processor.chat_template:
        processor.chat_template = (BUNDLED_MODEL / "chat_template.jinja").read_text()
        note = f"{resolved.status.name} ships no chat template, so the bundled Gemma 4 template renders its prompts"
        log.warning(note)
        resolved.status.notice = "; ".join(filter(None, [resolved.status.notice, note]))
    return processor


def load_model(resolved: ResolvedModel, device: str = "auto", dtype: str = "auto"):
    """Load the weights onto the device. transformers logs a progress bar while it reads them."""
    from transformers import AutoModelForMultimodalLM


    backport_mtp_kv_sharing()  # before the model is built: it decides which layers keep their cache
    device, torch_dtype = pick_device(device, dtype)
    log.info("loading %s (%s) on %s as %s", resolved.status.name, resolved.path, device, torch_dtype)
    try:
        model = AutoModelForMultimodalLM.from_pretrained(
            resolved.path,
            dtype=torch_dtype,
            device_map=device,
            local_files_only=resolved.local_files_only,
        )
    except Exception as err:  # noqa: BLE001
        raise ModelLoadError(explain_load_error(resolved.status.requested, err)) from err
    model.eval()
    resolved.status.device = device
    resolved.status.dtype = str(torch_dtype).removeprefix("torch.")
    text_config = getattr(model.config, "text_config", model.config)
    resolved.status.context_length = getattr(text_config, "max_position_embeddings", None)
    return model


def explain_load_error(model_id: str, err: Exception) -> str:
    text = f"{type(err).__name__}: {err}"
    chain = []
    cause: BaseException | None = err
    while cause is not None:
        chain.append(type(cause).__name__)
        cause = cause.__cause__ or cause.__context__
    if "RepositoryNotFoundError" in chain:
        return f"{model_id} was not found on the Hugging Face Hub (check the id, or log in if it is private)."
    if "GatedRepoError" in chain:
        return f"{model_id} is gated: accept its license on huggingface.co and log in (`hf auth login`)."
    if "OutOfMemoryError" in chain or "out of memory" in text.lower():
        return f"Not enough memory to load {model_id}: try a smaller checkpoint, --dtype bfloat16, or another device."
    return f"Could not load {model_id}: {text}"
